"""ONNX export (tools/deploy/export_onnx.py, hamseg.apis.export) checked by ONNX Runtime."""

from __future__ import annotations

import os.path as osp
import re
import subprocess
import warnings

import numpy as np
import pytest
import torch

import hamseg
from hamseg.apis import export as export_api
from hamseg.apis import init_model
from hamseg.apis.export import (
    ExportError,
    export_onnx,
    random_operators,
    seed_hams,
    verify_onnx,
)
from tests.conftest import REPO
from tests.helpers import (
    DEMO_FCN,
    make_checkpoint,
    one_thread,  # noqa: F401  (fixture)
    run_tool_here,
)
from tests.tools.test_finetune_path import one_line_error, run

pytestmark = pytest.mark.usefixtures("one_thread")

DEMO = osp.join(REPO, "configs", "demo")
NMF = osp.join(DEMO, "hamhead-nmf_r18-d8_context-shapes.py")
VQ = osp.join(DEMO, "hamhead-vq_r18-d8_context-shapes.py")
CD = osp.join(DEMO, "hamhead-cd_r18-d8_context-shapes.py")
LIGHTHAM = osp.join(DEMO, "lighthamhead_mscan-t_context-shapes.py")
EXPORT = "tools/deploy/export_onnx.py"


@pytest.mark.slow
@pytest.mark.parametrize("config", [NMF, VQ, CD], ids=["nmf", "vq", "cd"])
def test_exported_logits_equal_pytorch_seeded_at_two_sizes(tmp_path, config):
    ckpt = make_checkpoint(str(tmp_path / "m.pth"), config)
    out = str(tmp_path / "m.onnx")
    args = [EXPORT, config, ckpt, "--out", out, "--shape", "97", "129", "--dynamic", "--verify"]
    proc = run(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = re.findall(
        r"^(\d+x3x\d+x\d+): max \|diff\| (\S+), relative (\S+), argmax .* (\S+)%", proc.stdout, re.M
    )
    assert [s for s, *_ in lines] == ["1x3x97x129", "2x3x129x113"]
    for _, _, rel, agree in lines:
        assert float(rel) < 1e-4 and float(agree) >= 99.9


def test_the_graph_is_the_seeded_model_and_is_deterministic(tmp_path):
    import onnxruntime as ort

    model = init_model(NMF, make_checkpoint(str(tmp_path / "m.pth")), "cpu")
    path = str(tmp_path / "m.onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exported = export_onnx(model, path, (65, 65), dynamic=True, seed=3)
    traced = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    assert not traced, [str(w.message) for w in traced]  # the seeded dictionary: a constant
    assert model.decode_head.hamburger.ham.eval_seed == 3
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = torch.rand(1, 3, 81, 65)
    a = session.run(None, {"input": x.numpy()})[0]
    b = session.run(None, {"input": x.numpy()})[0]
    assert np.array_equal(a, b) and random_operators(path) == {}  # no random operator
    with torch.no_grad():
        ref = exported(x).numpy()
    assert np.abs(a - ref).max() / np.abs(ref).max() < 1e-4
    (check,) = verify_onnx(exported, path, [(1, 3, 65, 65)])
    assert check.ok and check.argmax_agreement >= 0.999


def test_cd_exports_its_ridge_solve_as_an_inverse_equal_to_pytorch(tmp_path):
    """CD's solve has no ONNX operator: the graph inverts the r x r ridge matrix by elimination
    (hamseg.models.ridge_solve) and matches the eager LU solve. Building that matrix with an
    in-place write into its diagonal gave relative 73 here: the exporter loses such writes."""
    import onnx

    model = init_model(CD, make_checkpoint(str(tmp_path / "cd.pth"), CD), "cpu")
    path = str(tmp_path / "cd.onnx")
    exported = export_onnx(model, path, (65, 65), dynamic=True)
    ops = {node.op_type for node in onnx.load(path).graph.node}
    assert {"MatMul", "Div", "Sub", "Slice"} <= ops and random_operators(path) == {}
    checks = verify_onnx(exported, path, [(1, 3, 65, 65), (2, 3, 81, 71)])
    assert all(c.ok and c.max_rel < 1e-4 and c.argmax_agreement >= 0.999 for c in checks)


@pytest.fixture(scope="module")
def lightham_checkpoint(tmp_path_factory):
    """A random-init checkpoint of the demo's mmseg LightHamHead (SegNeXt-T) model."""
    return make_checkpoint(str(tmp_path_factory.mktemp("lightham") / "l.pth"), LIGHTHAM)


def test_mmseg_lighthamhead_is_refused_before_export_naming_hamlighthead(
    tmp_path, lightham_checkpoint
):
    out = tmp_path / "l.onnx"
    proc = run(EXPORT, LIGHTHAM, lightham_checkpoint, "--out", str(out), "--shape", "64", "64")
    error = one_line_error(proc)  # exit 2, one line, no traceback
    assert error.startswith("error: decode_head is mmseg's LightHamHead: its NMF2D ")
    assert "(decode_head.hamburger.ham) draws a new random dictionary at every forward" in error
    assert "type='HamLightHead'" in error and "checkpoints load strictly" in error
    assert not out.exists() and "wrote" not in proc.stdout


def test_a_graph_with_a_random_operator_is_refused_and_removed(
    tmp_path, monkeypatch, lightham_checkpoint
):
    """Without the check by head (seed_hams), mmseg's NMF2D exports a RandomUniformLike: the
    graph check refuses it whatever the model."""
    model = init_model(LIGHTHAM, lightham_checkpoint, "cpu")
    monkeypatch.setattr(export_api, "seed_hams", lambda model, seed: [])
    out = tmp_path / "l.onnx"
    with pytest.raises(ExportError) as err:
        export_onnx(model, str(out), (64, 64))
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{out}: the exported graph draws random")
    assert "RandomUniformLike (at /hamburger/ham/RandomUniformLike)" in message
    assert "the file was removed" in message and not out.exists()


def test_random_operators_are_found_in_subgraphs(tmp_path):
    from onnx import TensorProto, helper, save

    shape = [2, 3]
    noise = helper.make_node("RandomNormalLike", ["x"], ["n"], name="inner_noise")
    branch = helper.make_graph(
        [noise], "then", [], [helper.make_tensor_value_info("n", TensorProto.FLOAT, shape)]
    )
    same = helper.make_node("Identity", ["x"], ["y"])
    other = helper.make_graph(
        [same], "else", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    )
    nodes = [
        helper.make_node("If", ["c"], ["out"], then_branch=branch, else_branch=other),
        helper.make_node("Bernoulli", ["x"], ["b"], name="outer"),
        helper.make_node("Relu", ["x"], ["r"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)],
    )
    path = str(tmp_path / "g.onnx")
    save(helper.make_model(graph), path)
    assert random_operators(path) == {"Bernoulli": "outer", "RandomNormalLike": "inner_noise"}


def test_verify_failure_prints_the_numbers_removes_the_file_and_exits_1(tmp_path):
    """The graph exported with seed 0 against PyTorch evaluating seed 1: a real mismatch,
    caught by the default verification; nothing is left on disk."""
    ckpt = make_checkpoint(str(tmp_path / "m.pth"))
    reseed = (
        "import sys, runpy; import hamseg.apis.export as ex; export = ex.export_onnx\n"
        "def export_then_reseed(model, out, *args, **kw):\n"
        "    exported = export(model, out, *args, **kw)\n"
        "    ex.seed_hams(exported, 1)  # PyTorch now evaluates another dictionary\n"
        "    return exported\n"
        "ex.export_onnx = export_then_reseed; sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    out = str(tmp_path / "m.onnx")
    proc = run("-c", reseed, EXPORT, NMF, ckpt, "--out", out, "--shape", "65", "65")
    assert proc.returncode == 1, proc.stderr[-2000:]
    (line,) = re.findall(r"^1x3x65x65: .*$", proc.stdout, re.M)
    numbers = re.fullmatch(
        r"1x3x65x65: max \|diff\| (\S+), relative (\S+), argmax agreement (\S+)% "
        r"-> FAILED \(> 0\.0001\)",
        line,
    )
    assert numbers, line
    max_abs, rel, agree = map(float, numbers.groups())
    (error,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert error.startswith(f"error: {out}: ONNX Runtime's logits differ from PyTorch's by ")
    assert "the file was removed" in error and not osp.exists(out)
    assert "wrote" not in proc.stdout
    # the same comparison in this process: the printed numbers are the real ones
    model = init_model(NMF, ckpt, "cpu")
    exported = export_onnx(model, str(tmp_path / "again.onnx"), (65, 65), seed=0)
    seed_hams(exported, 1)
    (check,) = verify_onnx(exported, str(tmp_path / "again.onnx"), [(1, 3, 65, 65)])
    assert not check.ok and rel > 1e-4
    assert max_abs == pytest.approx(check.max_abs, rel=1e-2)
    assert rel == pytest.approx(check.max_rel, rel=1e-2)
    assert agree == pytest.approx(100 * check.argmax_agreement, abs=1e-3)


def test_export_verifies_by_default_and_no_verify_skips_it(tmp_path):
    """Every export is compared with PyTorch unless --no-verify; no TracerWarning is printed
    for the shape checks that are constants of the trace."""
    ckpt = make_checkpoint(str(tmp_path / "m.pth"))
    out = str(tmp_path / "m.onnx")
    proc = run(EXPORT, NMF, ckpt, "--out", out, "--shape", "33", "47", "--dynamic")
    assert proc.returncode == 0, proc.stderr[-2000:]
    checks = re.findall(
        r"^(\S+): max .* relative (\S+), argmax agreement (\S+)% -> ok$", proc.stdout, re.M
    )
    assert [c[0] for c in checks] == ["1x3x33x47", "2x3x65x63"]
    assert all(float(rel) < 1e-4 and float(agree) == 100 for _, rel, agree in checks)
    assert "TracerWarning" not in proc.stderr and osp.exists(out)
    skipped = run(EXPORT, NMF, ckpt, "--out", out, "--shape", "33", "47", "--no-verify")
    assert skipped.returncode == 0 and "max |diff|" not in skipped.stdout
    assert skipped.stdout.strip().splitlines()[-1].startswith(f"wrote {out} ")


def test_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    ckpt = make_checkpoint(str(tmp_path / "m.pth"))
    out = str(tmp_path / "m.onnx")
    cases = [
        ([EXPORT, NMF, str(tmp_path / "missing.pth"), "--out", out], "checkpoint file not found"),
        ([EXPORT, "configs/nope.py", ckpt, "--out", out], "config file not found: configs/nope.py"),
        ([EXPORT, NMF, ckpt, "--out", out, "--shape", "0", "64"], "--shape 0 64: H and W must"),
        ([EXPORT, NMF, ckpt, "--out", out, "--shape", "-5", "64"], "--shape -5 64: H and W must"),
        (
            [EXPORT, NMF, ckpt, "--out", out, "--opset", "99"],
            "--opset 99: torch 2.14.1's ONNX exporter supports opsets 7 to 23",
        ),
        (  # in the exporter's range, but no Resize below 11 computes mmseg's (68% agreement)
            [EXPORT, NMF, ckpt, "--out", out, "--shape", "64", "64", "--opset", "10"],
            "--opset 10: ONNX cannot express mmseg's bilinear resize (half-pixel centres) below "
            "opset 11, so the graph would compute something else; use 11 to 23",
        ),
    ]
    for args, message in cases:
        code, stdout, stderr = run_tool_here(args[0], args[1:], monkeypatch, capsys)
        error = one_line_error(subprocess.CompletedProcess(args, code, stdout, stderr))
        if "torch 2.14.1" in message:  # the range is torch's own
            low, high = export_api.opset_range()
            version = torch.__version__.split("+")[0]
            message = message.replace("torch 2.14.1", f"torch {version}").replace(
                "7 to 23", f"{low} to {high}"
            )
        assert message.replace("to 23", f"to {export_api.opset_range()[1]}") in error, error
        assert not osp.exists(out)


def test_an_operator_the_exporter_cannot_record_or_match_is_one_line(tmp_path, capfd):
    """Below MIN_OPSET (lowered here) torch cannot record the bilinear resize at opset 7 (one
    line, no TorchScript IR dump), and at opset 10 writes one it says may not match PyTorch:
    refused, the file removed."""
    model = init_model(NMF, make_checkpoint(str(tmp_path / "m.pth")), "cpu")
    out = tmp_path / "m.onnx"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(export_api, "MIN_OPSET", 7)
        with pytest.raises(ExportError) as missing:
            export_onnx(model, str(out), (64, 64), opset=7)
        with pytest.raises(ExportError) as mismatch:
            export_onnx(model, str(out), (64, 64), opset=10)
    assert str(missing.value).startswith("--opset 7: the ONNX exporter cannot record this model")
    assert "upsample_bilinear2d" in str(missing.value)
    assert str(mismatch.value).startswith(
        "--opset 10: torch's exporter says the graph may not compute what PyTorch does ("
    )
    assert "the file was removed" in str(mismatch.value) and not out.exists()
    printed = capfd.readouterr()
    assert "Torch IR graph" not in printed.err + printed.out


def test_a_tracer_warning_of_a_data_dependent_branch_is_still_printed(tmp_path):
    """Only the listed shape checks are silenced: a branch on a tensor's values warns."""
    model = init_model(NMF, make_checkpoint(str(tmp_path / "m.pth")), "cpu")
    forward = model.decode_head.forward

    def forward_with_a_branch(inputs):
        logits = forward(inputs)
        return logits if bool(logits.mean() > -1e9) else -logits  # decided while tracing

    model.decode_head.forward = forward_with_a_branch
    with pytest.warns(torch.jit.TracerWarning, match="Python boolean") as caught:
        export_onnx(model, str(tmp_path / "m.onnx"), (33, 33), dynamic=True)
    (branch,) = [w for w in caught if w.category is torch.jit.TracerWarning]
    assert branch.filename == __file__


def test_a_checkpoint_of_another_ham_is_refused_unless_allowed(tmp_path):
    """Issue 28 (6): an NMF-trained checkpoint with the CD config loads strictly (same
    parameters) but computes something else: refused in one line, exported with the flag."""
    ckpt = make_checkpoint(str(tmp_path / "nmf.pth"), NMF)
    out = str(tmp_path / "cd.onnx")
    error = one_line_error(run(EXPORT, CD, ckpt, "--out", out, "--shape", "33", "33"))
    assert error == (
        f"error: {ckpt} was trained with decode_head ham type='NMF' (its stored config's "
        "ham_cfg) but the config has ham type='CD': export with the config it was trained "
        "with, or pass --allow-config-mismatch to export anyway"
    )
    assert not osp.exists(out)
    proc = run(EXPORT, CD, ckpt, "--out", out, "--shape", "33", "33", "--allow-config-mismatch")
    assert proc.returncode == 0 and osp.exists(out), proc.stderr[-2000:]


SEGNEXT = osp.join(DEMO, "hamlighthead-nmf_mscan-t_context-shapes.py")


def test_an_mmseg_trained_checkpoint_is_checked_by_its_ham_kwargs(tmp_path, lightham_checkpoint):
    """Issue 39 (2): a SegNeXt-T trained with mmseg's LightHamHead records ham_kwargs (MD_R,
    no type), not ham_cfg: with a VQ or CD config (--cfg-options) it is refused; with the
    one-word switch to HamLightHead it exports, and the graph records the ham as built."""
    import json

    import onnx

    out = str(tmp_path / "s.onnx")
    args = [EXPORT, SEGNEXT, lightham_checkpoint, "--out", out, "--shape", "64", "64"]
    for ham in ("VQ", "CD"):
        error = one_line_error(run(*args, "--cfg-options", f"model.decode_head.ham_cfg.type={ham}"))
        assert error == (
            f"error: {lightham_checkpoint} was trained with decode_head ham type='NMF' (its "
            f"stored config's ham_kwargs) but the config has ham type='{ham}': export with the "
            "config it was trained with, or pass --allow-config-mismatch to export anyway"
        )
        assert not osp.exists(out)
    rank = run(*args, "--cfg-options", "model.decode_head.ham_cfg.R=8")
    assert "ham R=16 (its stored config's ham_kwargs) but the config has ham R=8" in (
        one_line_error(rank)
    )
    proc = run(*args, "--no-verify", "--cfg-options", "model.decode_head.ham_cfg.eval_draws=4")
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(onnx.load(out).metadata_props[0].value)
    assert info["head"] == "HamLightHead"
    assert {k: info["ham"][k] for k in ("type", "S", "R", "eval_steps", "eval_draws")} == dict(
        type="NMF", S=1, R=16, eval_steps=7, eval_draws=4
    )


def test_a_checkpoint_of_another_architecture_says_so_first(tmp_path):
    """Issue 28 (7): SegNeXt-T weights with the ResNet demo config open with 'another
    architecture', not with num_classes advice about a classifier that happens to match."""
    config = osp.join(DEMO, "hamlighthead-nmf_mscan-t_context-shapes.py")
    ckpt = make_checkpoint(str(tmp_path / "segnext.pth"), config)
    error = one_line_error(run(EXPORT, NMF, ckpt, "--out", str(tmp_path / "m.onnx")))
    assert error.startswith(f"error: checkpoint '{ckpt}' is of another architecture: ")
    assert re.search(r"and \d+ of its tensors are not in the model \(backbone\.patch_embed", error)
    assert "num_classes" not in error and error.endswith("; pass its config")


def test_dynamic_export_has_a_static_class_dimension_and_the_runner_metadata(nmf_onnx):
    """Issue 28 (5, 2): logits (batch, 7, height, width); metadata_props 'hamseg' holds what a
    runner needs, read from the config and the checkpoint."""
    import json

    import onnx

    model = onnx.load(nmf_onnx["onnx"])
    dims = model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value or d.dim_param for d in dims] == ["batch", 7, "height", "width"]
    (prop,) = model.metadata_props
    info = json.loads(prop.value)
    assert prop.key == "hamseg" and info["input"] == "normalised" and info["bgr_to_rgb"]
    assert info["mean"] == [123.675, 116.28, 103.53] and info["std"] == [58.395, 57.12, 57.375]
    assert info["classes"][:2] == ["background", "red team"] and len(info["palette"]) == 7
    assert info["head"] == "HamHead" and info["ham"] == dict(
        type="NMF",
        inv_t=1.0,
        coef_init="softmax",
        S=1,
        D=128,
        R=16,
        train_steps=6,
        eval_steps=6,
        eta=0.9,
        spatial=True,
        init="random",
        grad="one_step",
        eval_seed=0,
        eval_draws=12,
    )
    assert info["resize"] is None and info["pad"] == dict(size=None, size_divisor=None)
    assert info["hamseg_version"] == hamseg.__version__


def test_bake_preprocess_puts_the_normalisation_in_the_graph(tmp_path, nmf_onnx):
    import onnxruntime as ort

    model = init_model(NMF, nmf_onnx["ckpt"], "cpu")
    path = str(tmp_path / "baked.onnx")
    export_onnx(model, path, (40, 56), dynamic=True, bake=True)
    bgr = np.random.default_rng(1).integers(0, 256, (1, 3, 41, 57)).astype(np.float32)
    mean, std = np.array([123.675, 116.28, 103.53]), np.array([58.395, 57.12, 57.375])
    normalised = ((bgr[:, ::-1] - mean[:, None, None]) / std[:, None, None]).astype(np.float32)
    sessions = [
        ort.InferenceSession(f, providers=["CPUExecutionProvider"])
        for f in (path, nmf_onnx["onnx"])
    ]
    baked = sessions[0].run(None, {"input": bgr})[0]
    plain = sessions[1].run(None, {"input": normalised})[0]
    assert np.abs(baked - plain).max() < 1e-4 and baked.shape == (1, 7, 41, 57)
    meta = sessions[0].get_modelmeta().custom_metadata_map["hamseg"]
    assert '"input": "bgr 0-255"' in meta
    error = one_line_error(
        run(
            "tools/infer.py",
            nmf_onnx["images"],
            "--config",
            NMF,
            "--backend",
            "onnxruntime",
            "--model",
            path,
            "--out-dir",
            str(tmp_path / "o"),
        )
    )
    assert (
        error == f"error: {path} takes the raw image (exported with --bake-preprocess): run "
        "it with tools/deploy/onnx_runner.py, or export without --bake-preprocess for this backend"
    )


def test_without_onnxruntime_the_tool_names_the_extra(tmp_path):
    ckpt = make_checkpoint(str(tmp_path / "m.pth"))
    code = (
        "import sys, runpy; sys.modules['onnxruntime'] = None; sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    proc = run("-c", code, EXPORT, NMF, ckpt, "--out", str(tmp_path / "m.onnx"))
    assert proc.returncode == 2
    assert "error: onnxruntime not installed: pip install 'hamseg[deploy]'" in proc.stderr


def test_jit_trace_of_a_seeded_head_is_the_same_at_every_call(tmp_path):
    model = init_model(NMF, make_checkpoint(str(tmp_path / "m.pth")), "cpu")
    seed_hams(model, 0)
    from hamseg.apis.export import SegmentorLogits

    wrapped = SegmentorLogits(model).eval()
    x = torch.rand(1, 3, 65, 65)
    with torch.no_grad():
        traced = torch.jit.trace(wrapped, x, check_trace=False)  # no eager call before
        first, second = traced(x), traced(x)
        assert torch.equal(first, second)
        torch.testing.assert_close(first, wrapped(x), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def nmf_onnx(tmp_path_factory, one_thread) -> dict:  # noqa: F811
    """The demo NMF model (7 classes) exported once (dynamic, 64x64, seed 0), with its
    checkpoint and two images of other sizes."""
    import cv2

    tmp = tmp_path_factory.mktemp("nmf_onnx")
    ckpt = make_checkpoint(str(tmp / "m.pth"))
    onnx_file = str(tmp / "m.onnx")
    export_onnx(init_model(NMF, ckpt, "cpu"), onnx_file, (64, 64), dynamic=True, seed=0)
    images = tmp / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(57, 71), (64, 49)]):
        cv2.imwrite(str(images / f"{i}.png"), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
    return dict(ckpt=ckpt, onnx=onnx_file, images=str(images))


def test_infer_with_onnxruntime_writes_the_same_label_maps(tmp_path, nmf_onnx):
    """PyTorch, ONNX Runtime with the checkpoint, and ONNX Runtime with the config alone (no
    PyTorch weights: names, palette and pipeline from the config) give the same label maps."""
    import cv2

    ckpt, onnx_file, images = nmf_onnx["ckpt"], nmf_onnx["onnx"], nmf_onnx["images"]
    seeded = ["--config", NMF, "--save-label", "--no-progress"]
    ort = ["--backend", "onnxruntime", "--model", onnx_file]

    # the PyTorch side with the same eval_seed as the export (the demo config's is 0 too)
    def infer(out: str, *args: str):
        return run("tools/infer.py", images, "--out-dir", str(tmp_path / out), *seeded, *args)

    torch_run = infer("pt", "--checkpoint", ckpt)
    ort_run = infer("ort", "--checkpoint", ckpt, *ort)
    config_run = infer("cfg", *ort)  # no checkpoint: no PyTorch weights
    for proc in (torch_run, ort_run, config_run):
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert config_run.stdout.strip().splitlines()[-1] == f"wrote 2 overlay(s) to {tmp_path / 'cfg'}"
    for i in range(2):
        a, b, c = (
            cv2.imread(str(tmp_path / run_dir / f"{i}_label.png"), cv2.IMREAD_UNCHANGED)
            for run_dir in ("pt", "ort", "cfg")
        )
        assert a.shape == b.shape and (a == b).mean() >= 0.999
        assert np.array_equal(b, c)  # the same graph, pipeline and preprocessing
    missing = run("tools/infer.py", images, "--checkpoint", ckpt, "--backend", "onnxruntime")
    assert missing.returncode == 2 and "--backend onnxruntime needs --model" in missing.stderr


def test_infer_with_an_onnx_model_of_another_class_count_is_one_line_naming_both(
    tmp_path, nmf_onnx
):
    """A 3-class graph with the 7-class demo config, or with a 7-class checkpoint: one line
    naming both files, exit 2, nothing written (it used to write wrongly labelled overlays)."""
    three = make_checkpoint(str(tmp_path / "three.pth"), num_classes=3)
    onnx_file = str(tmp_path / "three.onnx")
    three_classes = init_model(None, three, "cpu")  # its stored 3-class config
    export_onnx(three_classes, onnx_file, (64, 64), seed=0)
    images, out = nmf_onnx["images"], tmp_path / "out"
    ort = ["--backend", "onnxruntime", "--model", onnx_file, "--out-dir", str(out)]
    for names_from in (["--config", NMF], ["--checkpoint", nmf_onnx["ckpt"]]):
        error = one_line_error(run("tools/infer.py", images, *names_from, *ort, "--no-progress"))
        kind, path = names_from[0][2:], names_from[1]
        assert error.startswith(
            f"error: {onnx_file} gives 3 classes but the {kind} {path} names 7 (background, "
            "red team, "
        ), error
        assert f"export the model of this {kind} (tools/deploy/export_onnx.py)" in error
        assert not out.exists()


def test_infer_refuses_a_graph_of_another_head_or_ham(tmp_path, nmf_onnx):
    """Issue 39 (2): the demo HamHead-NMF graph with the CD, VQ or FCN demo config (7 classes
    each, so the class count alone let them run) is refused naming what differs; and with
    --checkpoint, a checkpoint trained with another ham than the config."""
    from hamseg.apis.export import use_onnxruntime
    from hamseg.utils.errors import UsageError

    onnx_file = nmf_onnx["onnx"]
    fix = (
        "export the model of this config (tools/deploy/export_onnx.py), or pass the config "
        f"{onnx_file} was exported from"
    )
    cases = {
        CD: f"ham type='NMF' but the config {CD} has ham type='CD'",
        VQ: f"ham type='NMF' but the config {VQ} has ham type='VQ'",
        DEMO_FCN: f"HamHead but the config {DEMO_FCN} has FCNHead",
    }
    for config, said in cases.items():
        with pytest.raises(UsageError) as err:
            use_onnxruntime(
                init_model(config, device="cpu"), onnx_file, names_from=("config", config)
            )
        assert str(err.value) == f"{onnx_file} was exported from decode_head {said}: {fix}"
    use_onnxruntime(init_model(NMF, device="cpu"), onnx_file)  # its own config: accepted
    out = tmp_path / "out"
    ort = ["--backend", "onnxruntime", "--model", onnx_file, "--out-dir", str(out), "--no-progress"]
    error = one_line_error(run("tools/infer.py", nmf_onnx["images"], "--config", DEMO_FCN, *ort))
    assert error == f"error: {onnx_file} was exported from decode_head {cases[DEMO_FCN]}: {fix}"
    vq = make_checkpoint(str(tmp_path / "vq.pth"), VQ)  # VQ's weights load into NMF's model
    error = one_line_error(
        run("tools/infer.py", nmf_onnx["images"], "--config", NMF, "--checkpoint", vq, *ort)
    )
    assert error == (
        f"error: {vq} was trained with decode_head ham type='VQ' (its stored config's ham_cfg) "
        "but the config has ham type='NMF': pass the config it was trained with"
    )
    assert not out.exists()


def test_the_class_count_is_checked_at_the_first_run_when_the_graph_does_not_say_it(tmp_path):
    """A graph whose logits have a symbolic channel dimension: checked on the first output."""
    from onnx import TensorProto, helper, save

    from hamseg.apis.export import use_onnxruntime
    from hamseg.utils.errors import UsageError

    dims = ["n", "c", "h", "w"]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["input"], ["logits"])],
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, dims)],
    )
    path = str(tmp_path / "identity.onnx")
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model = init_model(NMF, device="cpu")  # no weights
    assert model.dataset_meta["classes"][0] == "background"  # the config's dataset
    use_onnxruntime(model, path, names_from=("config", NMF))  # no shape to check yet
    with pytest.raises(UsageError) as err:
        model.encode_decode(torch.rand(1, 3, 8, 8))
    assert str(err.value).startswith(f"{path} gives 3 classes but the config {NMF} names 7 (")


@pytest.mark.parametrize(
    "config",
    [
        osp.join(REPO, "tools", "lab", "configs", "polynl_r18-d8_context-shapes.py"),
        osp.join(DEMO, "hamlighthead-nmf_mscan-t_context-shapes.py"),
    ],
    ids=["polynl", "segnext"],
)
def test_other_heads_export_and_match(tmp_path, config):
    """The lab's PolyNLHead and the SegNeXt head (HamLightHead on MSCAN-T) export like
    HamHead."""
    import tools.lab.models  # noqa: F401  (registers PolyNLHead, the lab's)

    model = init_model(config, make_checkpoint(str(tmp_path / "m.pth"), config), "cpu")
    path = str(tmp_path / "m.onnx")
    exported = export_onnx(model, path, (64, 64), dynamic=True, seed=0)
    for check in verify_onnx(exported, path, [(1, 3, 64, 64), (2, 3, 96, 64)]):
        assert check.ok and check.argmax_agreement >= 0.999, check.line()


#: Run a script with torch, mmseg, mmengine, mmcv and hamseg made unimportable.
NO_TORCH = (
    "import sys, runpy\n"
    "for name in ('torch', 'mmseg', 'mmengine', 'mmcv', 'hamseg'): sys.modules[name] = None\n"
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)
RUNNER = "tools/deploy/onnx_runner.py"


@pytest.mark.parametrize("bake", [False, True], ids=["metadata", "baked"])
def test_the_torch_free_runner_writes_infer_py_label_maps_byte_for_byte(tmp_path, nmf_onnx, bake):
    """Issue 28 (3): tools/deploy/onnx_runner.py with importing torch failing, against
    tools/infer.py --backend onnxruntime on the same graph (for the baked graph: its unbaked
    twin), label maps equal byte for byte; its overlays are written too."""
    import cv2

    onnx_file = nmf_onnx["onnx"]
    if bake:
        onnx_file = str(tmp_path / "baked.onnx")
        model = init_model(NMF, nmf_onnx["ckpt"], "cpu")
        export_onnx(model, onnx_file, (64, 64), dynamic=True, bake=True)
    images, ours, theirs = nmf_onnx["images"], tmp_path / "runner", tmp_path / "infer"
    proc = run("-c", NO_TORCH, RUNNER, onnx_file, images, "--out-dir", str(ours), "--threads", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"wrote 2 label map(s) to {ours}"
    infer = run(
        "tools/infer.py",
        images,
        "--config",
        NMF,
        "--backend",
        "onnxruntime",
        "--model",
        nmf_onnx["onnx"],
        "--out-dir",
        str(theirs),
        "--save-label",
        "--no-progress",
    )
    assert infer.returncode == 0, infer.stderr[-2000:]
    for i, (h, w) in enumerate([(57, 71), (64, 49)]):
        a, b = (open(d / f"{i}_label.png", "rb").read() for d in (ours, theirs))
        assert a == b
        assert cv2.imread(str(ours / f"{i}_overlay.png")).shape == (h, w, 3)
    (tmp_path / "t.py").write_text("import torch\n")
    crippled = run("-c", NO_TORCH, str(tmp_path / "t.py"))  # the shim really blocks torch
    assert crippled.returncode == 1 and "ModuleNotFoundError" in crippled.stderr


def test_the_runner_batches_images_of_one_size_with_the_same_label_maps(tmp_path, nmf_onnx):
    """--batch-size 3 over images of two sizes (two runs: a batch of 2 and one of 1, then 1)
    writes the label maps of --batch-size 1 byte for byte; a graph exported without --dynamic
    takes batches of 1 only: one line, exit 2."""
    import cv2

    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(5)
    for i, (h, w) in enumerate([(40, 56), (40, 56), (33, 47), (40, 56)]):
        cv2.imwrite(str(images / f"{i}.png"), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
    outs = {}
    for n in (1, 3):
        outs[n] = tmp_path / f"batch{n}"
        proc = run(
            "-c",
            NO_TORCH,
            RUNNER,
            nmf_onnx["onnx"],
            str(images),
            "--out-dir",
            str(outs[n]),
            "--batch-size",
            str(n),
        )
        assert proc.returncode == 0 and proc.stdout.strip().endswith(f"4 label map(s) to {outs[n]}")
    for i in range(4):
        a, b = (open(outs[n] / f"{i}_label.png", "rb").read() for n in (1, 3))
        assert a == b
    static = str(tmp_path / "static.onnx")
    export_onnx(init_model(NMF, nmf_onnx["ckpt"], "cpu"), static, (40, 56))
    error = one_line_error(
        run(RUNNER, static, str(images), "--out-dir", str(tmp_path / "s"), "--batch-size", "2")
    )
    assert error == (
        f"error: --batch-size 2: {static} takes batches of 1 only (exported without --dynamic): "
        "use --batch-size 1, or export with --dynamic"
    )


def test_the_runner_follows_the_resize_and_pad_rule():
    """A keep-ratio resize (ADE's (2048, 512)) and padding to a multiple, as mmcv/mmseg."""
    import runpy

    runner = runpy.run_path(osp.join(REPO, RUNNER))
    size = runner["resized_size"]
    assert size(480, 640, dict(scale=(2048, 512), keep_ratio=True)) == (512, 683)
    assert size(37, 50, dict(scale=(2048, 512), keep_ratio=True)) == (512, 692)
    assert size(37, 50, dict(scale=(64, 32), keep_ratio=False)) == (32, 64)
    assert size(37, 50, None) == (37, 50)

    class Echo:  # a graph that returns its input: shows the padded, normalised tensor
        def get_inputs(self):
            return [type("I", (), {"name": "input"})]

        def run(self, _, feed):
            self.seen = feed["input"]
            return [np.repeat(feed["input"][:, :1], 2, 1)]

    info = dict(
        input="normalised",
        bgr_to_rgb=True,
        mean=[1.0, 2.0, 3.0],
        std=[2.0, 2.0, 2.0],
        resize=None,
        pad=dict(size=None, size_divisor=8),
        pad_val=0.0,
    )
    echo, bgr = Echo(), np.full((5, 9, 3), (10, 20, 30), np.uint8)
    label = runner["predict"](echo, info, bgr)
    assert echo.seen.shape == (1, 3, 8, 16) and label.shape == (5, 9)
    assert np.array_equal(echo.seen[0, :, 0, 0], [14.5, 9.0, 3.5])  # RGB, normalised
    assert not echo.seen[0, :, 5:].any() and not echo.seen[0, :, :, 9:].any()  # pad_val 0
