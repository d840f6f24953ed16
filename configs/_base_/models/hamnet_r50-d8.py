# HamNet in mmseg's R-50-D8 convention (mmseg's _base_/models/pspnet_r50-d8.py with the decode
# head swapped), for the Cityscapes and ADE20K configs: mmseg's ResNetV1c-50 from
# open-mmlab://resnet50_v1c (stem 32-32-64, no multi-grid), output stride 8, SyncBN, mmseg's
# FCN auxiliary head on stage 3 (loss weight 0.4), align_corners=False. The decode head is the
# paper's HamNet head (squeeze 3x3 2048->512, Hamburger "release" V2 with NMF d=512 r=64, K=6,
# one-step gradient, align 3x3 512->256), evaluated with the mean of 12 seeded draws
# (docs/evaluation.md). The VOC/Context recipes use the release's deep-stem ResNet-101 instead
# (hamnet_r101-d8.py).
norm_cfg = dict(type="SyncBN", requires_grad=True)
data_preprocessor = dict(
    type="SegDataPreProcessor",
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
)
model = dict(
    type="EncoderDecoder",
    data_preprocessor=data_preprocessor,
    pretrained="open-mmlab://resnet50_v1c",
    backbone=dict(
        type="ResNetV1c",
        depth=50,
        num_stages=4,
        out_indices=(0, 1, 2, 3),
        dilations=(1, 1, 2, 4),
        strides=(1, 2, 1, 1),
        norm_cfg=norm_cfg,
        norm_eval=False,
        style="pytorch",
        contract_dilation=True,
    ),
    decode_head=dict(
        type="HamHead",
        in_channels=2048,
        in_index=3,
        ham_channels=512,
        channels=256,
        ham_cfg=dict(
            type="NMF",
            S=1,
            R=64,
            train_steps=6,
            eval_steps=6,
            grad="one_step",
            # the paper's protocol, as mmseg's other heads are evaluated; hamseg's
            # ensemble: eval_seed=0, eval_draws=12 (docs/evaluation.md)
            eval_seed=None,
            eval_draws=1,
        ),
        variant="release",
        dropout_ratio=0.1,
        num_classes=19,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    ),
    auxiliary_head=dict(
        type="FCNHead",
        in_channels=1024,
        in_index=2,
        channels=256,
        num_convs=1,
        concat_input=False,
        dropout_ratio=0.1,
        num_classes=19,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=0.4),
    ),
    train_cfg=dict(),
    test_cfg=dict(mode="whole"),
)
