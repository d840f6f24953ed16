# HamNet, VOC stage 1 as the authors ran it: see configs/hamnet/hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py.
_base_ = ["./hamnet/hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py"]
