# HamNet, PASCAL Context 60 classes: see configs/hamnet/hamnet_r101-d8_8xb2-25k_pascal-context-513x513.py.
_base_ = ["./hamnet/hamnet_r101-d8_8xb2-25k_pascal-context-513x513.py"]
