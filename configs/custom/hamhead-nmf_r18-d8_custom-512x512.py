# Your dataset at a 512x512 crop (larger images than the demo's): random rescale 0.5-2.0 of
# 2048x512, random crop, flip. Inherit your copy of the template instead of the template.
_base_ = ["./hamhead-nmf_r18-d8_custom.py"]
crop_size = (512, 512)
model = dict(data_preprocessor=dict(size=crop_size, size_divisor=None))  # pad crops to 512
train_dataloader = dict(
    dataset=dict(
        pipeline=[
            {{_base_.load_image}},
            {{_base_.load_labels}},
            dict(type="RandomResize", scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True),
            dict(type="RandomCrop", crop_size=crop_size, cat_max_ratio=0.75),
            dict(type="RandomFlip", prob=0.5, direction="horizontal"),
            dict(type="PackSegInputs"),
        ]
    )
)
