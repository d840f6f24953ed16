# The PASCAL VOC 2012 test-server submission behind the paper's 85.9 mIoU (Table 4; the release's
# 85.94): the stage-2 model (hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py) predicts the 1,456
# test images (ImageSets/Segmentation/test.txt, no labels: nothing loads annotations), and
# VOCSubmissionMetric (hamseg/evaluation/voc_submission.py) writes each prediction as an indexed
# PNG with the VOC palette at the image's original size to
# <output_dir>/results/VOC2012/Segmentation/comp6_test_cls/<id>.png and packs
# <output_dir>/results.tar.gz to upload (comp6: trained with data beyond VOC, SBD).
#   python tools/test.py <this config> STAGE2_CKPT --tta     # the paper's multi-scale + flip test
# Test images: data/README.md. The whole path from stage 1: docs/recipes.md.
# Short name: configs/ham_voc_test.py.
_base_ = ["./hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py"]
test_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type="PascalVOCDataset",
        data_root="data/VOCdevkit/VOC2012",
        data_prefix=dict(img_path="JPEGImages"),  # no seg_map_path: label-free
        ann_file="ImageSets/Segmentation/test.txt",
        pipeline={{_base_.label_free_test_pipeline}},
    )
)
test_pipeline = {{_base_.label_free_test_pipeline}}  # what mmseg.apis.inference_model reads
tta_pipeline = test_pipeline  # HamSegTTAModel makes the 12 views from the original image
test_evaluator = dict(
    _delete_=True,
    type="VOCSubmissionMetric",
    format_only=True,
    task="comp6",
    output_dir="work_dirs/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513_voc12test/submission",
)
