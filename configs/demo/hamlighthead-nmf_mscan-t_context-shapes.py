# SegNeXt-T with hamseg's HamLightHead: mmseg's LightHamHead structure, hamseg's NMF (r = 16,
# 6 train / 7 eval steps, one-step gradient, seeded evaluation dictionary).
_base_ = ["./_base_/mscan-t_context-shapes.py"]
demo_name = "SegNeXt-T HamLightHead"
model = dict(
    decode_head=dict(
        type="HamLightHead",
        ham_cfg=dict(
            type="NMF", S=1, R=16, train_steps=6, eval_steps=7, eval_seed=0, eval_draws=12
        ),
    )
)
