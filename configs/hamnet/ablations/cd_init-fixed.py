# Table 8: CD, fixed initial dictionary. Paper: 77.7(77.4).
_base_ = ["./cd.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="fixed")))
