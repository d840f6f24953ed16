"""mmseg 1.2.2's tool scripts on hamseg configs: tools/mmseg_tool.py and the scripts at mmseg's
places (tools/analysis_tools/, tools/misc/) run them after ``import hamseg`` with the fixes of
hamseg.compat.mmseg_tools; each fix works, is undone after the script, and has a canary that
fails when mmseg changes the script it fixes."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import math
import os
import os.path as osp
import re
import shutil
import subprocess
import sys
import time

import cv2
import mmengine.analysis as analysis
import numpy as np
import pytest
import torch
from torch import nn

import hamseg
import hamseg.compat.mmseg_tools as tools
from hamseg.compat.mmseg_tools import TOOLS_DIR, run_mmseg_tool, tool_fixes
from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from hamseg.utils.errors import UsageError
from tests.conftest import REPO, write_tiny_dataset
from tests.helpers import DEMO_NMF, run_tool_here

CD = osp.join(REPO, "configs", "demo", "hamhead-cd_r18-d8_context-shapes.py")
CUSTOM = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
NUM_TRAIN, SIZE = 3, 64
FRONT_END = osp.join(REPO, "tools", "mmseg_tool.py")
#: mmseg's scripts that hamseg has at mmseg's places (tools/analysis_tools/, tools/misc/).
TOOLS = dict(get_flops="analysis_tools", benchmark="analysis_tools", analyze_logs="analysis_tools")
TOOLS.update(browse_dataset="analysis_tools", confusion_matrix="analysis_tools")
TOOLS.update(print_config="misc", publish_model="misc")
TOOLS = {name: f"{folder}/{name}.py" for name, folder in TOOLS.items()}

#: The mmseg 1.2.2 scripts hamseg.compat.mmseg_tools fixes, and the digests of their source.
FIXED = {
    "analysis_tools/get_flops.py": "757cb03692d93a45",
    "analysis_tools/browse_dataset.py": "be114c33749dfa1d",
    "analysis_tools/benchmark.py": "3318b4fde5c982d0",
    "analysis_tools/confusion_matrix.py": "9a99f040618153ff",
    "misc/browse_dataset.py": "3e0cc475553887e6",
    "misc/publish_model.py": "d9864feb1ddc44c6",
}


@pytest.mark.parametrize("script", FIXED)
def test_canary_the_fixed_scripts_are_mmseg_1_2_2s(script):
    """When this fails, mmseg changed the script: re-check its fix in hamseg.compat.mmseg_tools
    (and FIXED_VERSION), then update the digest."""
    import mmseg

    with open(osp.join(TOOLS_DIR, script), encoding="utf-8") as f:
        assert hashlib.sha256(f.read().encode()).hexdigest()[:16] == FIXED[script]
    assert mmseg.__version__ == tools.FIXED_VERSION


def test_canary_mmsegs_visualizer_refuses_a_non_contiguous_image():
    with pytest.raises(cv2.error):
        _draw(_non_contiguous_image())


def test_get_flops_counts_the_real_inputs():
    model, x = nn.Conv2d(3, 5, 3, bias=False), torch.rand(1, 3, 9, 11)
    with tool_fixes("analysis_tools/get_flops.py", []):
        info = analysis.get_model_complexity_info(model, (3, 99, 99), inputs=x, show_table=False)
    assert info["flops"] == 27 * 5 * 7 * 9  # 3x3x3 MACs per output value, 5 x 7 x 9 of them
    with pytest.raises(ValueError, match="cannot be both set"):  # the canary: mmengine's refusal
        analysis.get_model_complexity_info(model, (3, 9, 11), inputs=x)


def _non_contiguous_image() -> np.ndarray:
    chw = torch.randint(0, 255, (3, 31, 37), dtype=torch.uint8, generator=torch.Generator())
    image = chw.permute(1, 2, 0).numpy()[..., [2, 1, 0]]  # what browse_dataset.py passes
    assert not image.flags.c_contiguous
    return image


def _draw(image: np.ndarray) -> np.ndarray:
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    from mmseg.visualization import SegLocalVisualizer

    vis = SegLocalVisualizer.get_instance("mmseg_tools_test", alpha=0.5)
    vis.dataset_meta = dict(classes=("a", "b"), palette=[[0, 0, 0], [255, 0, 0]])
    label = torch.zeros(1, 31, 37, dtype=torch.long)
    label[0, 5:20, 5:25] = 1
    vis.add_datasample("x", image, SegDataSample(gt_sem_seg=PixelData(data=label)), draw_pred=False)
    return vis.get_image()


@pytest.mark.parametrize("script", ["analysis_tools/browse_dataset.py", "misc/browse_dataset.py"])
def test_browse_dataset_draws_a_non_contiguous_image_as_its_copy(script):
    image = _non_contiguous_image()
    with tool_fixes(script, []):
        drawn = _draw(image)
    assert np.array_equal(drawn, _draw(np.ascontiguousarray(image)))
    assert not np.array_equal(drawn, image)  # labels and class names drawn


def test_benchmark_gets_a_loader_that_repeats():
    from mmengine.runner import Runner

    raw = vars(Runner)["build_dataloader"]
    loader = dict(
        batch_size=1, dataset=[0, 1, 2], sampler=dict(type="DefaultSampler", shuffle=False)
    )
    with tool_fixes("analysis_tools/benchmark.py", []):
        batches = Runner.build_dataloader(loader)
        assert [int(b[0]) for b, _ in zip(batches, range(7))] == [0, 1, 2, 0, 1, 2, 0]
        assert list(Runner.build_dataloader(dict(loader, dataset=[]))) == []  # no endless loop
    assert vars(Runner)["build_dataloader"] is raw


@pytest.mark.parametrize("script", ["analysis_tools/confusion_matrix.py", "misc/browse_dataset.py"])
def test_the_scripts_read_a_datasets_own_metainfo(script):
    """The custom template's BaseSegDataset (classes from the config), and a subset of a dataset
    class's classes (2 x 2, not the class's 3 x 3)."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.datasets import BaseSegDataset
    from mmseg.registry import DATASETS

    class ThreeClasses(BaseSegDataset):
        METAINFO = dict(classes=("a", "b", "c"), palette=[[1, 1, 1], [2, 2, 2], [3, 3, 3]])

    init_default_scope("mmseg")
    custom = dict(Config.fromfile(CUSTOM).test_dataloader.dataset, lazy_init=True)
    subset = dict(type=ThreeClasses, metainfo=dict(classes=("a", "c")), lazy_init=True)
    with tool_fixes(script, []):
        assert DATASETS.build(custom).METAINFO["classes"] == ("background", "cat", "dog")
        assert DATASETS.build(subset).METAINFO["palette"] == [[1, 1, 1], [3, 3, 3]]
    assert "classes" not in DATASETS.build(custom).METAINFO  # undone; the canary: mmseg's class


@pytest.mark.parametrize("name", ["hamnet.pth", "out.ckpt", "x.pth"])
def test_publish_model_refuses_a_name_mmseg_would_mangle(name):
    with contextlib.ExitStack() as stack:
        if name != "x.pth":  # 'hamnet.pth' -> 'hamne-<sha>.pth', 'out.ckpt' -> 'out.ck-<sha>.pth'
            stack.enter_context(pytest.raises(UsageError, match=f"'{name}'.*mmseg 1.2.2 strips"))
        stack.enter_context(tool_fixes("misc/publish_model.py", ["--x", "in.pth", name]))


def test_another_mmseg_version_gets_no_fixes(monkeypatch):
    import mmseg

    monkeypatch.setattr(mmseg, "__version__", "1.2.3")
    count = analysis.get_model_complexity_info
    with tool_fixes("analysis_tools/get_flops.py", []):
        assert analysis.get_model_complexity_info is count
    with tool_fixes("misc/publish_model.py", ["in.pth", "hamnet.pth"]):
        pass


def test_a_python_file_runs_as_python_file_args_after_import_hamseg(tmp_path, capsys):
    """mmseg's demo/*.py or a user's script: mmseg.apis imports (on mmcv-lite too), its folder
    is on sys.path, its arguments reach it (a packaged config as its file: mmseg's get_flops.py
    checks that its config exists); sys.argv and sys.path are restored after."""
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    (tmp_path / "mine.py").write_text(
        "import sys\nfrom mmseg.apis import MMSegInferencer\nimport helper\n"
        "print('ran', __name__, helper.VALUE, sys.argv[1:])\n"
    )
    argv, path = list(sys.argv), list(sys.path)
    name = "demo/hamhead-nmf_r18-d8_context-shapes.py"  # a packaged name becomes its file
    run_mmseg_tool(str(tmp_path / "mine.py"), [f"hamseg::{name}", "a.png", "--device", "cpu"])
    packaged = osp.join(osp.dirname(hamseg.__file__), ".mim", "configs", name)
    assert capsys.readouterr().out == f"ran __main__ 7 [{packaged!r}, 'a.png', '--device', 'cpu']\n"
    assert sys.argv == argv and sys.path == path


def test_names_paths_and_unknown_tools_and_the_front_end(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # print_config.py writes example.py here
    run_mmseg_tool("print_config", ["hamseg::demo/hamhead-nmf_r18-d8_context-shapes.py"])
    assert "type='HamHead'" in capsys.readouterr().out  # a packaged config name, as pip users
    for bad in ("nope", "misc", "misc/nope.py"):
        with pytest.raises(UsageError, match="unknown mmseg tool"):
            run_mmseg_tool(bad, [])
    code, out, _ = run_tool_here(FRONT_END, [], monkeypatch, capsys)
    assert code == 0 and all(name in out for name in TOOLS)
    code, _, err = run_tool_here(FRONT_END, ["nope"], monkeypatch, capsys)
    assert code == 2 and err.startswith("error: unknown mmseg tool 'nope'") and err.count("\n") == 1


def test_every_tool_name_has_one_script_at_mmsegs_place():
    """``mim run hamseg NAME`` runs the one tools/**/NAME.py; it is mmseg's path for NAME."""
    for name, script in TOOLS.items():
        found = glob.glob(osp.join(REPO, "tools", "**", f"{name}.py"), recursive=True)
        assert found == [osp.join(REPO, "tools", script)], (name, found)
        assert osp.isfile(osp.join(TOOLS_DIR, script))


@pytest.mark.slow
def test_mmsegs_scripts_alone_fail_on_mmcv_lite(tmp_path):
    from hamseg.compat.mmcv_ops import compiled_mmcv_available

    if compiled_mmcv_available():
        pytest.skip("a compiled mmcv: mmseg's scripts work without hamseg")
    script = osp.join(TOOLS_DIR, "misc", "print_config.py")
    result = subprocess.run([sys.executable, script, DEMO_NMF], capture_output=True, timeout=600)
    result.stderr = result.stderr.decode()
    assert result.returncode != 0 and "No module named 'mmcv._ext'" in result.stderr


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> str:
    """data/context_shapes (64 x 64), a tiny 3-class dataset, a child of the custom template on
    it, its val labels as predictions, a training log and ckpt.pth (a demo NMF model with the
    MessageHub and optimizer state a training run saves)."""
    from mmengine.config import Config
    from mmengine.logging import MessageHub
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    root = tmp_path_factory.mktemp("mmseg_tools")
    cfg = ContextShapesConfig(size=SIZE, num_train=NUM_TRAIN, num_val=2)
    generate_context_shapes(str(root / "data" / "context_shapes"), cfg, progress=False)
    custom = write_tiny_dataset(str(root / "data" / "custom"), n_train=2, n_val=3)
    loaders = "".join(
        f"{s}_dataloader = dict(dataset=dict(data_root={custom!r}))\n"
        for s in ("train", "val", "test")
    )
    (root / "custom_child.py").write_text(f"_base_ = [{CUSTOM!r}]\n{loaders}")
    shutil.copytree(osp.join(custom, "ann_dir", "val"), root / "preds_custom")
    with open(root / "scalars.json", "w") as f:  # as mmengine writes vis_data/<time>.json
        for it in range(1, 5):
            f.write(json.dumps(dict(lr=0.01, loss=2.0 / it, iter=it, step=it)) + "\n")
        f.write(json.dumps(dict(aAcc=50.0, mIoU=30.0, mAcc=40.0, step=4)) + "\n")
    init_default_scope("mmseg")
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(DEMO_NMF).model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.decode_head(model.backbone(torch.rand(1, 3, 33, 35)))[0].sum().backward()
    optimizer.step()
    hub = MessageHub.get_instance("mmseg_tools_test")
    hub.update_scalar("train/loss", 0.5)
    state = dict(state_dict=model.state_dict(), optimizer=optimizer.state_dict())
    torch.save(dict(meta=dict(iter=3), message_hub=hub.state_dict(), **state), root / "ckpt.pth")
    return str(root)


def check_get_flops(ws: str, out: str) -> None:
    assert re.search(r"^Input shape: \(64, 65\)$", out, re.M), out
    flops = re.search(r"^Flops: ([\d.]+)([MG])$", out, re.M)  # 12 draws at 64 x 65: ~105M
    assert 10 < float(flops.group(1)) * (1000 if flops.group(2) == "G" else 1) < 200, out


def check_benchmark(ws: str, out: str) -> None:
    assert re.search(r"Done image \[200/ 200\], fps: [\d.]+", out), out
    (report,) = glob.glob(osp.join(ws, "bench", "fps_*.json"))
    with open(report) as f:
        assert math.isfinite(json.load(f)["average_fps"])  # mmseg alone: nan for 2 images


def check_browse_dataset(ws: str, out: str) -> None:
    names = sorted(os.listdir(osp.join(ws, "browse")))
    assert names == [f"{i:06d}.png" for i in range(NUM_TRAIN)]
    drawn = cv2.imread(osp.join(ws, "browse", names[0]))
    raw = cv2.imread(osp.join(ws, "data", "context_shapes", "img_dir", "train", names[0]))
    assert drawn.shape == raw.shape == (SIZE, SIZE, 3) and (drawn != raw).any()


def check_publish_model(ws: str, out: str) -> None:
    with open(osp.join(ws, "ckpt.pth"), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    for _ in range(100):  # mmseg's script starts `mv` and does not wait for it
        if osp.isfile(osp.join(ws, f"demo_pub-{sha[:8]}.pth")):
            break
        time.sleep(0.1)
    published = torch.load(osp.join(ws, f"demo_pub-{sha[:8]}.pth"), weights_only=True)
    assert "optimizer" not in published and "message_hub" in published  # loads safely
    assert (
        published["state_dict"].keys() == torch.load(osp.join(ws, "ckpt.pth"))["state_dict"].keys()
    )


TOOL_CASES = {
    "print_config": (
        [f"hamseg::demo/{osp.basename(DEMO_NMF)}"],
        lambda ws, out: "type='NMF'" in out,
    ),
    "get_flops": ([CD, "--shape", "64", "65"], check_get_flops),
    "benchmark": ([DEMO_NMF, "ckpt.pth", "--work-dir", "bench"], check_benchmark),
    "browse_dataset": ([DEMO_NMF, "--not-show", "--output-dir", "browse"], check_browse_dataset),
    "confusion_matrix": (  # the figure: 2n x 1.6n inches at 300 dpi for n classes
        ["custom_child.py", "preds_custom", "cm"],
        lambda ws, out: (
            cv2.imread(osp.join(ws, "cm", "confusion_matrix.png")).shape[:2] == (1440, 1800)
        ),
    ),
    "publish_model": (["ckpt.pth", "demo_pub.pth"], check_publish_model),
    "analyze_logs": (
        ["scalars.json", "--keys", "loss", "mIoU", "--out", "curve.png"],
        lambda ws, out: "metric is mIoU" in out and osp.getsize(osp.join(ws, "curve.png")) > 1000,
    ),
    # through the front end; mmseg alone: "class information is not provided"
    "misc/browse_dataset": (
        ["custom_child.py", "--not-show", "--output-dir", "misc"],
        lambda ws, out: len(os.listdir(osp.join(ws, "misc", "vis_data", "vis_image"))) == 2,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("tool", TOOL_CASES)
def test_each_tool_runs_from_its_script_at_mmsegs_place(workspace, tool):
    if tool == "analyze_logs":
        pytest.importorskip("seaborn")
    args, check = TOOL_CASES[tool]
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    script = [osp.join(REPO, "tools", TOOLS[tool])] if tool in TOOLS else [FRONT_END, tool]
    cmd = [sys.executable, *script, *args]
    result = subprocess.run(
        cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert check(workspace, result.stdout) is not False, result.stdout[-3000:]
