# Table 8: NMF, learned initial dictionary (trained by BPTT, the only way it gets a gradient). Paper: 76.8(76.5).
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="learned", grad="bptt")))
