"""Every config under configs/ (except _base_ parts) builds and runs a forward pass.

Parametrized over the glob, so configs added later (configs/demo, configs/custom, ...) are covered
without editing this file. Pretrained-weight init is switched off; identical model configs are
built once.
"""

import hamseg  # noqa: F401, I001  (patches the stack before anything imports mmseg)

import glob
import os.path as osp

import pytest
import torch
from mmengine.config import Config, ConfigDict
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

PRETRAINED_INITS = ("Pretrained", "HamResNetPretrained")
CONFIGS = sorted(
    osp.relpath(path, REPO)
    for path in glob.glob(osp.join(REPO, "configs", "**", "*.py"), recursive=True)
    if "_base_" not in osp.relpath(path, REPO).split(osp.sep)
)
SIZE = 33  # 8k + 1: every output stride sees whole pixels

_results: dict[str, tuple] = {}


def without_pretrained(cfg):
    """Copy of a model config with every pretrained-weight init set to None."""
    if isinstance(cfg, dict):
        out = ConfigDict() if isinstance(cfg, ConfigDict) else {}
        for key, value in cfg.items():
            if key == "pretrained":
                value = None
            elif key == "init_cfg" and isinstance(value, dict):
                value = None if value.get("type") in PRETRAINED_INITS else value
            elif key == "init_cfg" and isinstance(value, list):
                value = [v for v in value if v.get("type") not in PRETRAINED_INITS] or None
            out[key] = without_pretrained(value)
        return out
    if isinstance(cfg, (list, tuple)):
        return type(cfg)(without_pretrained(v) for v in cfg)
    return cfg


def run_model(model_cfg) -> tuple:
    """(num_classes, logits shape, prediction range, loss) of one built model."""
    init_default_scope("mmseg")
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    num_classes = model.decode_head.num_classes
    model.eval()
    with torch.no_grad():
        result = model.predict(torch.randn(1, 3, SIZE, SIZE))[0]
    logits, pred = result.seg_logits.data, result.pred_sem_seg.data
    assert torch.isfinite(logits).all()
    model.train()
    samples = []
    for _ in range(2):
        label = torch.randint(0, num_classes, (1, SIZE, SIZE))
        samples.append(
            SegDataSample(
                gt_sem_seg=PixelData(data=label),
                metainfo=dict(img_shape=(SIZE, SIZE), pad_shape=(SIZE, SIZE)),
            )
        )
    losses = model.loss(torch.randn(2, 3, SIZE, SIZE), samples)
    loss = sum(v for k, v in losses.items() if "loss" in k)
    return num_classes, tuple(logits.shape), (int(pred.min()), int(pred.max())), float(loss)


def test_glob_finds_the_recipes():
    for name in ("ham_voc.py", "ham_voc_trainval.py", "ham_context.py", "ham_context_60.py"):
        assert osp.join("configs", name) in CONFIGS
    assert not any("_base_" in c for c in CONFIGS)


@pytest.mark.parametrize("config", CONFIGS)
def test_config_builds_and_runs_forward(config):
    cfg = Config.fromfile(osp.join(REPO, config))
    model_cfg = without_pretrained(cfg.model)
    assert "Pretrained" not in str(model_cfg)
    key = repr(model_cfg.to_dict() if isinstance(model_cfg, ConfigDict) else model_cfg)
    if key not in _results:
        _results[key] = run_model(model_cfg)
    num_classes, shape, (low, high), loss = _results[key]
    assert shape == (num_classes, SIZE, SIZE)
    assert 0 <= low <= high < num_classes
    assert loss > 0 and loss == loss  # finite, positive cross-entropy


def shipped_config(config: str) -> Config:
    cfg = Config.fromfile(osp.join(REPO, config))
    if "model" not in cfg or not (cfg.get("test_dataloader") or {}).get("dataset"):
        pytest.skip(f"{config} defines no model or no test pipeline")
    return cfg


def transform_types(node) -> list:
    """Every transform ``type`` in a pipeline, nested ones (TestTimeAug) too."""
    if isinstance(node, dict):
        found = [node["type"]] if "type" in node else []
        return found + [t for v in node.values() for t in transform_types(v)]
    return [t for v in node for t in transform_types(v)] if isinstance(node, (list, tuple)) else []


@pytest.mark.parametrize("config", CONFIGS)
def test_pipelines_use_mmseg_transform_names_and_load_as_mmseg_expects(config):
    """mmseg's MMSegInferencer, tools and mmdeploy find LoadImageFromFile / LoadAnnotations in
    the test pipeline; hamseg adds transforms (the release's rescale) but renames none of mmseg's:
    every mmcv/mmseg transform name resolves to mmcv's or mmseg's own class."""
    from mmseg.registry import TRANSFORMS

    cfg = shipped_config(config)
    test = [step["type"] for step in cfg.test_dataloader.dataset.pipeline]
    assert test[0] == "LoadImageFromFile", test
    assert (
        "LoadAnnotations" in test or "seg_map_path" not in cfg.test_dataloader.dataset.data_prefix
    )
    pipelines = [cfg.get(k) for k in ("train_pipeline", "test_pipeline", "tta_pipeline")]
    pipelines += [cfg[f"{s}_dataloader"].dataset.get("pipeline") for s in ("train", "val", "test")]
    for name in transform_types([p for p in pipelines if p]):
        module = TRANSFORMS.get(name.split(".")[-1]).__module__.split(".")[0]
        assert module in ("mmcv", "mmseg") or name.startswith("Ham"), (name, module)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_mmseg_inferencer_takes_every_shipped_config(config):
    """mmseg's own inference API builds every config (random weights) and its pipeline prepares
    an image of an odd size."""
    import numpy as np
    from mmseg.apis import MMSegInferencer

    cfg = shipped_config(config)
    inferencer = MMSegInferencer(model=cfg, weights=None, device="cpu")
    image = np.random.default_rng(0).integers(0, 255, (37, 53, 3), dtype=np.uint8)
    packed = inferencer.pipeline(image)
    assert packed["inputs"].shape[0] == 3 and packed["inputs"].shape[1:] != (0, 0)
    assert "gt_sem_seg" not in packed["data_samples"]


def test_the_512_template_tests_at_the_scale_it_trains_at():
    """Issue 47.6: training rescales 2048x512 by 0.5-2.0 and crops; val/test resize to the same
    scale (short side 512), as mmseg's 512 recipes do, and --tta scales around it."""
    cfg = Config.fromfile(osp.join(REPO, "configs/custom/hamhead-nmf_r18-d8_custom-512x512.py"))
    train = {s["type"]: s for s in cfg.train_dataloader.dataset.pipeline}
    for loader in ("val_dataloader", "test_dataloader"):
        steps = cfg[loader].dataset.pipeline
        assert [s["type"] for s in steps] == [
            "LoadImageFromFile",
            "Resize",
            "LoadAnnotations",  # after the resize: scored at the original size
            "PackSegInputs",
        ]
        assert steps[1]["scale"] == train["RandomResize"]["scale"] and steps[1]["keep_ratio"]
    resizes = cfg.tta_pipeline[1]["transforms"][0]
    assert [min(r["scale"]) for r in resizes] == [384, 512, 640]
