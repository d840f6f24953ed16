# HamNet stage 1 (paper App. E.3, release seg/HamNet): VOC trainaug, 60k iterations, batch 16
# (8 GPUs x 2), crop 513, lr 0.009. Short name: configs/ham_voc.py. Stage 2:
# hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py. Commands: docs/recipes.md.
_base_ = [
    "../_base_/models/hamnet_r101-d8.py",
    "../_base_/datasets/voc12aug_hamnet.py",
    "../_base_/schedules/hamnet_sgd_poly_60k.py",
    "../_base_/default_runtime.py",
]
model = dict(data_preprocessor=dict(size=(513, 513)))
# tools/test.py --tta: the release's test (seg/HamNet/test.py) to the pixel: 6 scales x {image,
# flip} of the original image resized as the release does, padded to 8k+1, logits summed.
tta_model = dict(
    type="HamSegTTAModel",
    scales=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75],
    flip=True,
    pad_stride=8,
    merge="logits_sum",
)
# Seed 66 as the release, offset by the rank (mmengine: seed + rank) so that every GPU draws its
# own NMF dictionaries, as in the release (the weights still start equal on every rank: mmengine
# broadcasts rank 0's after init_weights). docs/recipes.md, "Seed".
randomness = dict(seed=66, diff_rank_seed=True)
