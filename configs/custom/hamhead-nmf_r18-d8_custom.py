# Fine-tune the demo HamHead on your own dataset: edit the lines marked EDIT (docs/custom_dataset.md).
# Folder layout (mmseg's): <data_root>/img_dir/{train,val}/*<img_suffix> and
# <data_root>/ann_dir/{train,val}/*.png, one PNG label map per image with values 0..K-1 (255 = ignore).
_base_ = ["../demo/hamhead-nmf_r18-d8_context-shapes.py"]

data_root = "data/my_dataset"  # EDIT
classes = ("background", "cat", "dog")  # EDIT: index i = label value i
palette = [[0, 0, 0], [220, 40, 40], [40, 90, 220]]  # EDIT: one RGB colour per class
img_suffix = ".jpg"  # EDIT: suffix of your images
# EDIT: checkpoint to start from. A head whose class count differs is re-initialised: its
# classifier (decode_head.conv_seg) keeps its fresh init, every other weight is loaded.
load_from = "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth"

model = dict(decode_head=dict(num_classes=len(classes)))
_dataset = dict(
    _delete_=True,
    type="BaseSegDataset",
    data_root=data_root,
    metainfo=dict(classes=classes, palette=palette),
    img_suffix=img_suffix,
    seg_map_suffix=".png",
    reduce_zero_label=False,
)
train_dataloader = dict(
    dataset=dict(
        **_dataset,
        data_prefix=dict(img_path="img_dir/train", seg_map_path="ann_dir/train"),
        pipeline={{_base_.train_pipeline}},
    )
)
# Images of different sizes cannot share an evaluation batch: validate one at a time.
val_dataloader = dict(
    batch_size=1,
    dataset=dict(
        **_dataset,
        data_prefix=dict(img_path="img_dir/val", seg_map_path="ann_dir/val"),
        pipeline={{_base_.test_pipeline}},
    ),
)
test_dataloader = val_dataloader
optim_wrapper = dict(optimizer=dict(lr=5e-4))  # smaller than from scratch: we start trained
