# Fine-tune a SegNeXt-T (MSCAN-T + HamLightHead) on your own dataset: the light model most people
# fine-tune. Copy hamhead-nmf_r18-d8_custom.py, edit its EDIT lines, and point _base_ below at your
# copy: the data part (layout, classes, loaders, tta_pipeline, schedule) comes from there;
# this file only swaps the model (docs/custom_dataset.md, "SegNeXt-T").
_base_ = ["./hamhead-nmf_r18-d8_custom.py"]
# EDIT: a SegNeXt-T checkpoint to start from (the demo's: python tools/run_demo.py --config
# configs/demo/hamlighthead-nmf_mscan-t_context-shapes.py); the classifier is re-initialised.
load_from = "work_dirs/demo/hamlighthead-nmf_mscan-t_context-shapes/iter_500.pth"
model = dict(
    backbone=dict(
        _delete_=True,
        type="MSCAN",  # mmseg's SegNeXt-T settings
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
    decode_head=dict(
        _delete_=True,
        type="HamLightHead",
        in_channels=[64, 160, 256],
        in_index=[1, 2, 3],
        channels=256,
        ham_channels=256,
        ham_cfg=dict(
            type="NMF", S=1, R=16, train_steps=6, eval_steps=7, eval_seed=0, eval_draws=12
        ),
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        norm_cfg=dict(type="GN", num_groups=32, requires_grad=True),
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    ),
)
