# HamNet R-50-D8 on Cityscapes, 512x1024 crops, 80k iterations, 4 GPUs x 2 images: mmseg's
# Cityscapes recipe (dataset and schedule bases from mmseg, as its PSPNet/NonLocal R-50-D8 use
# them) with HamNet's head. Not trained here: no result of ours or the paper's (README).
_base_ = [
    "../_base_/models/hamnet_r50-d8.py",
    "mmseg::_base_/datasets/cityscapes.py",
    "../_base_/default_runtime.py",
    "mmseg::_base_/schedules/schedule_80k.py",
]
crop_size = (512, 1024)
data_preprocessor = dict(size=crop_size)
model = dict(data_preprocessor=data_preprocessor)
