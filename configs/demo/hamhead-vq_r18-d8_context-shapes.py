# HamHead with the soft vector-quantisation ham (paper Alg. 1). Temperature T = 0.1 (inv_t = 10),
# as for CD (Table 9); at inv_t = 100 the assignments are nearly hard and the ham barely mixes
# positions (docs/demo.md, "Results").
_base_ = ["./hamhead-nmf_r18-d8_context-shapes.py"]
demo_name = "HamHead-VQ"
model = dict(
    decode_head=dict(
        ham_cfg=dict(
            type="VQ", R=16, train_steps=6, eval_steps=6, inv_t=10, eval_seed=0, eval_draws=12
        )
    )
)
