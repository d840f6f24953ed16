# The release's optimisation (seg/HamNet/train.py, settings.py; paper App. E.3): SGD momentum 0.9,
# lr 0.009, poly decay (1 - iter/max_iter)^0.9 to 0 without warm-up, 60k iterations.
# Parameter groups as the release: weight decay 1e-4 on conv weights only; norm weights at 1x lr
# without decay; every bias (conv and norm) at 2x lr without decay.
# fused=True: torch's one-kernel SGD, the same update (1.13x per iteration on an H100 at 2
# images per GPU, two leases: docs/gpu.md); False on a device torch cannot fuse for.
optimizer = dict(type="SGD", lr=0.009, momentum=0.9, weight_decay=1e-4, fused=True)
optim_wrapper = dict(
    type="OptimWrapper",
    optimizer=optimizer,
    clip_grad=None,
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        # '.bias' matches the bias of every conv and norm layer; custom keys take precedence
        # over bias_lr_mult, which mmengine would not apply to norm biases.
        custom_keys={".bias": dict(lr_mult=2.0, decay_mult=0.0)},
    ),
)
param_scheduler = [dict(type="PolyLR", eta_min=0.0, power=0.9, begin=0, end=60000, by_epoch=False)]
train_cfg = dict(type="IterBasedTrainLoop", max_iters=60000, val_interval=5000)
val_cfg = dict(type="ValLoop")
test_cfg = dict(type="TestLoop")
default_hooks = dict(
    timer=dict(type="IterTimerHook"),
    logger=dict(type="LoggerHook", interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type="ParamSchedulerHook"),
    checkpoint=dict(
        type="CheckpointHook", by_epoch=False, interval=5000, max_keep_ckpts=2, save_last=True
    ),
    sampler_seed=dict(type="DistSamplerSeedHook"),
    # Validation images (ground truth | prediction) every 500th validation image, in
    # <work_dir>/<timestamp>/vis_data and TensorBoard.
    visualization=dict(type="SegVisualizationHook", draw=True, interval=500),
)
# The recipes are for a total batch of 16 (8 GPUs x 2 or 4 GPUs x 4); lr is not rescaled.
auto_scale_lr = dict(enable=False, base_batch_size=16)
