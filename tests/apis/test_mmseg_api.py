"""hamseg.apis: mmseg's init_model / inference_model / MMSegInferencer on hamseg's models, with
strict checkpoint loading (issue #12) and the label maps of tools/test.py (issue #17)."""

from __future__ import annotations

import os
import os.path as osp
import re
import warnings

import cv2
import numpy as np
import pytest
import torch

from hamseg.apis import CheckpointMismatchError, HamSegInferencer, inference_model, init_model
from hamseg.apis.inference import predict_label, resolve_model_name
from tests.conftest import REPO
from tests.helpers import (
    DEMO_NMF,
    make_checkpoint,
    one_thread,  # noqa: F401  (fixture)
)
from tests.tools.test_finetune_path import run

pytestmark = pytest.mark.usefixtures("one_thread")

#: Class names no config or dataset has: they can only come from the checkpoint's meta.
OWN_CLASSES = [f"k{i}" for i in range(7)]
OWN_PALETTE = [[10 * i, 20 * i, 30 * i] for i in range(7)]
MISMATCH = (
    "decode_head.conv_seg.weight is (3, 128, 1, 1) in the checkpoint and (7, 128, 1, 1) in the "
    "model: the checkpoint has 3 classes, the config has 7"
)


def own_classes_checkpoint(path: str) -> str:
    """A demo checkpoint (mmengine's format) whose meta names the classes k0..k6."""
    make_checkpoint(path)
    ckpt = torch.load(path, weights_only=True)
    ckpt["meta"]["dataset_meta"] = dict(classes=OWN_CLASSES, palette=OWN_PALETTE)
    torch.save(ckpt, path)
    return path


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("mmseg_api")
    return dict(
        own=own_classes_checkpoint(str(root / "own.pth")),
        three=make_checkpoint(str(root / "three.pth"), num_classes=3),
    )


def test_model_names_and_aliases_resolve_to_hamseg_configs():
    config, weights = resolve_model_name("ham_voc")
    assert osp.realpath(config) == osp.join(
        REPO, "configs", "hamnet", "hamnet_r101-d8_8xb2-60k_voc12aug-513x513.py"
    )
    assert weights == "work_dirs/hamnet_r101-d8_8xb2-60k_voc12aug-513x513/iter_60000.pth"
    assert resolve_model_name("HamHead-NMF_R18-D8_Context-Shapes") is not None
    assert resolve_model_name("no-such-model") is None


def test_inferencer_by_name_equals_init_model_and_takes_the_checkpoints_classes(ckpts):
    image = np.random.default_rng(0).integers(0, 255, (45, 53, 3), dtype=np.uint8)  # BGR
    inferencer = HamSegInferencer(
        "hamhead-nmf_r18-d8_context-shapes", weights=ckpts["own"], device="cpu"
    )
    by_name = inferencer(image, return_datasamples=True).pred_sem_seg.data[0]  # one image
    model = init_model(DEMO_NMF, ckpts["own"], device="cpu")
    direct = inference_model(model, image).pred_sem_seg.data[0]
    assert tuple(direct.shape) == (45, 53) and bool((by_name == direct).all())
    assert len(direct.unique()) > 1  # a real label map, not a constant
    assert inferencer.model.dataset_meta == dict(classes=OWN_CLASSES, palette=OWN_PALETTE)
    assert list(model.dataset_meta["classes"]) == OWN_CLASSES
    inferencer(image, return_vis=True)  # the visualizer takes the model's classes
    assert inferencer.visualizer.dataset_meta["classes"] == OWN_CLASSES
    from_weights = HamSegInferencer(None, weights=ckpts["own"], device="cpu")  # stored config
    assert bool((from_weights(image, return_datasamples=True).pred_sem_seg.data[0] == direct).all())


def test_init_model_and_inferencer_refuse_another_class_count_mmseg_does_not(ckpts):
    from mmseg.apis import init_model as mmseg_init_model

    with pytest.raises(CheckpointMismatchError) as err:
        init_model(DEMO_NMF, ckpts["three"], device="cpu")
    assert MISMATCH in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(CheckpointMismatchError, match=re.escape(MISMATCH)):
        HamSegInferencer(DEMO_NMF, weights=ckpts["three"], device="cpu")
    with warnings.catch_warnings():  # mmseg's own: a warning, then a random 7-class classifier
        warnings.simplefilter("ignore")
        model = mmseg_init_model(DEMO_NMF, ckpts["three"], device="cpu")
    assert model.decode_head.conv_seg.out_channels == 7


def test_init_model_takes_options_and_hamseg_names_and_builds_without_weights(ckpts):
    name = "hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py"
    model = init_model(
        name, ckpts["three"], "cpu", dict(model=dict(decode_head=dict(num_classes=3)))
    )
    assert model.decode_head.conv_seg.out_channels == 3
    assert model.dataset_meta["classes"] == ["class 0", "class 1", "class 2"]
    assert init_model(name, None, "cpu").decode_head.conv_seg.out_channels == 7  # mmseg's path


def test_inferencer_without_the_indexed_weights_is_one_line():
    with pytest.raises(
        FileNotFoundError, match=r"^weights not found: work_dirs/hamnet_r101-d8.*pass weights="
    ):
        HamSegInferencer("ham_voc", device="cpu")


def test_api_label_map_equals_tools_test_out_on_the_demo_config(tmp_path):
    """hamseg.apis on the demo config and a demo checkpoint gives, for each validation image, the
    label map tools/test.py --out writes for it."""
    from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes

    root = str(tmp_path / "context_shapes")
    generate_context_shapes(root, ContextShapesConfig(size=47, num_train=1, num_val=2), False)
    ckpt = make_checkpoint(str(tmp_path / "demo.pth"))
    out = str(tmp_path / "pred")
    opts = [f"data_root={root}", "default_hooks.visualization.draw=False"]
    opts += ["test_dataloader.num_workers=0", "test_dataloader.persistent_workers=False"]
    # One image per batch, as inference_model runs it: a batch of two sums in another order, and
    # a 1e-9 difference flips the argmax where an untrained model's top two logits nearly tie.
    opts += ["test_dataloader.batch_size=1"]
    proc = run(
        "tools/test.py",
        DEMO_NMF,
        ckpt,
        "--work-dir",
        str(tmp_path / "w"),
        "--out",
        out,
        "--cfg-options",
        *opts,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    model = init_model(DEMO_NMF, ckpt, device="cpu")
    names = sorted(os.listdir(osp.join(root, "img_dir", "val")))
    assert names == ["000000.png", "000001.png"]
    for name in names:
        image = cv2.imread(osp.join(root, "img_dir", "val", name))
        ours = predict_label(model, image[:, :, ::-1])
        written = cv2.imread(osp.join(out, name), cv2.IMREAD_UNCHANGED)
        assert written.shape == ours.shape == (47, 47) and (written == ours).all(), name


def test_hamseg_apis_has_the_entry_points_of_mmseg_apis():
    import mmseg.apis

    import hamseg.apis

    assert set(mmseg.apis.__all__) <= set(hamseg.apis.__all__)
    assert hamseg.apis.MMSegInferencer is HamSegInferencer  # strict, like init_model
    assert hamseg.apis.show_result_pyplot is mmseg.apis.show_result_pyplot
