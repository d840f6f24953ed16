# mmseg's NLHead: embedded-Gaussian self-attention over all positions (the attention baseline).
_base_ = ["./_base_/r18-d8_context-shapes.py"]
demo_name = "NonLocal"
model = dict(
    decode_head=dict(
        type="NLHead",
        in_channels=128,
        in_index=3,
        channels=128,
        concat_input=True,
        reduction=2,
        use_scale=True,
        mode="embedded_gaussian",
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        norm_cfg={{_base_.norm_cfg}},
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    )
)
