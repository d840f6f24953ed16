# Table 9: CD with temperature T=1 (inv_t 1). Paper: 77.1(77.0).
_base_ = ["./cd.py"]
model = dict(decode_head=dict(ham_cfg=dict(inv_t=1)))
