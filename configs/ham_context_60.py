# HamNet, PASCAL Context trained on 60 classes (the secondary protocol; reports mIoU and mIoU59):
# see configs/hamnet/hamnet_r101-d8_8xb2-25k_pascal-context-513x513.py.
_base_ = ["./hamnet/hamnet_r101-d8_8xb2-25k_pascal-context-513x513.py"]
# One recipe, one work dir: the long name's, whichever name started the run (--work-dir overrides).
work_dir = "work_dirs/hamnet_r101-d8_8xb2-25k_pascal-context-513x513"
