# The headline Context recipe (hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py) tested with
# the release's whole-image multi-scale + flip test (seg/HamNet/test.py, the test of the VOC
# number): 6 scales 0.5 .. 1.75 of the image x {image, flip}, padded to 8k+1, logits summed.
# The secondary Context test, reported beside the headline's (docs/evaluation.md).
#   python tools/test.py <this config> CKPT --tta
_base_ = ["./hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513.py"]
tta_model = dict(
    _delete_=True,
    type="HamSegTTAModel",
    scales=[0.5, 0.75, 1.0, 1.25, 1.5, 1.75],
    flip=True,
    pad_stride=8,
    merge="logits_sum",
)
# The model is the headline recipe's: its run folder (tools/test.py logs there too).
work_dir = "work_dirs/hamnet_r101-d8_8xb2-25k_pascal-context-59-513x513"
