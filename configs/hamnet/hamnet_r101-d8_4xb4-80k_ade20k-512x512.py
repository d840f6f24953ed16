# HamNet R-101-D8 (mmseg's ResNetV1c-101) on ADE20K, 512x512, 80k. Not trained here.
_base_ = ["./hamnet_r50-d8_4xb4-80k_ade20k-512x512.py"]
model = dict(pretrained="open-mmlab://resnet101_v1c", backbone=dict(depth=101))
