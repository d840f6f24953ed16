"""configs/ham_voc_test.py: the stage-2 model on the label-free VOC 2012 test split, the paper's
test pipelines without annotations, and the server-format writer. (Its model builds and runs
forward in tests/configs/test_configs.py, which covers every config.)"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import os.path as osp

from mmengine.config import Config

from tests.conftest import REPO

SHORT = osp.join(REPO, "configs", "ham_voc_test.py")
LONG = osp.join(
    REPO, "configs", "hamnet", "hamnet_r101-d8_8xb2-20k_voc12trainval-513x513_voc12test.py"
)
STAGE2 = osp.join(REPO, "configs", "hamnet", "hamnet_r101-d8_8xb2-20k_voc12trainval-513x513.py")


def types(pipeline) -> list[str]:
    """Every transform type, nested ones (TestTimeAug) too, in order."""
    found = []
    for step in pipeline:
        found.append(step["type"])
        for group in step.get("transforms", []):
            found += types(group if isinstance(group, list) else [group])
    return found


def test_reads_the_1456_test_images_without_labels():
    cfg = Config.fromfile(SHORT)
    data = cfg.test_dataloader.dataset
    assert (data.type, data.data_root) == ("PascalVOCDataset", "data/VOCdevkit/VOC2012")
    assert data.ann_file == "ImageSets/Segmentation/test.txt"
    assert data.data_prefix == dict(img_path="JPEGImages")  # no seg_map_path
    for pipeline in (data.pipeline, cfg.tta_pipeline, cfg.test_pipeline):
        assert not [t for t in types(pipeline) if "Annotations" in t]
        assert types(pipeline)[0] == "LoadImageFromFile"
    # the validation split keeps its labels
    assert cfg.val_dataloader.dataset.data_prefix.seg_map_path == "SegmentationClass"


def test_same_model_and_test_time_augmentation_as_stage_2():
    cfg, stage2 = Config.fromfile(SHORT), Config.fromfile(STAGE2)
    assert cfg.model == stage2.model and cfg.tta_model == stage2.tta_model
    assert cfg.tta_model.type == "HamSegTTAModel"  # the release's 12 views (test_recipes.py)
    without_labels = [t for t in types(stage2.tta_pipeline) if "Annotations" not in t]
    assert types(cfg.tta_pipeline) == without_labels == ["LoadImageFromFile", "PackSegInputs"]


def test_writes_the_comp6_submission():  # short and long names agree: test_recipes.py
    assert Config.fromfile(SHORT).test_evaluator == dict(
        type="VOCSubmissionMetric",
        format_only=True,
        task="comp6",
        output_dir="work_dirs/hamnet_r101-d8_8xb2-20k_voc12trainval-513x513_voc12test/submission",
    )
