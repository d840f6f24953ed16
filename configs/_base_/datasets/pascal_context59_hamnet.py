# PASCAL Context, 59 object classes (background ignored: label 0 -> 255, k -> k-1): the protocol
# of the paper's Table 5 and its comparators (mmseg's PascalContextDataset59). Same label files as
# the 60-class variant.
_base_ = ["./pascal_context_hamnet.py"]
dataset_type = "PascalContextDataset59"
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations", reduce_zero_label=True),
    dict(type="HamReleaseRescale", ratios=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]),
    dict(type="RandomCrop", crop_size=(513, 513)),
    dict(type="RandomFlip", prob=0.5, direction="horizontal"),
    dict(type="PackSegInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations", reduce_zero_label=True),
    dict(type="PackSegInputs"),
]
tta_pipeline = test_pipeline
train_dataloader = dict(dataset=dict(type=dataset_type, pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(type=dataset_type, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(_delete_=True, type="IoUMetric", iou_metrics=["mIoU"])  # over the 59 classes
test_evaluator = val_evaluator
