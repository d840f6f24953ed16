# Table 2 "baseline": the head without a Hamburger, 3x3 squeeze 2048 -> 512, 3x3 align 512 -> 256,
# classifier. Paper: 75.9(75.7), 32.67M parameters (the full Hamburger, the base config: +0.50M,
# 78.3(77.8)).
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(decode_head=dict(with_hamburger=False))
