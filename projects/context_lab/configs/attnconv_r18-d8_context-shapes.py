# Attention as content-based convolution (Andreoli, Eq. 7-10, Def. 1): 8 bi-affine heads (D = 16)
# over all positions plus the 9 shift heads of a 3x3 grid, summed, in HamHead's layout.
# The head: projects/context_lab/context_lab/ (custom_imports, run from the repository root).
_base_ = ["../../../configs/demo/_base_/r18-d8_context-shapes.py"]
custom_imports = dict(imports=["projects.context_lab.context_lab"], allow_failed_imports=False)
demo_name = "AttnConv"
model = dict(
    decode_head=dict(
        type="AttnConvHead",
        in_channels=128,
        in_index=3,
        attn_channels=128,
        channels=128,
        attn_cfg=dict(
            num_heads=8, key_dim=16, value_dim=16, with_mu=True, window=None, index_heads=True
        ),
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        norm_cfg={{_base_.norm_cfg}},
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    )
)
