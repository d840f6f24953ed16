# Table 8: NMF, dictionary drawn once at construction and fixed. Paper: 77.4(77.3).
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="fixed")))
