# Table 2 "- upper bread": Y = Z + BN(M(ReLU(W_l Z))), the BN of Eq. 6 on the ham's output.
# Paper: 77.0(76.8), +0.25M parameters.
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(with_upper_bread=False))
