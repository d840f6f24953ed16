# HamNet on PASCAL Context, 59 object classes (background ignored), otherwise as the 60-class
# recipe. Short name: configs/ham_context_59.py.
_base_ = [
    "../_base_/models/hamnet_r101-d8.py",
    "../_base_/datasets/pascal_context59_hamnet.py",
    "../_base_/schedules/hamnet_sgd_poly_25k.py",
    "../_base_/default_runtime.py",
]
# Inference: whole image; --cfg-options model.test_cfg.mode=slide slides 513x513 windows, stride 342.
model = dict(
    data_preprocessor=dict(size=(513, 513)),
    decode_head=dict(num_classes=59),
    test_cfg=dict(mode="whole", crop_size=(513, 513), stride=(342, 342)),
)
# tools/test.py --tta: the release's MSFlip test, logits summed over the 12 views, each view
# padded to 8k+1. merge="prob_mean" / pad_stride=None give mmseg's SegTTAModel behaviour.
tta_model = dict(type="HamSegTTAModel", merge="logits_sum", pad_stride=8)
# Seed 66 as the release, offset by the rank (mmengine: seed + rank) so that every GPU draws its
# own NMF dictionaries, as in the release (the weights still start equal on every rank: mmengine
# broadcasts rank 0's after init_weights). docs/recipes.md, "Seed".
randomness = dict(seed=66, diff_rank_seed=True)
