# Table 2 "- ham": both breads, no matrix decomposition, Y = Z + BN(W_u ReLU(W_l Z)) (the NMF
# config's ReLU stays in the lower bread). Paper: 75.8(75.6), +0.50M parameters.
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(with_ham=False))
