# A tiny FCN on a ResNetV1c-18 (8 base channels) for stack tests: seconds per run on a CPU.
# The dataset root is set by the tests: --cfg-options data_root=... (see tests/conftest.py).
_base_ = ["../../configs/_base_/default_runtime.py"]

data_root = "data/tiny"
crop = (32, 32)
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
        size=crop,
    ),
    backbone=dict(
        type="ResNetV1c",
        depth=18,
        stem_channels=8,
        base_channels=8,
        num_stages=4,
        out_indices=(3,),
        dilations=(1, 1, 2, 4),
        strides=(1, 2, 1, 1),
        norm_cfg=norm_cfg,
        contract_dilation=True,
    ),
    decode_head=dict(
        type="FCNHead",
        in_channels=64,
        in_index=0,
        channels=16,
        num_convs=1,
        concat_input=False,
        dropout_ratio=0.0,
        num_classes=3,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    ),
    train_cfg=dict(),
    test_cfg=dict(mode="whole"),
)
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations"),
    dict(type="Resize", scale=crop, keep_ratio=False),
    dict(type="PackSegInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="Resize", scale=crop, keep_ratio=False),
    dict(type="LoadAnnotations"),  # after Resize: metrics use the original-size labels
    dict(type="PackSegInputs"),
]
dataset = dict(type="BaseSegDataset", data_root=data_root, metainfo=dict(classes=("a", "b", "c")))
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    sampler=dict(type="InfiniteSampler", shuffle=True),
    dataset=dict(
        **dataset,
        data_prefix=dict(img_path="img_dir/train", seg_map_path="ann_dir/train"),
        pipeline=train_pipeline,
    ),
)
val_dataloader = dict(
    batch_size=1,
    num_workers=0,
    sampler=dict(type="DefaultSampler", shuffle=False),
    dataset=dict(
        **dataset,
        data_prefix=dict(img_path="img_dir/val", seg_map_path="ann_dir/val"),
        pipeline=test_pipeline,
    ),
)
test_dataloader = val_dataloader
val_evaluator = dict(type="IoUMetric", iou_metrics=["mIoU"])
test_evaluator = val_evaluator
optim_wrapper = dict(type="OptimWrapper", optimizer=dict(type="SGD", lr=0.01, momentum=0.9))
param_scheduler = [dict(type="PolyLR", power=0.9, eta_min=1e-4, begin=0, end=15, by_epoch=False)]
train_cfg = dict(type="IterBasedTrainLoop", max_iters=15, val_interval=1000)
val_cfg = dict(type="ValLoop")
test_cfg = dict(type="TestLoop")
default_hooks = dict(
    timer=dict(type="IterTimerHook"),
    logger=dict(type="LoggerHook", interval=5, log_metric_by_epoch=False),
    param_scheduler=dict(type="ParamSchedulerHook"),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=5),
    sampler_seed=dict(type="DistSamplerSeedHook"),
    visualization=dict(type="SegVisualizationHook"),
)
vis_backends = [dict(type="LocalVisBackend")]
visualizer = dict(type="SegLocalVisualizer", vis_backends=vis_backends, name="visualizer")
randomness = dict(seed=0)
