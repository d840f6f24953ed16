# The headline Context recipe (hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py) tested as
# Table 5's comparators test: PyTorch-Encoding's MultiEvalModule (hamseg/engine/multi_eval_tta.py):
# long side 520 x scale for scales 0.5 .. 2.0, flip, 513x513 crops (the training crop) on a grid
# of stride 342 where a view is larger, black padding, exp(logits + flipped logits) summed.
#   python tools/test.py <this config> CKPT --tta
# The headline number (beside the paper's 55.2) uses the release's MSFlip test, the recipe's own
# --tta; this one is reported beside it (docs/recipes.md, "PASCAL Context").
_base_ = ["./hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py"]
tta_model = dict(
    _delete_=True,
    type="MultiEvalTTAModel",
    base_size=520,
    crop_size=513,
    scales=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0],
    flip=True,
)
tta_pipeline = {{_base_.test_pipeline}}  # the original image: the TTA model makes the views
# The model is the headline recipe's: its run folder (tools/test.py logs there too).
work_dir = "work_dirs/hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513"
