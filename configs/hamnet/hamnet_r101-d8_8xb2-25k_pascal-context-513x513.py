# HamNet on PASCAL Context trained on 60 classes (59 + background): the SECONDARY protocol.
# The paper's 55.2 (Table 5) is a 59-class number: the headline recipe is
# hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py (configs/ham_context.py). One test run of
# this config reports both `mIoU` (60 classes, background a class like the others: ~6 points
# below a 59-class mIoU, docs/evaluation.md) and `mIoU59` (background pixels ignored, argmax over
# the 59 object classes). Paper App. E.3: lr 0.002, wd 1e-4, batch 16, 25k iterations, crop 513.
# Short name: configs/ham_context_60.py.
_base_ = [
    "../_base_/models/hamnet_r101-d8.py",
    "../_base_/datasets/pascal_context_hamnet.py",
    "../_base_/schedules/hamnet_sgd_poly_25k.py",
    "../_base_/default_runtime.py",
]
# Single-scale inference: whole image; --cfg-options model.test_cfg.mode=slide slides 513x513
# windows, stride 342 (equal to whole on Context's images of at most 500x500). --tta crops itself.
model = dict(
    data_preprocessor=dict(size=(513, 513)),
    decode_head=dict(num_classes=60),
    test_cfg=dict(mode="whole", crop_size=(513, 513), stride=(342, 342)),
)
# tools/test.py --tta: the test of App. E.3 ("the multi-scale and flipping strategy ... as other
# state-of-the-art attention-based models": DANet, OCNet, OCR, whose Context test is
# PyTorch-Encoding's MultiEvalModule): long side 520 x scale, 0.5 .. 2.0, 513 crops on a
# stride-342 grid, black padding, exp(logits + flipped logits) summed (docs/evaluation.md).
tta_model = dict(
    type="MultiEvalTTAModel",
    base_size=520,
    crop_size=513,
    scales=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0],
    flip=True,
)
# Seed 66 as the release, offset by the rank (mmengine: seed + rank) so that every GPU draws its
# own NMF dictionaries, as in the release (the weights still start equal on every rank: mmengine
# broadcasts rank 0's after init_weights). docs/recipes.md, "Seed".
randomness = dict(seed=66, diff_rank_seed=True)
