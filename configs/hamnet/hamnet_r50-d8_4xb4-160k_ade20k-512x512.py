# HamNet R-50-D8 on ADE20K (150 classes), 512x512 crops, 160k iterations, 4 GPUs x 4 images:
# mmseg's ADE20K recipe (dataset and schedule bases from mmseg, as its PSPNet/NonLocal R-50-D8
# use them) with HamNet's head. Not trained here: no result of ours or the paper's (README).
_base_ = [
    "../_base_/models/hamnet_r50-d8.py",
    "mmseg::_base_/datasets/ade20k.py",
    "../_base_/default_runtime.py",
    "mmseg::_base_/schedules/schedule_160k.py",
]
crop_size = (512, 512)
data_preprocessor = dict(size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    decode_head=dict(num_classes=150),
    auxiliary_head=dict(num_classes=150),
)
