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
# tools/test.py --tta: the release's MSFlip test, logits summed over the 12 views, each view
# padded to 8k+1. merge="prob_mean" / pad_stride=None give mmseg's SegTTAModel behaviour.
tta_model = dict(type="HamSegTTAModel", merge="logits_sum", pad_stride=8)
# Seed 66 as the release, offset by the rank (mmengine: seed + rank) so that every GPU draws its
# own NMF dictionaries, as in the release (the weights still start equal on every rank: mmengine
# broadcasts rank 0's after init_weights). docs/recipes.md, "Seed".
randomness = dict(seed=66, diff_rank_seed=True)
