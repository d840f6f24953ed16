# Table 1: VQ with BPTT. Paper: 76.6(76.3) (one-step: 77.7(77.4)).
_base_ = ["./vq.py"]
model = dict(decode_head=dict(ham_cfg=dict(grad="bptt")))
