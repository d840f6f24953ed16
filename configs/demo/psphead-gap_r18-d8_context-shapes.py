# Global-pooling control: mmseg's PSPHead with one pooling scale (the image's mean feature beside
# every position's own), 192 channels for FCN's head budget (0.58M vs 0.59M). It can use one
# global fact, but cannot relate one position to another.
_base_ = ["./_base_/r18-d8_context-shapes.py"]
demo_name = "GAP"
model = dict(
    decode_head=dict(
        type="PSPHead",
        in_channels=128,
        in_index=3,
        channels=192,
        pool_scales=(1,),
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        norm_cfg={{_base_.norm_cfg}},
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    )
)
