"""fp16 / int8 graphs (tools/deploy/precision.py, export_onnx.py --precision/--quantize)."""

from __future__ import annotations

import json
import os
import os.path as osp
import re

import numpy as np
import pytest

from hamseg.apis import init_model
from hamseg.apis.export import export_onnx
from hamseg.datasets.context_shapes import ContextShapesConfig, generate_context_shapes
from tests.apis.test_export import EXPORT, NMF
from tests.helpers import make_checkpoint, one_thread  # noqa: F401  (fixture)
from tests.tools.test_finetune_path import one_line_error, run
from tools.deploy.precision import compare, convert, miou, predictions, val_batches

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory, one_thread) -> dict:  # noqa: F811
    """A 48x48 Context Shapes (1 train, 3 val images), a config reading it, a checkpoint and
    its fp32 export."""
    tmp = tmp_path_factory.mktemp("precision")
    root = str(tmp / "data")
    generate_context_shapes(root, ContextShapesConfig(size=48, num_train=1, num_val=3), False)
    config = tmp / "cfg.py"
    config.write_text(
        f"_base_ = [{NMF!r}]\ndata_root = {root!r}\n"
        "train_dataloader = dict(dataset=dict(data_root=data_root))\n"
        "val_dataloader = dict(dataset=dict(data_root=data_root))\n"
    )
    ckpt = make_checkpoint(str(tmp / "m.pth"))
    model = init_model(str(config), ckpt, "cpu")
    fp32 = str(tmp / "fp32.onnx")
    export_onnx(model, fp32, (48, 48), dynamic=True)
    return dict(config=str(config), ckpt=ckpt, model=model, fp32=fp32, tmp=tmp)


def test_miou_of_a_confusion_matrix():
    confusion = np.array([[3, 1, 0], [0, 2, 0], [0, 0, 0]])  # class 2 absent: not counted
    assert miou(confusion) == pytest.approx(100 * (3 / 4 + 2 / 3) / 2)


def test_miou_counts_classes_as_mmseg_iou_metric_does():
    """Class 4 absent from labels and predictions (left out), class 3 only predicted (IoU 0)."""
    import torch
    from mmseg.evaluation.metrics import IoUMetric

    rng = np.random.default_rng(3)
    label = rng.integers(0, 3, (13, 11))
    label[0, :4] = 255  # ignored
    pred = np.where(rng.random((13, 11)) < 0.3, rng.integers(0, 4, (13, 11)), label)
    keep = label != 255
    confusion = np.zeros((5, 5), np.int64)
    np.add.at(confusion, (label[keep], pred[keep]), 1)
    areas = IoUMetric.intersect_and_union(torch.from_numpy(pred), torch.from_numpy(label), 5, 255)
    iou = IoUMetric.total_area_to_metrics(*areas, ["mIoU"])["IoU"]
    assert np.isnan(iou[4]) and iou[3] == 0
    assert miou(confusion) == pytest.approx(100 * np.nanmean(iou))


def test_each_precision_is_converted_and_compared_on_the_val_split(setup):
    import onnx

    batches = list(val_batches(setup["model"]))
    assert len(batches) == 3 and batches[0][0].shape == (1, 3, 48, 48)
    assert batches[0][1].shape == (48, 48) and batches[0][1].max() < 7
    same = compare(setup["fp32"], setup["fp32"], "fp32", batches)
    assert same.agreement == same.worst == 1.0 and same.miou == same.miou_fp32
    reference = predictions(setup["fp32"], batches)  # fp32 run once, reused
    ops = {}
    for precision in ("fp16", "int8", "int8-dynamic"):
        out = str(setup["tmp"] / f"{precision}.onnx")
        convert(setup["fp32"], out, precision, [x for x, _ in batches])
        model = onnx.load(out)
        ops[precision] = {n.op_type for n in model.graph.node}
        meta = {p.key: p.value for p in model.metadata_props}
        assert meta["precision"] == precision and json.loads(meta["hamseg"])["ham"]["type"] == "NMF"
        result = compare(setup["fp32"], out, precision, batches)
        assert compare(reference, out, precision, batches) == result
        assert 0.5 < result.agreement <= 1 and result.worst <= result.agreement
        assert result.miou_fp32 == same.miou and result.line().startswith(f"{precision}: argmax")
    assert "Cast" in ops["fp16"] and "ConvInteger" in ops["int8-dynamic"]
    assert "QuantizeLinear" in ops["int8"] and "DynamicQuantizeLinear" in ops["int8-dynamic"]


def test_a_graph_below_min_agreement_is_refused_and_removed(setup):
    out = setup["tmp"] / "q.onnx"
    args = [EXPORT, setup["config"], setup["ckpt"], "--out", str(out), "--shape", "48", "48"]
    error = one_line_error(run(*args, "--quantize", "int8", "--min-agreement", "1.01"))
    assert error.startswith(f"error: {out}: int8: argmax agreement with fp32 ")
    assert ": agreement below --min-agreement 1.01" in error  # (and any other bound missed)
    assert error.endswith(
        "; the file was removed (use another --precision, or loosen the bound to keep it)"
    )
    assert not out.exists()
    proc = run(*args, "--precision", "fp16", "--min-agreement", "0.5", "--val-images", "2")
    assert proc.returncode == 0 and osp.exists(out), proc.stderr[-2000:]
    assert re.search(r"^fp16: argmax agreement with fp32 \S+% \(worst image", proc.stdout, re.M)


@pytest.fixture(scope="module")
def labelled_by_fp32(setup) -> str:
    """A config whose val labels are the fp32 graph's own predictions: fp32 val mIoU 100, so
    every pixel another graph changes costs mIoU."""
    import shutil

    import cv2

    root = str(setup["tmp"] / "data_fp32")
    shutil.copytree(str(setup["tmp"] / "data"), root)
    model = init_model(setup["config"], setup["ckpt"], "cpu")
    preds = predictions(setup["fp32"], list(val_batches(model)))
    anns = sorted(os.listdir(osp.join(root, "ann_dir", "val")))
    for name, pred in zip(anns, preds):
        cv2.imwrite(osp.join(root, "ann_dir", "val", name), pred.astype(np.uint8))
    config = setup["tmp"] / "fp32_labels.py"
    config.write_text(
        f"_base_ = [{setup['config']!r}]\nval_dataloader = dict(dataset=dict(data_root={root!r}))\n"
    )
    return str(config)


def test_an_int8_graph_that_loses_more_than_half_a_point_of_miou_is_removed(
    setup, labelled_by_fp32
):
    """Issue 39 (3): agreement bounds off (0), the mIoU gate alone refuses the int8 file; with
    a looser bound the file is kept and its printed numbers are those of the file written."""
    out = setup["tmp"] / "loses.onnx"
    args = [EXPORT, labelled_by_fp32, setup["ckpt"], "--out", str(out), "--shape", "48", "48"]
    args += ["--dynamic"]  # as the fixture's fp32 graph
    args += ["--quantize", "int8", "--min-agreement", "0", "--min-worst-agreement", "0"]
    error = one_line_error(run(*args))
    line = re.search(r"val mIoU (\S+) \(fp32 (\S+), drop (\S+)\)", error)
    miou_int8, miou_fp32, drop = map(float, line.groups())
    assert miou_fp32 == 100 and drop == pytest.approx(100 - miou_int8, abs=0.011) and drop > 0.5
    assert error.endswith(
        f"mIoU drop {drop:.2f} above --max-miou-drop 0.5; the file was "
        "removed (use another --precision, or loosen the bound to keep it)"
    )
    assert not out.exists()
    kept = run(*args, "--max-miou-drop", "100")
    assert kept.returncode == 0, kept.stderr[-2000:]
    model = init_model(labelled_by_fp32, setup["ckpt"], "cpu")
    written = compare(setup["fp32"], str(out), "int8", list(val_batches(model)))
    assert f"{written.line()}\n" in kept.stdout  # the check ran on the file written


def test_the_int8_recipe_quantizes_outside_the_ham_only(setup):
    """The default recipe: every convolution outside the ham in int8 (QOperator, uint8
    activations), the ham's products in float; a depthwise limit keeps larger kernels float."""
    import onnx

    from tools.deploy.int8 import HAM_SCOPE, Recipe, float_nodes

    out = str(setup["tmp"] / "recipe.onnx")
    calibration = [x for x, _ in val_batches(setup["model"])]
    convert(setup["fp32"], out, "int8", calibration)
    nodes = onnx.load(out).graph.node
    ham = [n for n in nodes if HAM_SCOPE in n.name]
    assert ham and not [n for n in ham if "Integer" in n.op_type or n.op_type.startswith("QLinear")]
    assert {"MatMul", "Div"} <= {n.op_type for n in ham}
    fp32_convs = [n for n in onnx.load(setup["fp32"]).graph.node if n.op_type == "Conv"]
    int8_convs = [n for n in nodes if n.op_type == "QLinearConv"]
    assert len(int8_convs) == len(fp32_convs) and not [n for n in nodes if n.op_type == "Conv"]
    depthwise = onnx.helper.make_graph(
        [onnx.helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=4)],
        "g",
        [],
        [],
        [onnx.numpy_helper.from_array(np.zeros((4, 1, 5, 5), np.float32), "w")],
    )
    model = onnx.helper.make_model(depthwise)
    assert float_nodes(model, Recipe(depthwise=9)) == ["dw"]
    assert float_nodes(model, Recipe(depthwise=25)) == float_nodes(model, Recipe()) == []


def test_gelu_is_fused_into_one_operator_with_the_same_values(tmp_path):
    import onnxruntime as ort
    import torch

    from tools.deploy.int8 import fuse_gelu

    path = str(tmp_path / "gelu.onnx")
    torch.onnx.export(
        torch.nn.Sequential(torch.nn.Conv2d(3, 5, 1), torch.nn.GELU()),
        (torch.randn(1, 3, 4, 6),),
        path,
        dynamo=False,
        opset_version=17,  # erf-GELU (opset 20 has a Gelu operator)
        input_names=["input"],
    )
    x = np.random.default_rng(0).normal(size=(1, 3, 4, 6)).astype(np.float32)
    before = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})
    assert fuse_gelu(path) == 1
    import onnx

    assert [n.op_type for n in onnx.load(path).graph.node] == ["Conv", "Gelu"]
    after = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})
    np.testing.assert_allclose(after[0], before[0], rtol=1e-5, atol=1e-6)
