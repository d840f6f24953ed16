# HamHead with the soft concept-decomposition ham (paper App. B; ridge beta 0.1). Temperature
# T = 0.1 (inv_t = 10): the paper's best for CD (Table 9), the low end of the release's 10-100.
# At inv_t = 100 the codes are nearly one-hot here and the ham barely mixes positions
# (docs/demo.md, "Results").
_base_ = ["./hamhead-nmf_r18-d8_context-shapes.py"]
demo_name = "HamHead-CD"
model = dict(
    decode_head=dict(
        ham_cfg=dict(
            type="CD", R=16, train_steps=6, eval_steps=6, inv_t=10, eval_seed=0, eval_draws=12
        )
    )
)
