# HamNet, VOC stage 1 on open-mmlab://resnet101_v1c: see configs/hamnet/hamnet_r101-d8-v1c_8xb2-60k_voc12aug-513x513.py.
_base_ = ["./hamnet/hamnet_r101-d8-v1c_8xb2-60k_voc12aug-513x513.py"]
# One recipe, one work dir: the long name's, whichever name started the run (--work-dir overrides).
work_dir = "work_dirs/hamnet_r101-d8-v1c_8xb2-60k_voc12aug-513x513"
