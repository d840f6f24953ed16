"""fp16 and int8 graphs (hamseg.apis.export; export_onnx.py --precision, --quantize): the
conversions, their gates on the val split, the data they need checked before the export."""

from __future__ import annotations

import json
import os
import os.path as osp
import re
import time

import cv2
import numpy as np
import pytest

from hamseg.apis import init_model
from hamseg.apis.export import compare, convert, export_onnx, gate_datasets, samples
from tests.apis.test_export import (
    EXPORT,
    RUNNER,
    TINY,
    one_line_error,
    run,
    tiny_checkpoint,
    tiny_config,
    tool,
)
from tests.conftest import REPO, write_tiny_dataset
from tests.helpers import one_thread, run_tool_here  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory, one_thread) -> dict:  # noqa: F811
    """The tiny model on a tiny dataset (4 train, 3 val images), a checkpoint, its fp32 export."""
    tmp = tmp_path_factory.mktemp("precision")
    root = write_tiny_dataset(str(tmp / "data"), n_train=4, n_val=3)
    loaders = {f"{s}_dataloader": dict(dataset=dict(data_root=root)) for s in ("train", "val")}
    config = tiny_config(str(tmp / "cfg.py"), **loaders)
    ckpt = tiny_checkpoint(str(tmp / "m.pth"))
    model = init_model(config, ckpt, "cpu")
    fp32 = str(tmp / "fp32.onnx")
    export_onnx(model, fp32, (32, 32))
    return dict(config=config, ckpt=ckpt, model=model, fp32=fp32, tmp=tmp, root=root)


def test_fp16_and_int8_are_compared_with_fp32_on_the_val_split(setup):
    """int8 calibrates on the train split (through the val pipeline), leaves the Hamburger in float;
    the comparison is over every val pixel; the files carry the metadata and their precision."""
    import onnx

    val, calibration = gate_datasets(setup["model"].cfg, "int8")
    assert (len(val), len(calibration), gate_datasets(setup["model"].cfg, "fp16")[1]) == (
        3,
        4,
        None,
    )
    batches = samples(setup["model"], val)
    assert [x.shape for x, _ in batches] == [(1, 3, 32, 32)] * 3  # the pipeline's 32x32
    assert [tuple(gt.shape) for _, gt in batches] == [(33, 37), (35, 37), (37, 37)]
    same = compare(setup["fp32"], setup["fp32"], batches, 3)
    assert same["agreement"] == same["worst"] == 1 and same["miou"] == same["miou_fp32"]
    for precision in ("fp16", "int8"):
        out = str(setup["tmp"] / f"{precision}.onnx")
        convert(setup["fp32"], out, precision, [x for x, _ in samples(setup["model"], calibration)])
        graph = onnx.load(out)
        meta = {p.key: p.value for p in graph.metadata_props}
        assert meta["precision"] == precision and json.loads(meta["hamseg"])["ham"]["type"] == "NMF"
        result = compare(setup["fp32"], out, batches, 3)
        assert 0.9 <= result["worst"] <= result["agreement"] <= 1
        assert result["miou_fp32"] == same["miou"]
        ops = {n.op_type for n in graph.graph.node}
        ham = [n.op_type for n in graph.graph.node if "/hamburger/ham/" in n.name]
        if precision == "fp16":
            assert "Cast" in ops and result["agreement"] >= 0.999
        else:
            block = [n.op_type for n in graph.graph.node if "/hamburger/" in n.name]
            assert "QLinearConv" in ops and "MatMul" in ham and "Conv" in block
            assert not [op for op in block if op.startswith("QLinear") or "Integer" in op]
            convs = [n.name for n in graph.graph.node if n.op_type == "Conv"]
            assert all("/hamburger/" in name for name in convs)  # the rest is int8


def test_a_graph_outside_the_bounds_is_removed_and_one_inside_kept(setup, monkeypatch, capsys):
    out = setup["tmp"] / "q.onnx"
    args = [setup["config"], setup["ckpt"], "--out", str(out), "--shape", "32", "32"]
    export = lambda *more: tool(EXPORT, *args, *more, monkeypatch=monkeypatch, capsys=capsys)  # noqa: E731
    bounds = ["--min-agreement", "1.01", "--min-worst-agreement", "1.5", "--max-miou-drop", "-1"]
    error = one_line_error(export("--quantize", "int8", *bounds))
    assert re.match(rf"error: {out}: int8: argmax agreement with fp32 \S+% \(worst image", error)
    named = "agreement below --min-agreement 1.01, worst image below --min-worst-agreement 1.5"
    assert f"{named}, mIoU drop " in error
    assert "above --max-miou-drop -1; the file was removed" in error
    assert not out.exists()
    proc = export("--precision", "fp16", "--val-images", "2", "--static")
    assert proc.returncode == 0, proc.stderr[-2000:]
    val = gate_datasets(setup["model"].cfg, "fp16")[0]
    static = samples(setup["model"], val, 2, (32, 32))
    fp32 = str(setup["tmp"] / "static.onnx")
    export_onnx(setup["model"], fp32, (32, 32), dynamic=False)
    r = compare(fp32, str(out), static, 3)  # the numbers of the file written
    assert (
        f"fp16: argmax agreement with fp32 {100 * r['agreement']:.2f}% (worst image " in proc.stdout
    )
    assert f"val mIoU {r['miou']:.2f} (fp32 {r['miou_fp32']:.2f}, drop " in proc.stdout
    assert "--bake-preprocess" in one_line_error(export("--quantize", "int8", "--bake-preprocess"))


def test_an_int8_graph_on_a_cpu_without_vnni_gets_a_hint_from_the_runner(setup):
    out = str(setup["tmp"] / "hint.onnx")
    val, calibration = gate_datasets(setup["model"].cfg, "int8")
    convert(setup["fp32"], out, "int8", [x for x, _ in samples(setup["model"], calibration)])
    images = osp.join(setup["root"], "img_dir", "val")
    proc = run(RUNNER, out, images, "--out-dir", str(setup["tmp"] / "hint"))
    assert proc.returncode == 0 and "wrote 3 label map(s)" in proc.stdout, proc.stderr[-2000:]
    flags = open("/proc/cpuinfo").read().split() if osp.isfile("/proc/cpuinfo") else ["avx_vnni"]
    vnni = bool({"avx512_vnni", "avx_vnni", "amx_int8"} & set(flags))
    assert ("without VNNI/AMX" in proc.stderr) != vnni


def voc_like(root: str, splits: tuple[str, ...] = ()) -> str:
    """A VOC layout with one image, and the list files of ``splits``."""
    os.makedirs(osp.join(root, "ImageSets", "Segmentation"))
    for folder, name in (("JPEGImages", "a.jpg"), ("SegmentationClass", "a.png")):
        os.makedirs(osp.join(root, folder))
        cv2.imwrite(osp.join(root, folder, name), np.zeros((9, 9), np.uint8))
    for split in splits:
        with open(osp.join(root, "ImageSets", "Segmentation", f"{split}.txt"), "w") as f:
            f.write("a\n")
    return root


def test_a_missing_or_empty_split_is_one_line_before_the_export(tmp_path, monkeypatch, capsys):
    """Issue 51 (2): configs/ham_voc.py without its ann_file (mmseg asserts "Failed to load
    ann_file"; int8 needs train's too), a missing data folder and an empty split: one line, exit
    2, in seconds, before the model is built (the checkpoint is not even read: an empty file)."""
    ckpt = tmp_path / "never_read.pth"
    ckpt.write_bytes(b"")
    out = str(tmp_path / "m.onnx")
    empty = str(tmp_path / "empty")
    for split in ("train", "val"):
        os.makedirs(osp.join(empty, "img_dir", split))
        os.makedirs(osp.join(empty, "ann_dir", split))
    voc = "configs/ham_voc.py"
    cases = [
        (voc, voc_like(str(tmp_path / "voc")), "int8", "val split, which is not there (Failed"),
        (voc, voc_like(str(tmp_path / "val"), ("val",)), "int8", "train split, which is not"),
        (TINY, str(tmp_path / "nowhere"), "fp16", "val split, which is not there"),
        (TINY, empty, "int8", "val split, which has no images"),
        (voc, voc_like(str(tmp_path / "ok"), ("val", "train")), "int8", None),
    ]
    for config, root, precision, said in cases:
        flag = ["--quantize", "int8"] if precision == "int8" else ["--precision", "fp16"]
        args = [config, str(ckpt), "--out", out, *flag, "--cfg-options", f"data_root={root}"]
        start = time.perf_counter()
        code, stdout, stderr = run_tool_here(EXPORT, args, monkeypatch, capsys)
        error = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
        if said is None:  # the data is there: the empty checkpoint fails
            assert code != 0 and " split" not in stderr
            continue
        assert code == 2 and len(error) == 1 and said in error[0], stderr[-2000:]
        assert "data_root=PATH" in error[0] and time.perf_counter() - start < 60
        assert not osp.exists(out)


@pytest.mark.slow
def test_int8_of_the_readme_demo_checkpoint(trained_demo, tmp_path):
    """Issue 51 (3): the checkpoint `python tools/run_demo.py` writes, int8 at the default
    gates."""
    ckpt, data = trained_demo
    config = osp.join(REPO, "configs", "demo", "hamhead-nmf_r18-d8_context-shapes.py")
    out = str(tmp_path / "int8.onnx")
    args = [EXPORT, config, ckpt, "--out", out, "--shape", "128", "128", "--quantize", "int8"]
    proc = run(*args, "--cfg-options", f"data_root={data}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = re.search(
        r"^int8: argmax agreement with fp32 (\S+)% \(worst image (\S+)%\), val mIoU "
        r"\S+ \(fp32 \S+, drop (\S+)\)$",
        proc.stdout,
        re.M,
    )
    agreement, worst, drop = map(float, line.groups())
    assert agreement >= 99 and worst >= 95 and drop <= 0.5 and osp.exists(out)
