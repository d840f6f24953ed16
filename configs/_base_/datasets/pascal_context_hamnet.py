# PASCAL Context, 60 classes (59 objects + background; the secondary protocol): VOC 2010 train
# (4,998) / val (5,105). Same augmentation as VOC (paper App. E.3: crop 513, scale 0.5-2, flip).
# Prepare the labels with tools/dataset_converters/pascal_context.py (data/README.md).
_base_ = ["./voc12aug_hamnet.py"]
dataset_type = "PascalContextDataset"
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations"),
    dict(type="HamReleaseRescale", ratios=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]),
    dict(type="RandomCrop", crop_size=(513, 513)),
    dict(type="RandomFlip", prob=0.5, direction="horizontal"),
    dict(type="PackSegInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations"),
    dict(type="PackSegInputs"),
]
tta_pipeline = test_pipeline
data_root = "data/VOCdevkit/VOC2010"
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path="JPEGImages", seg_map_path="SegmentationClassContext"),
        ann_file="ImageSets/SegmentationContext/train.txt",
        pipeline=train_pipeline,
    )
)
val_dataloader = dict(
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path="JPEGImages", seg_map_path="SegmentationClassContext"),
        ann_file="ImageSets/SegmentationContext/val.txt",
        pipeline=test_pipeline,
    )
)
test_dataloader = val_dataloader
# Both Context metrics of a 60-class model from one run (hamseg/evaluation/context_metric.py):
# mIoU over the 60 classes, and mIoU59 with background pixels ignored and the argmax taken over
# the 59 object classes.
val_evaluator = dict(type="ContextIoUMetric", iou_metrics=["mIoU"], background_index=0)
test_evaluator = val_evaluator
