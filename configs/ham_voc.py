# HamNet, VOC stage 1 as the authors ran it: see configs/hamnet/hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py.
_base_ = ["./hamnet/hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py"]
# One recipe, one work dir: the long name's default, so checkpoints, --resume and stage 2's
# load_from are the same whichever name started the run (--work-dir still overrides).
work_dir = "work_dirs/hamnet_r101-d8_8xb2-60k_voc12aug-513x513"
