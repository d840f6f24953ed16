# Table 1: CD ham (soft concept decomposition), one-step gradient, T=0.01 (inv_t 100), warm start
# with online update (release README: no random init for CD). Paper: 78.1(77.5) (Table 9, T=0.01:
# 78.1(77.5); Table 8, online: 78.1(77.5)).
_base_ = ["./hamnet_r50-d16_1xb12-30k_voc12aug-513x513.py"]
model = dict(
    decode_head=dict(
        ham_cfg=dict(
            _delete_=True,
            type="CD",
            S=1,
            R=64,
            train_steps=6,
            eval_steps=6,
            inv_t=100,
            beta=0.1,
            eta=0.9,
            init="online",
            grad="one_step",
            eval_seed=None,  # the paper's protocol (docs/recipes.md, "Testing")
            eval_draws=1,
        )
    )
)
