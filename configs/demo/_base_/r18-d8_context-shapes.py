# Shared by every demo head: a slim ResNetV1c-18 at output stride 8 trained from scratch on Context
# Shapes, one schedule, one seed. Head configs only add `model.decode_head` (docs/demo.md).
_base_ = ["../../_base_/datasets/context_shapes.py", "../../_base_/default_runtime.py"]
num_classes = 7
norm_cfg = dict(type="BN", requires_grad=True)
model = dict(
    type="EncoderDecoder",
    data_preprocessor=dict(
        type="SegDataPreProcessor",
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_val=0,
        seg_pad_val=255,
        size_divisor=8,
    ),
    backbone=dict(
        type="ResNetV1c",
        depth=18,
        base_channels=16,
        stem_channels=16,
        num_stages=4,
        out_indices=(0, 1, 2, 3),
        strides=(1, 2, 1, 1),
        dilations=(1, 1, 2, 4),
        contract_dilation=True,
        norm_cfg=norm_cfg,
        norm_eval=False,
        style="pytorch",
    ),
    # decode_head: set by each head config (in_channels=128, the layer4 width of this backbone)
    train_cfg=dict(),
    test_cfg=dict(mode="whole"),
)
randomness = dict(seed=0)
env_cfg = dict(cudnn_benchmark=False)

max_iters = 500
optim_wrapper = dict(
    type="OptimWrapper",
    optimizer=dict(type="AdamW", lr=2e-3, betas=(0.9, 0.999), weight_decay=1e-4),
    clip_grad=None,
)
param_scheduler = [
    dict(type="LinearLR", start_factor=0.1, begin=0, end=20, by_epoch=False),
    dict(type="PolyLR", eta_min=1e-5, power=0.9, begin=20, end=max_iters, by_epoch=False),
]
train_cfg = dict(type="IterBasedTrainLoop", max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type="ValLoop")
test_cfg = dict(type="TestLoop")
default_hooks = dict(
    timer=dict(type="IterTimerHook"),
    logger=dict(type="LoggerHook", interval=20, log_metric_by_epoch=False),
    param_scheduler=dict(type="ParamSchedulerHook"),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=max_iters, max_keep_ckpts=1),
    sampler_seed=dict(type="DistSamplerSeedHook"),
    # Validation images (ground truth | prediction) under <work_dir>/<timestamp>/vis_data and in
    # TensorBoard, every 10th validation batch.
    visualization=dict(type="SegVisualizationHook", draw=True, interval=10),
)
