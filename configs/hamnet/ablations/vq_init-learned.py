# Table 8: VQ, learned initial dictionary (BPTT). Paper: 75.9(75.8).
_base_ = ["./vq.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="learned", grad="bptt")))
