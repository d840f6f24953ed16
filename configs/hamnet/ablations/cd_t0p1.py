# Table 9: CD with temperature T=0.1 (inv_t 10). Paper: 78.2(77.5).
_base_ = ["./cd.py"]
model = dict(decode_head=dict(ham_cfg=dict(inv_t=10)))
