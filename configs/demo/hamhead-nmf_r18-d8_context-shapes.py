# HamHead with the NMF ham: global context by a rank-16 matrix decomposition (the main demo).
_base_ = ["./_base_/r18-d8_context-shapes.py"]
demo_name = "HamHead-NMF"
model = dict(
    decode_head=dict(
        type="HamHead",
        in_channels=128,
        in_index=3,
        ham_channels=128,
        channels=128,
        ham_cfg=dict(type="NMF", R=16, train_steps=6, eval_steps=6, eval_seed=0, eval_draws=12),
        variant="release",
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        norm_cfg={{_base_.norm_cfg}},
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    )
)
