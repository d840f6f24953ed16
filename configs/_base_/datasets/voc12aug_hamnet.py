# PASCAL VOC 2012 + SBD "trainaug" (10,582 images) with the release's augmentation: random scale
# from {0.5, 0.75, ..., 2.0} of the original image as the release resizes it (HamReleaseRescale:
# float image, bilinear with align_corners=True, floored size), random 513x513 crop (padded with 0
# after normalisation / 255 in the label by the data preprocessor), horizontal flip. No
# photometric distortion. Validation on the 1,449 val images at their original size.
# Prepare the data with tools/dataset_converters/voc_aug.py (data/README.md).
dataset_type = "PascalVOCDataset"
data_root = "data/VOCdevkit/VOC2012"
crop_size = (513, 513)
train_scales = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations"),
    dict(type="HamReleaseRescale", ratios=train_scales),
    dict(type="RandomCrop", crop_size=crop_size),
    dict(type="RandomFlip", prob=0.5, direction="horizontal"),
    dict(type="PackSegInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations"),
    dict(type="PackSegInputs"),
]
# tools/test.py --tta: the original image; the leaf config's tta_model makes the views.
tta_pipeline = test_pipeline
# The VOC 2012 test split (1,456 images, no public labels; configs/ham_voc_test.py).
label_free_test_pipeline = [dict(type="LoadImageFromFile"), dict(type="PackSegInputs")]
# trainaug = VOC 2012 train (1,464, official labels) + SBD-only images (9,118, aug.txt), the
# layout of mmseg's converter.
voc_train = dict(
    type=dataset_type,
    data_root=data_root,
    data_prefix=dict(img_path="JPEGImages", seg_map_path="SegmentationClass"),
    ann_file="ImageSets/Segmentation/train.txt",
    pipeline=train_pipeline,
)
sbd_aug = dict(
    type=dataset_type,
    data_root=data_root,
    data_prefix=dict(img_path="JPEGImages", seg_map_path="SegmentationClassAug"),
    ann_file="ImageSets/Segmentation/aug.txt",
    pipeline=train_pipeline,
)
train_dataloader = dict(
    batch_size=2,  # per GPU: 8 GPUs x 2 = 16
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type="InfiniteSampler", shuffle=True),
    dataset=dict(type="ConcatDataset", datasets=[voc_train, sbd_aug]),
)
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type="DefaultSampler", shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path="JPEGImages", seg_map_path="SegmentationClass"),
        ann_file="ImageSets/Segmentation/val.txt",
        pipeline=test_pipeline,
    ),
)
test_dataloader = val_dataloader
val_evaluator = dict(type="IoUMetric", iou_metrics=["mIoU"])
test_evaluator = val_evaluator
