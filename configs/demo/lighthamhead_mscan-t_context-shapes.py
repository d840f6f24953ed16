# SegNeXt-T with mmseg's own LightHamHead (NMF2D r = 16, 6 train / 7 eval steps, BPTT, a new
# random dictionary at every forward, in evaluation too): the reference for HamLightHead.
_base_ = ["./_base_/mscan-t_context-shapes.py"]
demo_name = "SegNeXt-T LightHamHead (mmseg)"
model = dict(
    decode_head=dict(
        type="LightHamHead",
        ham_kwargs=dict(MD_S=1, MD_R=16, train_steps=6, eval_steps=7, inv_t=100, rand_init=True),
    )
)
