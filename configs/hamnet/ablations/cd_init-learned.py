# Table 8: CD, learned initial dictionary (BPTT). Paper: 75.0(73.7).
_base_ = ["./cd.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="learned", grad="bptt")))
