# PASCAL Context (paper App. E.3): lr 0.002, weight decay 1e-4, 25k iterations, same groups.
_base_ = ["./hamnet_sgd_poly_60k.py"]
optim_wrapper = dict(optimizer=dict(lr=0.002))
param_scheduler = [dict(type="PolyLR", eta_min=0.0, power=0.9, begin=0, end=25000, by_epoch=False)]
train_cfg = dict(max_iters=25000, val_interval=2500)
default_hooks = dict(checkpoint=dict(interval=2500))
