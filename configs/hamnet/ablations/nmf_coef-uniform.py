# Table 8's remark (App. F): NMF with random initial codes C_ij ~ U(0, 1) instead of
# softmax(X^T D). Paper: 77.8(77.6).
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(ham_cfg=dict(coef_init="uniform")))
