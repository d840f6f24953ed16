# Stage 2 of the release on VOC trainval: 20k iterations at lr / 10 = 0.0009, same groups.
_base_ = ["./hamnet_sgd_poly_60k.py"]
optim_wrapper = dict(optimizer=dict(lr=0.0009))
param_scheduler = [dict(type="PolyLR", eta_min=0.0, power=0.9, begin=0, end=20000, by_epoch=False)]
train_cfg = dict(max_iters=20000, val_interval=2000)
default_hooks = dict(checkpoint=dict(interval=2000))
