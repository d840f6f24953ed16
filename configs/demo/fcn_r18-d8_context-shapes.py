# FCN head: two 3x3 convs on the OS8 features, no global context (the local baseline).
_base_ = ["./_base_/r18-d8_context-shapes.py"]
demo_name = "FCN"
model = dict(
    decode_head=dict(
        type="FCNHead",
        in_channels=128,
        in_index=3,
        channels=128,
        num_convs=2,
        concat_input=True,
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        norm_cfg={{_base_.norm_cfg}},
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    )
)
