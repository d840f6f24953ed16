# Table 2 "- lower bread": Y = Z + BN(W_u M(ReLU(Z))), NMF on the squeeze's output (non-negative
# after its ReLU). Paper: 77.3(77.2), +0.25M parameters.
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(with_lower_bread=False))
