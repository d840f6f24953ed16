# Your dataset with a longer schedule: 2000 iterations, a checkpoint and a validation every 500.
# Any length works the same way (the template's warm-up and decay both start at iteration 0).
_base_ = ["./hamhead-nmf_r18-d8_custom.py"]
max_iters = 2000
train_cfg = dict(max_iters=max_iters, val_interval=500)
param_scheduler = [
    dict(type="LinearLR", start_factor=0.1, begin=0, end=20, by_epoch=False),
    dict(type="PolyLR", eta_min=1e-5, power=0.9, begin=0, end=max_iters, by_epoch=False),
]
default_hooks = dict(checkpoint=dict(interval=500))
