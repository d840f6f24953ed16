# HamNet R-101-D8 (mmseg's ResNetV1c-101) on Cityscapes, 512x1024, 80k. Not trained here.
_base_ = ["./hamnet_r50-d8_4xb2-80k_cityscapes-512x1024.py"]
model = dict(pretrained="open-mmlab://resnet101_v1c", backbone=dict(depth=101))
