# Your dataset at a 512x512 crop, as mmseg's 512 recipes (e.g. its ade20k.py): training rescales
# 2048x512 by 0.5-2.0, crops 512x512 and flips; validation and test resize to 2048x512 (short side
# 512, keep_ratio) and score at the original size. For images much smaller than 512 (and on a
# CPU) use the template itself: whole images at their own size. Inherit your copy of the
# template instead of the template.
_base_ = ["./hamhead-nmf_r18-d8_custom.py"]
crop_size = (512, 512)
scale = (2048, 512)
model = dict(data_preprocessor=dict(size=crop_size, size_divisor=None))  # pad crops to 512
train_pipeline = [
    {{_base_.load_image}},
    {{_base_.load_labels}},
    dict(type="RandomResize", scale=scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type="RandomCrop", crop_size=crop_size, cat_max_ratio=0.75),
    dict(type="RandomFlip", prob=0.5, direction="horizontal"),
    dict(type="PackSegInputs"),
]
test_pipeline = [  # labels loaded after the resize: scored at the original size
    {{_base_.load_image}},
    dict(type="Resize", scale=scale, keep_ratio=True),
    {{_base_.load_labels}},
    dict(type="PackSegInputs"),
]
tta_pipeline = [  # tools/test.py --tta: 0.75, 1.0, 1.25 x the test scale x {no flip, flip}
    {{_base_.load_image}},
    dict(
        type="TestTimeAug",
        transforms=[
            [
                dict(type="Resize", scale=(int(2048 * r), int(512 * r)), keep_ratio=True)
                for r in (0.75, 1.0, 1.25)
            ],
            [
                dict(type="RandomFlip", prob=0.0, direction="horizontal"),
                dict(type="RandomFlip", prob=1.0, direction="horizontal"),
            ],
            [{{_base_.load_labels}}],
            [dict(type="PackSegInputs")],
        ],
    ),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
