# Stage 1 on mmseg's standard ImageNet ResNet-101 V1c (stem 32-32-64, downloaded from
# open-mmlab://resnet101_v1c), for users without the release's resnet101-2a57e44d.pth. Everything
# else as hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py. Short name: configs/ham_voc_v1c.py.
_base_ = ["./hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py"]
model = dict(
    backbone=dict(
        stem_channels=64,
        init_cfg=dict(type="Pretrained", checkpoint="open-mmlab://resnet101_v1c"),
    )
)
