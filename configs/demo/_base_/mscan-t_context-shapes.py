# SegNeXt-T's backbone (MSCAN-T, mmseg's settings, no pretraining) on Context Shapes, with the
# demo's data, schedule, optimiser and seed: the two SegNeXt head configs only add the head.
_base_ = ["./r18-d8_context-shapes.py"]
ham_norm_cfg = dict(type="GN", num_groups=32, requires_grad=True)
model = dict(
    backbone=dict(
        _delete_=True,
        type="MSCAN",
        embed_dims=[32, 64, 160, 256],
        mlp_ratios=[8, 8, 4, 4],
        drop_rate=0.0,
        drop_path_rate=0.1,
        depths=[3, 3, 5, 2],
        attention_kernel_sizes=[5, [1, 7], [1, 11], [1, 21]],
        attention_kernel_paddings=[2, [0, 3], [0, 5], [0, 10]],
        act_cfg=dict(type="GELU"),
        norm_cfg=dict(type="BN", requires_grad=True),
    ),
    # The SegNeXt decode head as mmseg's SegNeXt-T config sets it (levels 1-3, 256 channels,
    # GN); each leaf adds its type and ham.
    decode_head=dict(
        in_channels=[64, 160, 256],
        in_index=[1, 2, 3],
        channels=256,
        ham_channels=256,
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        norm_cfg=ham_norm_cfg,
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    ),
)
