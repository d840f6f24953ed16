# PASCAL Context, 60 classes (59 objects + background, as the paper evaluates): VOC 2010 train
# (4,998) / val (5,105). Same augmentation as VOC (paper App. E.3: crop 513, scale 0.5-2, flip).
# Prepare the labels with tools/dataset_converters/pascal_context.py (data/README.md).
_base_ = ["./voc12aug_hamnet.py"]
dataset_type = "PascalContextDataset"
data_root = "data/VOCdevkit/VOC2010"
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path="JPEGImages", seg_map_path="SegmentationClassContext"),
        ann_file="ImageSets/SegmentationContext/train.txt",
        pipeline={{_base_.train_pipeline}},
    )
)
val_dataloader = dict(
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path="JPEGImages", seg_map_path="SegmentationClassContext"),
        ann_file="ImageSets/SegmentationContext/val.txt",
    )
)
test_dataloader = val_dataloader
