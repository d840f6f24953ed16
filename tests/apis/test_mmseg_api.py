"""hamseg.apis: mmseg's init_model / inference_model / MMSegInferencer on hamseg's models, loading
strictly, by config, packaged name or model name; their label maps are tools/test.py --out's."""

from __future__ import annotations

import glob
import os
import os.path as osp
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmseg.apis import MMSegInferencer

from hamseg.apis import CheckpointMismatchError, HamSegInferencer, inference_model, init_model
from hamseg.apis.inference import config_dataset_meta
from hamseg.datasets.context_shapes import CLASSES, PALETTE
from tests.conftest import REPO
from tests.helpers import DEMO_NMF, make_checkpoint, one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
PACKAGED = "hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py"
OWN_CLASSES = [f"k{i}" for i in range(7)]  # names only a checkpoint's meta has
OWN_PALETTE = [[10 * i, 20 * i, 30 * i] for i in range(7)]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("mmseg_api")
    own = make_checkpoint(str(root / "own.pth"), seed=1)
    checkpoint = torch.load(own, weights_only=True)
    checkpoint["meta"]["dataset_meta"] = dict(classes=OWN_CLASSES, palette=OWN_PALETTE)
    torch.save(checkpoint, own)
    return dict(own=own, three=make_checkpoint(str(root / "three.pth"), num_classes=3))


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for h, w in ((37, 45), (29, 51))]


def test_hamseg_apis_is_mmseg_apis_and_init_model_reads_config_and_classes_from_a_checkpoint(
    ckpts,
):
    import mmseg.apis

    import hamseg.apis

    assert set(mmseg.apis.__all__) <= set(hamseg.apis.__all__)
    assert hamseg.apis.MMSegInferencer is HamSegInferencer
    model = init_model(None, ckpts["own"], device="cpu")
    assert not model.training and model.cfg.model.decode_head.type == "HamHead"
    assert model.dataset_meta == dict(classes=OWN_CLASSES, palette=OWN_PALETTE)
    three = init_model(None, ckpts["three"], device="cpu")
    assert three.dataset_meta["classes"] == ["class 0", "class 1", "class 2"]  # its meta's


def test_init_model_is_strict_and_takes_options_packaged_names_and_no_weights(ckpts):
    with pytest.raises(CheckpointMismatchError) as err:  # mmseg's: a random 7-class classifier
        init_model(DEMO_NMF, ckpts["three"], device="cpu")
    assert "decode_head.conv_seg.weight" in str(err.value) and "has 3 classes" in str(err.value)
    options = dict(model=dict(decode_head=dict(num_classes=3)))
    model = init_model(PACKAGED, ckpts["three"], "cpu", options)
    assert model.decode_head.conv_seg.out_channels == 3
    bare = init_model(PACKAGED, None, "cpu")  # no weights: the config dataset's classes
    assert bare.dataset_meta == dict(classes=list(CLASSES), palette=[list(c) for c in PALETTE])
    with pytest.raises(FileNotFoundError, match="nope.pth"):
        init_model(DEMO_NMF, "nope.pth", "cpu")


def test_config_dataset_meta_takes_the_metainfo_and_a_subsets_colours():
    cfg = Config.fromfile(DEMO_NMF)
    cfg.test_dataloader.dataset.metainfo = dict(classes=[CLASSES[2], CLASSES[0]])
    assert config_dataset_meta(cfg) == dict(
        classes=[CLASSES[2], CLASSES[0]], palette=[list(PALETTE[2]), list(PALETTE[0])]
    )
    cfg.test_dataloader.dataset.metainfo = dict(classes=["road", "sky"])
    assert config_dataset_meta(cfg) == dict(classes=["road", "sky"], palette=None)


def test_inferencer_by_path_name_or_packaged_config_gives_inference_models_labels(
    ckpts, images, tmp_path
):
    model = init_model(DEMO_NMF, ckpts["own"], device="cpu")
    expected = [inference_model(model, a).pred_sem_seg.data[0] for a in images]
    assert len(expected[0].unique()) > 1  # a real label map
    path = str(tmp_path / "image.png")
    cv2.imwrite(path, images[1])
    for source in (DEMO_NMF, "hamhead-nmf_r18-d8_context-shapes", PACKAGED, None):
        inferencer = HamSegInferencer(source, weights=ckpts["own"], device="cpu")
        got = inferencer([images[0], path], return_datasamples=True)  # an array and a file
        assert all((s.pred_sem_seg.data[0] == e).all() for s, e in zip(got, expected)), source
    assert inferencer.model.dataset_meta == dict(classes=OWN_CLASSES, palette=OWN_PALETTE)
    out = inferencer(images[0], out_dir=str(tmp_path / "out"))  # mmseg's own outputs
    (written,) = [cv2.imread(p, 0) for p in glob.glob(str(tmp_path / "out" / "pred" / "*.png"))]
    assert (written == expected[0].numpy()).all() and (out["predictions"] == written).all()


def test_inferencer_refuses_what_does_not_fit_and_names_missing_weights(ckpts):
    with pytest.raises(CheckpointMismatchError, match="has 3 classes, the config has 7"):
        HamSegInferencer(DEMO_NMF, weights=ckpts["three"], device="cpu")
    with pytest.raises(FileNotFoundError, match="work_dirs/hamnet_r101-d8_8xb2-60k_voc12aug"):
        HamSegInferencer("ham_voc", device="cpu")  # the index's Weights: nothing is hosted


def test_mmsegs_own_inferencer_takes_hamseg_names_with_scope_hamseg(ckpts, images):
    """The line docs/ecosystem.md gives for mmseg's MMSegInferencer; without the scope mmseg
    looks in its own index."""
    ours = HamSegInferencer("hamseg-demo", weights=ckpts["own"], device="cpu")
    theirs = MMSegInferencer("hamseg-demo", weights=ckpts["own"], device="cpu", scope="hamseg")
    for image in images:
        expected = ours(image, return_datasamples=True).pred_sem_seg.data
        assert (theirs(image, return_datasamples=True).pred_sem_seg.data == expected).all()
    with pytest.raises(ValueError, match="Cannot find model: hamseg-demo in mmseg"):
        MMSegInferencer("hamseg-demo", weights=ckpts["own"], device="cpu")


@pytest.mark.slow
def test_label_maps_equal_tools_test_out_on_the_demo_config(tmp_path):
    from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes

    root = str(tmp_path / "context_shapes")
    generate_context_shapes(root, ContextShapesConfig(size=47, num_train=1, num_val=2), False)
    ckpt = make_checkpoint(str(tmp_path / "demo.pth"))
    out = str(tmp_path / "pred")
    # one image per batch, as inference_model runs it (a batch sums in another order, and an
    # untrained model's top two logits nearly tie)
    options = [f"data_root={root}", "default_hooks.visualization.draw=False"]
    options += [f"test_dataloader.{k}" for k in ("num_workers=0", "persistent_workers=False")]
    options += ["test_dataloader.batch_size=1"]
    cmd = [sys.executable, "tools/test.py", DEMO_NMF, ckpt, "--work-dir", str(tmp_path / "w")]
    cmd += ["--out", out, "--cfg-options", *options]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    model = init_model(DEMO_NMF, ckpt, device="cpu")
    names = sorted(os.listdir(osp.join(root, "img_dir", "val")))
    assert names == ["000000.png", "000001.png"]
    for name in names:
        ours = inference_model(model, osp.join(root, "img_dir", "val", name))
        ours = ours.pred_sem_seg.data[0].numpy()
        written = cv2.imread(osp.join(out, name), cv2.IMREAD_UNCHANGED)
        assert written.shape == ours.shape == (47, 47) and (written == ours).all(), name
