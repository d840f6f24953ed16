# HamNet, VOC stage 2 (trainval, 20k, lr / 10) from configs/ham_voc.py's final weights
# (work_dirs/hamnet_r101-d8_8xb2-60k_voc12aug-513x513/iter_60000.pth): see
# configs/hamnet/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py.
_base_ = ["./hamnet/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py"]
# One recipe, one work dir: the long name's, whichever name started the run (--work-dir overrides).
work_dir = "work_dirs/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513"
