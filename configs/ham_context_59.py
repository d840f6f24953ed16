# HamNet, PASCAL Context, 59 classes: the same recipe as configs/ham_context.py under its 0.1 name
# (configs/hamnet/hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py).
_base_ = ["./hamnet/hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py"]
# One recipe, one work dir: the long name's, whichever name started the run (--work-dir overrides).
work_dir = "work_dirs/hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513"
