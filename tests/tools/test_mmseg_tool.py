"""tools/mmseg_tool.py: mmseg 1.2.2's tool scripts on the demo config and a tiny demo checkpoint.

Every tool runs as a real subprocess in a scratch folder that holds a small generated Context
Shapes dataset (the demo config's relative ``data/context_shapes``) and a checkpoint written here
(no training); the dataset tools also run on a child of the custom template (mmseg's generic
``BaseSegDataset``, its classes given in the config's ``metainfo``) over a tiny 3-class dataset.
"""

from __future__ import annotations

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

import pytest
import torch

import hamseg  # noqa: F401  (before mmseg)
from hamseg.cli import CLIError
from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from tests.conftest import REPO, write_tiny_dataset
from tools.lib import mmseg_front_end

FRONT_END = osp.join(REPO, "tools", "mmseg_tool.py")
DEMO = osp.join(REPO, "configs", "demo")
NMF_NAME = "demo/hamhead-nmf_r18-d8_context-shapes.py"
NMF = osp.join(REPO, "configs", NMF_NAME)
CD = osp.join(DEMO, "hamhead-cd_r18-d8_context-shapes.py")
NUM_TRAIN, NUM_VAL, SIZE = 3, 2, 64
CUSTOM = osp.join(REPO, "configs", "custom", "hamhead-nmf_r18-d8_custom.py")
CUSTOM_CLASSES = ["background", "cat", "dog"]  # the template's metainfo


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> str:
    """A folder with data/context_shapes (64 x 64 images) and ckpt.pth (a demo NMF model with the
    MessageHub and optimizer state that a training run saves)."""
    from mmengine.config import Config
    from mmengine.logging import MessageHub
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    root = str(tmp_path_factory.mktemp("mmseg_tools"))
    cfg = ContextShapesConfig(size=SIZE, num_train=NUM_TRAIN, num_val=NUM_VAL)
    generate_context_shapes(osp.join(root, "data", "context_shapes"), cfg, progress=False)
    init_default_scope("mmseg")
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(NMF).model)
    model.init_weights()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.decode_head(model.backbone(torch.rand(1, 3, 33, 35)))[0].sum().backward()
    optimizer.step()
    hub = MessageHub.get_instance("mmseg_tools_test")
    for step in range(3):
        hub.update_scalar("train/loss", 1.0 / (step + 1))
    torch.save(
        dict(
            meta=dict(iter=3, cfg=Config.fromfile(NMF).pretty_text),
            state_dict=model.state_dict(),
            message_hub=hub.state_dict(),
            optimizer=optimizer.state_dict(),
        ),
        osp.join(root, "ckpt.pth"),
    )
    return root


def run_front_end(workspace: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg")
    return subprocess.run(
        [sys.executable, FRONT_END, *args],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# ---- each tool through the front end ---------------------------------------------------------
# (arguments, check of the output): one case per tool; the check gets the workspace and stdout.


def check_print_config(ws: str, out: str) -> None:
    assert "type='HamHead'" in out and "type='NMF'" in out and "eval_seed=0" in out


def check_get_flops(ws: str, out: str) -> None:
    from mmengine.analysis.print_helper import _format_size
    from mmengine.config import Config
    from mmseg.registry import MODELS

    params = sum(p.numel() for p in MODELS.build(Config.fromfile(CD).model).parameters())
    assert re.search(rf"^Params: {re.escape(_format_size(params))}$", out, re.M), out
    assert re.search(r"^Input shape: \(64, 65\)$", out, re.M), out
    flops = re.search(r"^Flops: ([\d.]+)([MG])$", out, re.M)
    assert flops, out  # mmengine writes 0.105G for 105M: 12 draws at 64 x 65 (81M with 8)
    assert 10 < float(flops.group(1)) * (1000 if flops.group(2) == "G" else 1) < 200, out


def check_benchmark(ws: str, out: str) -> None:
    assert re.search(r"Done image \[200/ 200\], fps: [\d.]+", out), out
    (report,) = glob.glob(osp.join(ws, "bench", "fps_*.json"))
    with open(report) as f:
        fps = json.load(f)["average_fps"]
    assert math.isfinite(fps) and fps > 0  # mmseg 1.2.2 alone: nan for a 2-image test set


def check_browse_dataset(ws: str, out: str) -> None:
    import cv2

    names = sorted(os.listdir(osp.join(ws, "browse")))
    assert names == [f"{i:06d}.png" for i in range(NUM_TRAIN)]
    drawn = cv2.imread(osp.join(ws, "browse", names[0]))
    raw = cv2.imread(osp.join(ws, "data", "context_shapes", "img_dir", "train", names[0]))
    assert drawn.shape == raw.shape == (SIZE, SIZE, 3)
    assert (drawn != raw).any()  # the labels are painted over the image


def confusion_matrix_image_size(path: str) -> tuple[int, int]:
    from PIL import Image

    assert osp.getsize(path) > 1000
    with Image.open(path) as image:
        return image.size


def check_confusion_matrix(ws: str, out: str) -> None:
    # the script's figure: 2n x 1.6n inches at 300 dpi for n classes (Context Shapes: 7)
    assert confusion_matrix_image_size(osp.join(ws, "cm", "confusion_matrix.png")) == (4200, 3360)


def check_confusion_matrix_custom(ws: str, out: str) -> None:
    # 3 classes, the config's (mmseg 1.2.2 alone: KeyError: 'classes')
    size = confusion_matrix_image_size(osp.join(ws, "cm_custom", "confusion_matrix.png"))
    assert size == (1800, 1440)


def check_publish_model(ws: str, out: str) -> None:
    with open(osp.join(ws, "ckpt.pth"), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    assert not osp.exists(osp.join(ws, "demo_pub.pth"))  # renamed before the command returned
    ckpt = torch.load(osp.join(ws, f"demo_pub-{sha[:8]}.pth"), weights_only=True)
    source = torch.load(osp.join(ws, "ckpt.pth"), weights_only=True)
    assert "optimizer" not in ckpt and "message_hub" in ckpt  # HistoryBuffer loads safely
    assert ckpt["state_dict"].keys() == source["state_dict"].keys()
    assert all(torch.equal(v, source["state_dict"][k]) for k, v in ckpt["state_dict"].items())


def check_analyze_logs(ws: str, out: str) -> None:
    assert "metric is loss" in out and "metric is mIoU" in out
    assert osp.getsize(osp.join(ws, "curve.png")) > 1000


def write_log(ws: str) -> str:
    """A training log as mmengine writes it (vis_data/<timestamp>.json)."""
    path = osp.join(ws, "scalars.json")
    with open(path, "w") as f:
        for it in range(1, 5):
            f.write(json.dumps(dict(lr=0.01, loss=2.0 / it, iter=it, step=it)) + "\n")
        f.write(json.dumps(dict(aAcc=50.0, mIoU=30.0, mAcc=40.0, step=4)) + "\n")
    return path


def perfect_predictions(ws: str) -> str:
    """The val labels as predictions, in the layout tools/test.py --out writes."""
    preds = osp.join(ws, "preds")
    if not osp.isdir(preds):
        shutil.copytree(osp.join(ws, "data", "context_shapes", "ann_dir", "val"), preds)
    return preds


def custom_config(ws: str) -> str:
    """A child of the custom template (``BaseSegDataset``, classes in ``metainfo``) over a tiny
    3-class dataset of odd-size images in ``ws/data/custom`` (2 train, 3 val), written once."""
    path = osp.join(ws, "custom_child.py")
    if not osp.isfile(path):
        root = write_tiny_dataset(osp.join(ws, "data", "custom"), n_train=2, n_val=3)
        with open(path, "w") as f:
            f.write(
                f"_base_ = [{CUSTOM!r}]\n"
                f"train_dataloader = dict(dataset=dict(data_root={root!r}))\n"
                f"val_dataloader = dict(dataset=dict(data_root={root!r}))\n"
                "test_dataloader = val_dataloader\n"
            )
    return path


def custom_predictions(ws: str) -> str:
    """The custom dataset's val labels as predictions (tools/test.py --out's layout)."""
    preds = osp.join(ws, "preds_custom")
    if not osp.isdir(preds):
        custom_config(ws)
        shutil.copytree(osp.join(ws, "data", "custom", "ann_dir", "val"), preds)
    return preds


slow = pytest.mark.slow
TOOL_CASES = [
    # a packaged config name, as a pip user without a checkout gives it (hamseg/.mim/configs)
    pytest.param(
        "print_config", lambda ws: [f"hamseg::{NMF_NAME}"], check_print_config, id="print_config"
    ),
    pytest.param(
        "get_flops",
        lambda ws: [CD, "--shape", "64", "65"],
        check_get_flops,
        id="get_flops",
        marks=slow,
    ),
    pytest.param(
        "benchmark",
        lambda ws: [NMF, "ckpt.pth", "--work-dir", "bench"],
        check_benchmark,
        id="benchmark",
        marks=slow,
    ),
    pytest.param(
        "browse_dataset",
        lambda ws: [NMF, "--not-show", "--output-dir", "browse"],
        check_browse_dataset,
        id="browse_dataset",
        marks=slow,
    ),
    pytest.param(
        "confusion_matrix",
        lambda ws: [NMF, perfect_predictions(ws), "cm"],
        check_confusion_matrix,
        id="confusion_matrix",
        marks=slow,
    ),
    # mmseg's BaseSegDataset with the config's metainfo classes (the custom template's)
    pytest.param(
        "confusion_matrix",
        lambda ws: [custom_config(ws), custom_predictions(ws), "cm_custom"],
        check_confusion_matrix_custom,
        id="confusion_matrix-custom",
        marks=slow,
    ),
    pytest.param(
        "publish_model",
        lambda ws: ["ckpt.pth", "demo_pub.pth"],
        check_publish_model,
        id="publish_model",
        marks=slow,
    ),
    pytest.param(
        "analyze_logs",
        lambda ws: [write_log(ws), "--keys", "loss", "mIoU", "--out", "curve.png"],
        check_analyze_logs,
        id="analyze_logs",
        marks=slow,
    ),
]


@pytest.mark.parametrize("tool,make_args,check", TOOL_CASES)
def test_tool_runs_through_the_front_end(workspace, tool, make_args, check):
    if tool == "analyze_logs":
        pytest.importorskip("seaborn")
    check(workspace, ok(run_front_end(workspace, tool, *make_args(workspace))))


def test_every_listed_tool_has_a_case():
    assert sorted({p.values[0] for p in TOOL_CASES}) == sorted(mmseg_front_end.TOOLS)


def mim_run_script(name: str) -> str:
    """The script ``mim run hamseg NAME`` runs (openmim 0.3.9: the file below the package's
    tools/ whose path ends in /NAME.py; with several, a warning and the shortest path)."""
    found = glob.glob(osp.join(REPO, "tools", "**", f"{name}.py"), recursive=True)
    assert len(found) == 1, (name, found)
    return found[0]


@pytest.mark.parametrize("tool,make_args,check", TOOL_CASES)
def test_mim_run_names_run_the_tool(workspace, tmp_path, tool, make_args, check):
    """``mim run hamseg TOOL ARGS`` = ``python tools/.../TOOL.py ARGS``: each of mmseg's tool
    names runs the front end's tool (in a copy of the workspace: outputs start empty)."""
    if tool == "analyze_logs":
        pytest.importorskip("seaborn")
    ws = str(tmp_path / "ws")
    shutil.copytree(workspace, ws)
    for out in ("bench", "browse", "cm", "cm_custom", "curve.png", "example.py"):
        shutil.rmtree(osp.join(ws, out), ignore_errors=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg")
    script = [sys.executable, mim_run_script(tool), *make_args(ws)]
    result = subprocess.run(script, cwd=ws, env=env, capture_output=True, text=True, timeout=600)
    check(ws, ok(result))


def test_print_config_keeps_an_existing_example_py(tmp_path):
    (tmp_path / "example.py").write_text("mine = 1\n")
    out = ok(run_front_end(str(tmp_path), "print_config", f"hamseg::{NMF_NAME}"))
    assert (tmp_path / "example.py").read_text() == "mine = 1\n"
    assert "type='HamHead'" in (tmp_path / "example-1.py").read_text()
    assert "example.py exists and is kept: written to example-1.py instead" in out


def test_confusion_matrix_of_a_metainfo_dataset_has_the_config_classes(tmp_path, monkeypatch):
    """mmseg's confusion_matrix.py (run by the front end in this process) on the custom
    template's BaseSegDataset: the axes are the config's class names and the cells the
    row-normalised counts of imperfect predictions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image

    config = custom_config(str(tmp_path))
    ann = osp.join(tmp_path, "data", "custom", "ann_dir", "val")
    preds = tmp_path / "preds"
    preds.mkdir()
    counts = np.zeros((3, 3), np.int64)
    for name in sorted(os.listdir(ann)):
        label = np.array(Image.open(osp.join(ann, name)))
        pred = label.copy()
        pred[:, :6] = 2  # the left 6 columns predicted "dog"
        pred[label == 2] = 2
        Image.fromarray(pred).save(preds / name)
        np.add.at(counts, (label.ravel(), pred.ravel()), 1)
    assert counts[1, 2] > 0 and counts[0, 2] > 0 and counts[2, :2].sum() == 0
    seen = {}
    savefig = plt.savefig

    def save_and_record(*args, **kwargs):
        ax = plt.gcf().axes[0]  # the matrix (axes[1]: the colour bar)
        seen["x"] = [t.get_text() for t in ax.get_xticklabels()]
        seen["y"] = [t.get_text() for t in ax.get_yticklabels()]
        seen["cells"] = [t.get_text() for t in ax.texts]
        return savefig(*args, **kwargs)

    monkeypatch.setattr(plt, "savefig", save_and_record)
    try:
        mmseg_front_end.run_tool("confusion_matrix", [config, str(preds), str(tmp_path / "cm")])
    finally:
        plt.close("all")
    assert seen["x"] == seen["y"] == CUSTOM_CLASSES
    percent = counts / counts.sum(axis=1, keepdims=True) * 100
    assert seen["cells"] == [f"{round(p, 2)}%" for p in percent.ravel()]
    assert seen["cells"][6:] == ["0.0%", "0.0%", "100.0%"]  # every dog pixel predicted dog
    assert osp.getsize(tmp_path / "cm" / "confusion_matrix.png") > 1000


@pytest.mark.slow
def test_misc_browse_dataset_draws_the_config_classes(workspace):
    """mmseg's other browse_dataset (misc/) on the custom template's BaseSegDataset: mmseg 1.2.2
    alone asserts "class information is not provided" (it reads the empty class attribute)."""
    import cv2

    ok(
        run_front_end(
            workspace,
            "misc/browse_dataset",
            custom_config(workspace),
            "--not-show",
            "--output-dir",
            "browse_misc",
        )
    )
    out = osp.join(workspace, "browse_misc", "vis_data", "vis_image")
    assert sorted(os.listdir(out)) == ["000.jpg_0.png", "001.jpg_0.png"]
    for i, name in enumerate(sorted(os.listdir(out))):
        drawn = cv2.imread(osp.join(out, name))
        raw = cv2.imread(osp.join(workspace, "data", "custom", "img_dir", "train", f"00{i}.jpg"))
        assert drawn.shape == raw.shape == (33 + 2 * i, 37, 3)  # odd sizes, as written
        assert (drawn != raw).any()  # labels (and class names) painted over the image


@pytest.mark.slow
def test_cfg_options_data_root_moves_every_dataset_of_the_config(workspace, tmp_path):
    """mmseg's scripts merge ``data_root=`` into the top-level variable alone; through the front
    end every dataset that used it moves (as in tools/train.py), else one line, exit 2."""
    out = ok(
        run_front_end(workspace, "print_config", CUSTOM, "--cfg-options", f"data_root={tmp_path}")
    )
    moved = re.findall(rf"data_root=\s*'{re.escape(str(tmp_path))}'", out)  # yapf may wrap
    assert len(moved) == 3, out[-3000:]  # the train, val and test datasets
    assert out.count("data/my_dataset") == 1  # left only in the template's _dataset helper
    elsewhere = [f"{split}_dataloader.dataset.data_root=a" for split in ("train", "val", "test")]
    result = run_front_end(
        workspace, "print_config", CUSTOM, "--cfg-options", *elsewhere, "data_root=x"
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: --cfg-options data_root=x: ")


def test_get_flops_counts_the_nmf_demo(workspace):
    """mmseg's get_flops on an NMF head (it used to assert in bmm_flop_jit on ``out=``)."""
    result = run_front_end(workspace, "get_flops", NMF, "--shape", "64", "65")
    assert "Flops:" in ok(result)


def test_a_bad_argument_is_one_line_and_exit_code_2(workspace):
    result = run_front_end(workspace, "publish_model", "ckpt.pth", "hamnet.pth")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: publish_model: OUT_FILE")
    assert "hamnet_pub.pth" in result.stderr and not glob.glob(osp.join(workspace, "hamne*"))


# ---- why the front end: mmseg's scripts alone on this stack ---------------------------------


@pytest.mark.slow
def test_mmseg_scripts_alone_fail_on_mmcv_lite(workspace):
    from hamseg.compat.mmcv_ops import compiled_mmcv_available

    if compiled_mmcv_available():
        pytest.skip("compiled mmcv: mmseg's scripts work without hamseg")
    script = osp.join(mmseg_front_end.mmseg_tools_dir(), "misc", "print_config.py")
    result = subprocess.run(
        [sys.executable, script, NMF], cwd=workspace, capture_output=True, text=True, timeout=600
    )
    assert result.returncode != 0 and "No module named 'mmcv._ext'" in result.stderr


# ---- the front end's own logic ----------------------------------------------------------------


def test_short_names_and_paths_resolve_to_mmseg_scripts():
    root = mmseg_front_end.mmseg_tools_dir()
    for name, rel in mmseg_front_end.TOOLS.items():
        assert mmseg_front_end.resolve_tool(name) == (osp.join(root, rel), rel)
    rel = "misc/browse_dataset.py"
    assert mmseg_front_end.resolve_tool("misc/browse_dataset") == (osp.join(root, rel), rel)
    for bad in ("nope", "../../mmseg/__init__", "misc"):
        with pytest.raises(CLIError, match="unknown mmseg tool"):
            mmseg_front_end.resolve_tool(bad)


def test_benchmark_refuses_a_checkpoint_of_another_class_count(workspace, tmp_path):
    """mmseg's benchmark.py loads non-strictly and would time a partly random model: the front
    end checks the checkpoint against the config first (as tools/test.py), one line, exit 2."""
    from tests.helpers import make_checkpoint

    three = make_checkpoint(str(tmp_path / "three.pth"), NMF, num_classes=3)
    result = run_front_end(workspace, "benchmark", NMF, three, "--work-dir", "bench3")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: checkpoint ") and "decode_head.conv_seg.weight" in error
    assert "the checkpoint has 3 classes, the config has 7" in error, error
    assert "fps" not in result.stdout
    mmseg_front_end.check_inputs(
        "analysis_tools/benchmark.py", [NMF, osp.join(workspace, "ckpt.pth")]
    )


def test_inputs_are_checked_before_the_script_runs(tmp_path):
    with pytest.raises(FileNotFoundError, match="config file not found: missing.py"):
        mmseg_front_end.check_inputs("analysis_tools/get_flops.py", ["missing.py", "--shape", "64"])
    with pytest.raises(FileNotFoundError, match="checkpoint not found: none.pth"):
        mmseg_front_end.check_inputs("analysis_tools/benchmark.py", [NMF, "none.pth"])
    ckpt = tmp_path / "c.pth"
    torch.save(dict(state_dict=dict(w=torch.ones(2))), ckpt)
    for name, fine in [
        ("x.pth", True),
        ("model.pth", True),
        ("depth.pth", False),
        ("out.ckpt", False),
        (".pth", False),
    ]:
        argv = [str(ckpt), name]
        if fine:
            mmseg_front_end.check_inputs("misc/publish_model.py", argv)
        else:
            with pytest.raises(CLIError, match="mmseg 1.2.2 strips"):
                mmseg_front_end.check_inputs("misc/publish_model.py", argv)
    mmseg_front_end.check_inputs("misc/print_config.py", ["--help"])  # options only: the script's


def test_packaged_config_names_become_the_files_the_script_reads():
    import mmseg

    from hamseg.compat.package_lookup import PACKAGE_DIR

    fcn = "fcn/fcn_r18-d8_4xb2-80k_cityscapes-512x1024.py"
    cases = {
        f"hamseg::{NMF_NAME}": osp.join(PACKAGE_DIR, ".mim", "configs", NMF_NAME),
        f"mmseg::{fcn}": osp.join(osp.dirname(mmseg.__file__), ".mim", "configs", fcn),
        NMF: NMF,
    }
    for name, path in cases.items():
        argv = [name, "--shape", "64"]
        got = mmseg_front_end.check_inputs("analysis_tools/get_flops.py", argv)
        assert got == [path, "--shape", "64"] and argv[0] == name  # the caller's list is kept
    missing = r"^config file not found: hamseg::nope.py \(no such file"
    with pytest.raises(FileNotFoundError, match=missing):
        mmseg_front_end.check_inputs("misc/print_config.py", ["hamseg::nope.py"])


def test_publish_model_refuses_a_checkpoint_with_pickled_callables(tmp_path):
    from hamseg.compat.checkpoint import UnsafeCheckpointError

    ckpt = tmp_path / "c.pth"
    torch.save(dict(state_dict=dict(w=torch.ones(2)), hook=print), ckpt)
    with pytest.raises(UnsafeCheckpointError, match=r"builtins\.print"):
        mmseg_front_end.check_inputs("misc/publish_model.py", [str(ckpt), "x.pth"])


def test_analyze_logs_without_seaborn_says_what_to_install(monkeypatch):
    real = mmseg_front_end.importlib.util.find_spec
    monkeypatch.setattr(
        mmseg_front_end.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "seaborn" else real(name, *a),
    )
    with pytest.raises(CLIError, match=r"needs seaborn: pip install 'hamseg\[plots\]'"):
        mmseg_front_end.check_inputs("analysis_tools/analyze_logs.py", ["log.json"])


def test_no_tool_prints_the_list(capsys):
    mmseg_front_end.main([])
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in mmseg_front_end.TOOLS)


def test_any_python_file_runs_after_import_hamseg(tmp_path):
    """mmseg's demo/*.py or a user's script: ``mmseg.apis`` imports (on mmcv-lite too), the
    script's folder is on sys.path and its arguments reach it, as with ``python script.py``."""
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    (tmp_path / "mine.py").write_text(
        "import sys\nfrom mmseg.apis import MMSegInferencer, inference_model\nimport helper\n"
        "print('ran', __name__, helper.VALUE, sys.argv[1:], 'hamseg' in sys.modules)\n"
    )
    result = run_front_end(str(tmp_path), "mine.py", "a.png", "--device", "cpu")
    assert ok(result).splitlines()[-1] == "ran __main__ 7 ['a.png', '--device', 'cpu'] True"


@pytest.mark.parametrize(
    "args, expected",
    [
        (  # mmseg 1.2.2's script builds the model the 0.x way
            ["deployment/pytorch2torchscript", "x.py"],
            "error: mmseg 1.2.2's deployment/pytorch2torchscript.py is left from mmseg 0.x and "
            "fails on every 1.x config (AssertionError: test_cfg specified in both outer field and "
            "model field); export with python tools/deploy/export_onnx.py CONFIG CHECKPOINT --out "
            "model.onnx",
        ),
        (  # LightHamHead -> HamHead in mmseg's SegNeXt config (issue 27, item 8)
            ["get_flops", "swap.py", "--shape", "64"],
            "error: HamHead is HamNet's head for one ResNet feature map (in_channels: an int); for "
            "SegNeXt's multi-level input (in_channels a list) use type='HamLightHead', which also "
            "takes mmseg LightHamHead's ham_kwargs (HamHead: ham_cfg=dict(type='NMF'))",
        ),
    ],
)
def test_refusals_are_one_line_and_exit_code_2(tmp_path, args, expected):
    (tmp_path / "swap.py").write_text(
        "_base_ = 'mmseg::segnext/segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py'\n"
        "model = dict(decode_head=dict(type='HamHead'))\n"
    )
    result = run_front_end(str(tmp_path), *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == expected
