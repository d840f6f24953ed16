# Table 1: NMF with BPTT through the K=6 steps. Paper: 77.4(77.0) (one-step: 78.3(77.8)).
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(ham_cfg=dict(grad="bptt")))
