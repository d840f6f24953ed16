# Table 8: VQ, fixed initial dictionary. Paper: 77.3(76.9).
_base_ = ["./vq.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="fixed")))
