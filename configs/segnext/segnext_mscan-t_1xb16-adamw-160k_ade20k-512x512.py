# SegNeXt-T (MSCAN-T, 4.3M parameters) on ADE20K: mmseg's own recipe (segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py),
# decode head switched to hamseg's HamLightHead (same structure and parameter names as mmseg's
# LightHamHead: mmseg's checkpoints load strictly). The ham: NMF r = 16, 6 train / 7 eval steps as
# SegNeXt configures it, with the paper's one-step gradient; evaluated as mmseg evaluates its
# LightHamHead and the paper its models, a new dictionary at every forward (the ham's default;
# report the mean of N runs, docs/evaluation.md), so a number is comparable with mmseg's.
# Data: data/README.md, "ADE20K". docs/segnext.md.
_base_ = ["mmseg::segnext/segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py"]
custom_imports = dict(imports=["hamseg"], allow_failed_imports=False)
model = dict(
    decode_head=dict(
        type="HamLightHead",
        ham_kwargs=None,
        ham_cfg=dict(
            type="NMF",
            S=1,
            R=16,
            train_steps=6,
            eval_steps=7,
            grad="one_step",
        ),
    )
)
