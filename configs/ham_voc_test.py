# HamNet, VOC 2012 test-server submission from the stage-2 weights (configs/ham_voc_trainval.py):
# see configs/hamnet/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513_voc12test.py.
#   python tools/test.py configs/ham_voc_test.py \
#       work_dirs/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513/iter_20000.pth --tta
# writes work_dirs/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513_voc12test/submission/results.tar.gz
# (test_evaluator.output_dir; --work-dir does not move it: --out DIR puts it elsewhere).
_base_ = ["./hamnet/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513_voc12test.py"]
# One recipe, one work dir: the long name's, whichever name started the run (--work-dir overrides).
work_dir = "work_dirs/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513_voc12test"
