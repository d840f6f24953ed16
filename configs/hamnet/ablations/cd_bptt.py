# Table 1: CD with BPTT. Paper: 75.0(74.6) (one-step: 78.1(77.5)).
_base_ = ["./cd.py"]
model = dict(decode_head=dict(ham_cfg=dict(grad="bptt")))
