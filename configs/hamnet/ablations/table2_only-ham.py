# Table 2 "only ham": no breads, Y = Z + BN(M(ReLU(Z))) (the BN of Eq. 6, 2 x 512 parameters).
# Paper: 77.0(76.8), +0M parameters.
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(with_lower_bread=False, with_upper_bread=False))
