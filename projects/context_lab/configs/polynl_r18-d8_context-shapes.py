# Poly-NL (Babiloni et al., ICCV 2021, Eq. 6): the NLHead layout with the O(N^2) non-local block
# replaced by the O(N) Poly-NL block (PolyNLHead), so the two differ only in context.
# The head: projects/context_lab/context_lab/ (custom_imports, run from the repository root).
_base_ = ["../../../configs/demo/_base_/r18-d8_context-shapes.py"]
custom_imports = dict(imports=["projects.context_lab.context_lab"], allow_failed_imports=False)
demo_name = "PolyNL"
model = dict(
    decode_head=dict(
        type="PolyNLHead",
        in_channels=128,
        in_index=3,
        channels=128,
        concat_input=True,
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        norm_cfg={{_base_.norm_cfg}},
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    )
)
