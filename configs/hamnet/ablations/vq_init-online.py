# Table 8: VQ, warm start with online update. Paper: 78.0(77.2).
_base_ = ["./vq.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="online")))
