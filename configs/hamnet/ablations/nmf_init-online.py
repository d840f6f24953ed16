# Table 8: NMF, warm start from an online (EMA, eta 0.9) dictionary. Paper: 77.8(77.5).
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(ham_cfg=dict(init="online")))
