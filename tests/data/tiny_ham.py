# A tiny HamHead model (ResNetV1c-18 with 8 base channels, 16 ham channels, NMF rank 4) on the
# tiny dataset of tests/conftest.py: seconds per run on a CPU.
# Point it at a dataset with --cfg-options {train,val,test}_dataloader.dataset.data_root=...
_base_ = ["tiny_fcn.py"]

num_classes = 3
crop = (32, 32)
norm_cfg = dict(type="BN", requires_grad=True)
model = dict(
    decode_head=dict(
        _delete_=True,
        type="HamHead",
        in_channels=64,
        in_index=0,
        channels=16,
        ham_channels=16,
        ham_cfg=dict(type="NMF", S=1, R=4, train_steps=3, eval_steps=3),
        dropout_ratio=0.0,
        num_classes=num_classes,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    )
)
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations"),
    dict(type="Resize", scale=crop, keep_ratio=False),
    dict(type="PackSegInputs"),
]
test_pipeline = [  # labels are loaded after the resize: evaluated at the original size
    dict(type="LoadImageFromFile"),
    dict(type="Resize", scale=crop, keep_ratio=False),
    dict(type="LoadAnnotations"),
    dict(type="PackSegInputs"),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
default_hooks = dict(logger=dict(interval=1))
