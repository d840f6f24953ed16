# HamNet, VOC stage 2 (trainval, 20k, lr / 10) from configs/ham_voc.py's final weights: see
# configs/hamnet/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py.
_base_ = ["./hamnet/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py"]
# Stage 1's final weights if stage 1 ran `tools/train.py configs/ham_voc.py` with its default work
# dir; otherwise pass `--cfg-options load_from=PATH/iter_60000.pth` (docs/recipes.md).
load_from = "work_dirs/ham_voc/iter_60000.pth"
