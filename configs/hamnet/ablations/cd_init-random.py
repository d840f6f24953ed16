# Table 8: CD, random initial dictionary at every forward. Paper: 77.9(77.3).
_base_ = ["./cd.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="random")))
