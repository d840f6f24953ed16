# HamNet stage 2 (release): fine-tune the stage-1 weights on VOC 2012 trainval (2,913 images) for
# 20k iterations at lr / 10, batch 16, crop 513 (the model behind the test-server submission).
# Short name: configs/ham_voc_trainval.py.
_base_ = [
    "../_base_/models/hamnet_r101-d8.py",
    "../_base_/datasets/voc12aug_hamnet.py",
    "../_base_/schedules/hamnet_sgd_poly_20k.py",
    "../_base_/default_runtime.py",
]
model = dict(
    data_preprocessor=dict(size=(513, 513)),
    backbone=dict(init_cfg=None),  # every weight comes from load_from
)
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type="PascalVOCDataset",
        data_root="data/VOCdevkit/VOC2012",
        # Labels: the official SegmentationClass (border band 255). The release reads
        # SegmentationClassAug for every image: --cfg-options
        # train_dataloader.dataset.data_prefix.seg_map_path=SegmentationClassAug (docs/recipes.md)
        data_prefix=dict(img_path="JPEGImages", seg_map_path="SegmentationClass"),
        ann_file="ImageSets/Segmentation/trainval.txt",
        pipeline={{_base_.train_pipeline}},
    )
)
# Stage 1's final weights, in stage 1's default work dir (the same for its long name and for
# configs/ham_voc.py). Only after `--work-dir DIR` in stage 1: pass
# `--cfg-options load_from=DIR/iter_60000.pth`.
load_from = "work_dirs/hamnet_r101-d8_8xb2-60k_voc12aug-513x513/iter_60000.pth"
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
