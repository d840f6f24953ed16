# Ablations (paper Sec. 3.1, App. E.1): lr 0.009, weight decay 1e-4, 30k iterations, same groups.
_base_ = ["./hamnet_sgd_poly_60k.py"]
param_scheduler = [dict(type="PolyLR", eta_min=0.0, power=0.9, begin=0, end=30000, by_epoch=False)]
train_cfg = dict(max_iters=30000, val_interval=3000)
default_hooks = dict(checkpoint=dict(interval=3000))
auto_scale_lr = dict(base_batch_size=12)
