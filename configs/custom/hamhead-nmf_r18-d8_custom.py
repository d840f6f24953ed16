# Fine-tune the demo HamHead on your own dataset: copy this file, edit the lines marked EDIT
# (docs/custom_dataset.md). Change crop size, schedule or class count in a child config that
# inherits your copy (examples: the *_custom-*.py files next to this one), never by pasting a
# whole dataloader.
# Folder layout (mmseg's): <data_root>/<img_dir>/{train,val}/NAME<img_suffix> and
# <data_root>/<ann_dir>/{train,val}/NAME<seg_map_suffix>, one label map per image with values
# 0..K-1 (255 = ignore). Flat layout: set split_dir, then <data_root>/<img_dir>/NAME<img_suffix>,
# <data_root>/<ann_dir>/NAME<seg_map_suffix> and <data_root>/<split_dir>/{train,val}.txt (one
# NAME per line, no suffix). tools/train.py scans every sample before iteration 1.
_base_ = ["../demo/hamhead-nmf_r18-d8_context-shapes.py"]

data_root = "data/my_dataset"  # EDIT (or --cfg-options data_root=PATH: moves every split)
classes = ("background", "cat", "dog")  # EDIT: index i = label value i
palette = [[0, 0, 0], [220, 40, 40], [40, 90, 220]]  # EDIT: one RGB colour per class
img_suffix = ".jpg"  # EDIT: suffix of your images
seg_map_suffix = ".png"  # EDIT: suffix of your label maps, e.g. "_mask.png"
img_dir, ann_dir = "img_dir", "ann_dir"  # EDIT: folder names of images and label maps
split_dir = None  # EDIT: flat layout, e.g. "splits" (with img_dir="images", ann_dir="masks")
reduce_zero_label = False  # EDIT: True if 0 means "unlabelled" and classes start at 1
# EDIT: checkpoint to start from. A head whose class count differs is re-initialised: its
# classifier (decode_head.conv_seg) keeps its fresh init, every other weight is loaded
# (tools/train.py says so in one line).
load_from = "work_dirs/demo/hamhead-nmf_r18-d8_context-shapes/iter_500.pth"

num_classes = len(classes)
model = dict(decode_head=dict(num_classes=num_classes))
# mmseg's loaders; the scan before iteration 1 (tools/validate_dataset.py) names a label outside
# [0, num_classes) other than 255, a corrupt or missing file, an image/label size mismatch.
load_image = dict(type="LoadImageFromFile")
load_labels = dict(type="LoadAnnotations")
train_pipeline = [
    load_image,
    load_labels,
    dict(type="RandomFlip", prob=0.5, direction="horizontal"),
    dict(type="PackSegInputs"),
]
test_pipeline = [load_image, load_labels, dict(type="PackSegInputs")]
tta_pipeline = [  # tools/test.py --tta: scales 0.75, 1.0, 1.25 x {no flip, flip}
    load_image,
    dict(
        type="TestTimeAug",
        transforms=[
            [dict(type="Resize", scale_factor=s, keep_ratio=True) for s in (0.75, 1.0, 1.25)],
            [
                dict(type="RandomFlip", prob=0.0, direction="horizontal"),
                dict(type="RandomFlip", prob=1.0, direction="horizontal"),
            ],
            [load_labels],
            [dict(type="PackSegInputs")],
        ],
    ),
]
_dataset = dict(
    _delete_=True,
    type="BaseSegDataset",
    data_root=data_root,
    metainfo=dict(classes=classes, palette=palette),
    img_suffix=img_suffix,
    seg_map_suffix=seg_map_suffix,
    reduce_zero_label=reduce_zero_label,
)
_sub = dict(train="", val="") if split_dir else dict(train="/train", val="/val")
_ann = dict(train=f"{split_dir}/train.txt", val=f"{split_dir}/val.txt") if split_dir else {}
train_dataloader = dict(
    dataset=dict(
        **_dataset,
        data_prefix=dict(img_path=img_dir + _sub["train"], seg_map_path=ann_dir + _sub["train"]),
        ann_file=_ann.get("train", ""),
        pipeline=train_pipeline,
    )
)
# Images of different sizes cannot share an evaluation batch: validate one at a time.
val_dataloader = dict(
    batch_size=1,
    dataset=dict(
        **_dataset,
        data_prefix=dict(img_path=img_dir + _sub["val"], seg_map_path=ann_dir + _sub["val"]),
        ann_file=_ann.get("val", ""),
        pipeline=test_pipeline,
    ),
)
test_dataloader = val_dataloader
optim_wrapper = dict(optimizer=dict(lr=5e-4))  # smaller than from scratch: we start trained
# One schedule knob: the loop, the decay's end, validation and checkpoint follow max_iters (EDIT
# here, or `--cfg-options max_iters=N` for any N >= 1: warm-up and decay both start at 0).
# CPU: the 512 child runs 6-9 s/iteration on 2 cores; docs/custom_dataset.md, "Crop size".
max_iters = 500
param_scheduler = [
    dict(type="LinearLR", start_factor=0.1, begin=0, end=20, by_epoch=False),
    dict(type="PolyLR", eta_min=1e-5, power=0.9, begin=0, end=max_iters, by_epoch=False),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(checkpoint=dict(interval=max_iters))
