"""ONNX export (hamseg.apis.export, tools/deploy/export_onnx.py) checked by ONNX Runtime, the graph
run by tools/infer.py's onnxruntime backend and the torch-free tools/deploy/onnx_runner.py."""

from __future__ import annotations

import json
import os
import os.path as osp
import re
import subprocess
import sys
import warnings

import cv2
import numpy as np
import pytest
import torch

from hamseg.apis import export, init_model
from hamseg.apis.export import TOLERANCE, export_onnx, random_operators, verify_onnx
from hamseg.utils.errors import UsageError
from tests.conftest import REPO
from tests.helpers import make_checkpoint, one_thread, run_tool_here  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = osp.join(REPO, "tests", "data", "tiny_ham.py")  # 3 classes, Resize to 32x32
EXPORT = "tools/deploy/export_onnx.py"
RUNNER = "tools/deploy/onnx_runner.py"
#: Run a script with torch, mmseg, mmengine, mmcv and hamseg made unimportable.
NO_TORCH = (
    "import sys, runpy\n"
    "for name in ('torch', 'mmseg', 'mmengine', 'mmcv', 'hamseg'): sys.modules[name] = None\n"
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def run(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``python *args`` from the repository root, one thread."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The process exited 2 with exactly one stderr line starting 'error: ' and no traceback."""
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return errors[0]


def tiny_config(path: str, head: dict | None = None, **keys: object) -> str:
    """A config inheriting tests/data/tiny_ham.py with ``model.decode_head`` and top-level
    ``keys`` merged."""
    lines = [f"_base_ = [{TINY!r}]"] + [f"{k} = {v!r}" for k, v in keys.items()]
    lines += [f"model = dict(decode_head={head!r})"] if head else []
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def tiny_checkpoint(path: str, config: str = TINY) -> str:
    """:func:`make_checkpoint` of a 3-class ``config`` with tiny_ham.py's class names."""
    make_checkpoint(path, config, num_classes=3)
    saved = torch.load(path, weights_only=False)
    saved["meta"]["dataset_meta"]["classes"] = ["a", "b", "c"]
    torch.save(saved, path)
    return path


def tool(script: str, *args: str, monkeypatch, capsys) -> subprocess.CompletedProcess:
    """``python script *args`` in this process (:func:`run_tool_here`)."""
    code, out, err = run_tool_here(script, list(args), monkeypatch, capsys)
    return subprocess.CompletedProcess([script, *args], code, out, err)


def write_images(folder: str, sizes: list[tuple[int, int]], seed: int = 0) -> str:
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i, (h, w) in enumerate(sizes):
        cv2.imwrite(osp.join(folder, f"{i}.png"), rng.integers(0, 255, (h, w, 3), np.uint8))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """The tiny HamHead-NMF model (3 classes), its checkpoint, a dynamic export at 32x32 and
    two images of other sizes."""
    tmp = tmp_path_factory.mktemp("tiny_onnx")
    ckpt = tiny_checkpoint(str(tmp / "m.pth"))
    onnx_file = str(tmp / "m.onnx")
    export_onnx(init_model(TINY, ckpt, "cpu"), onnx_file, (32, 32))
    images = write_images(str(tmp / "images"), [(45, 61), (50, 37)])
    return dict(ckpt=ckpt, onnx=onnx_file, images=images, tmp=tmp)


def labels(folder, n: int = 2) -> list[np.ndarray]:
    return [cv2.imread(osp.join(folder, f"{i}_label.png"), cv2.IMREAD_UNCHANGED) for i in range(n)]


def test_the_readme_export_runs_in_the_runner_on_other_sizes(tmp_path, tiny, monkeypatch, capsys):
    """Issue 51 (1): the README's command (no --shape: a 512x512 example, dynamic axes) is
    verified against PyTorch at two sizes, and the torch-free runner takes images of other
    sizes, in batches, with infer.py's label maps."""
    out = str(tmp_path / "model.onnx")
    proc = tool(EXPORT, TINY, tiny["ckpt"], "--out", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = r"^(\S+): max \|diff\| \S+, relative (\S+), argmax agreement (\S+)% -> ok$"
    found = re.findall(line, proc.stdout, re.M)
    assert [f[0] for f in found] == ["1x3x512x512", "2x3x544x496"]
    assert all(float(rel) < 1e-4 and float(agree) >= 99.9 for _, rel, agree in found)
    ours = {n: tmp_path / f"runner{n}" for n in (1, 2)}
    for n, folder in ours.items():
        args = [RUNNER, out, tiny["images"], "--out-dir", str(folder), "--batch-size", str(n)]
        runner = run("-c", NO_TORCH, *args)
        assert runner.returncode == 0, runner.stderr[-2000:]
        assert runner.stdout.strip() == f"wrote 2 label map(s) to {folder}"
    args = [tiny["images"], "--config", TINY, "--backend", "onnxruntime", "--model", out]
    args += ["--out-dir", str(tmp_path / "infer"), "--save-label", "--no-progress"]
    infer = tool("tools/infer.py", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert infer.returncode == 0, infer.stderr[-2000:]
    for a, b, c, size in zip(
        *(labels(d) for d in (*ours.values(), tmp_path / "infer")), [(45, 61), (50, 37)]
    ):
        assert a.shape == size and np.array_equal(a, b) and np.mean(a == c) >= 0.999
    (tmp_path / "t.py").write_text("import torch\n")
    blocked = run("-c", NO_TORCH, str(tmp_path / "t.py"))  # the shim really blocks torch
    assert blocked.returncode == 1 and "ModuleNotFoundError" in blocked.stderr


def test_a_static_graph_takes_other_sizes_resized_to_its_own(tmp_path, tiny):
    """--static: the graph takes 32x32 only; the runner and the onnxruntime backend resize
    another size to it and the logits back, with the same labels as the dynamic graph."""
    static = str(tmp_path / "static.onnx")
    model = init_model(TINY, tiny["ckpt"], "cpu")
    export_onnx(model, static, (32, 32), dynamic=False)
    import onnx

    dims = onnx.load(static).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [1, 3, 32, 32]
    for path, name in ((tiny["onnx"], "dynamic"), (static, "static")):
        args = [path, tiny["images"], "--out-dir", str(tmp_path / name), "--batch-size", "2"]
        proc = run("-c", NO_TORCH, RUNNER, *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
    for a, b in zip(labels(tmp_path / "dynamic"), labels(tmp_path / "static")):
        assert np.array_equal(a, b)  # the pipeline resizes to 32x32 first: the same graph input
    backend = export.use_onnxruntime(init_model(TINY, tiny["ckpt"], "cpu"), static)
    x = torch.randn(1, 3, 40, 24)
    resized = torch.nn.functional.interpolate(x, (32, 32), mode="bilinear")
    with torch.no_grad():
        logits = export.SegmentorLogits(model)(resized)
        ref = torch.nn.functional.interpolate(logits, (40, 24), mode="bilinear")
    assert torch.allclose(backend.encode_decode(x), ref, rtol=1e-4, atol=1e-4)


def test_the_runner_slides_as_mmseg_slide_inference(tmp_path, tiny):
    """Issue 51 (5): a config in slide mode (crops 32x32, stride 21, no resize), exported at its
    crop size: the runner's logits equal mmseg's slide_inference on a 45x61 image."""
    from mmseg.apis import inference_model

    test_cfg = dict(mode="slide", crop_size=(32, 32), stride=(21, 21))
    pipeline = [dict(type="LoadImageFromFile"), dict(type="PackSegInputs")]
    config = tiny_config(str(tmp_path / "slide.py"), test_pipeline=pipeline)
    with open(config, "a") as f:
        f.write(f"model = dict(test_cfg={test_cfg!r})\n")
    model = init_model(config, tiny["ckpt"], "cpu")
    path = str(tmp_path / "slide.onnx")
    export_onnx(model, path, (32, 32), dynamic=False)  # seeds the model's ham as the graph's
    image = osp.join(tiny["images"], "0.png")
    proc = run(
        "-c", NO_TORCH, RUNNER, path, image, "--out-dir", str(tmp_path / "o"), "--save-logits"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    ours = np.load(tmp_path / "o" / "0_logits.npy")
    with torch.no_grad():
        theirs = inference_model(model, image).seg_logits.data.numpy()
    assert ours.shape == theirs.shape == (3, 45, 61)
    assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()


def test_the_runner_refuses_a_missing_provider_in_one_line(tiny, tmp_path):
    """Issue 51 (5): CUDA and TensorRT are onnxruntime-gpu's providers (not run here)."""
    import onnxruntime as ort

    for provider, name in (("cuda", "CUDA"), ("tensorrt", "Tensorrt")):
        if f"{name}ExecutionProvider" in ort.get_available_providers():
            continue
        args = [tiny["onnx"], tiny["images"], "--out-dir", str(tmp_path), "--provider", provider]
        error = one_line_error(run(RUNNER, *args))
        assert f"--provider {provider}" in error and f"{name}ExecutionProvider" in error
    assert not list(tmp_path.iterdir())


def test_bake_preprocess_puts_the_normalisation_in_the_graph(tmp_path, tiny):
    path = str(tmp_path / "baked.onnx")
    export_onnx(init_model(TINY, tiny["ckpt"], "cpu"), path, (32, 32), bake=True)
    bgr = np.random.default_rng(1).integers(0, 256, (1, 3, 41, 57)).astype(np.float32)
    mean, std = np.array([123.675, 116.28, 103.53]), np.array([58.395, 57.12, 57.375])
    normalised = ((bgr[:, ::-1] - mean[:, None, None]) / std[:, None, None]).astype(np.float32)
    baked, plain = map(export.onnx_session, (path, tiny["onnx"]))
    a, b = baked.run(None, {"input": bgr})[0], plain.run(None, {"input": normalised})[0]
    assert a.shape == (1, 3, 41, 57) and np.abs(a - b).max() <= 1e-4 * np.abs(b).max()
    proc = run("-c", NO_TORCH, RUNNER, path, tiny["images"], "--out-dir", str(tmp_path / "baked"))
    plain_run = run(RUNNER, tiny["onnx"], tiny["images"], "--out-dir", str(tmp_path / "plain"))
    assert proc.returncode == plain_run.returncode == 0, proc.stderr[-2000:]
    for x, y in zip(labels(tmp_path / "baked"), labels(tmp_path / "plain")):
        assert np.mean(x == y) >= 0.999
    with pytest.raises(UsageError, match="--bake-preprocess"):
        export.use_onnxruntime(init_model(TINY, None, "cpu"), path)


def test_the_graph_records_what_a_runner_needs(tiny):
    """metadata_props 'hamseg': preprocessing, resize, test_cfg, classes, head and ham as
    built (eval_seed = the export's seed); logits (batch, 3, height, width)."""
    import onnx

    import hamseg

    model = onnx.load(tiny["onnx"])
    dims = model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value or d.dim_param for d in dims] == ["batch", 3, "height", "width"]
    info = json.loads({p.key: p.value for p in model.metadata_props}["hamseg"])
    assert info["mean"] == [123.675, 116.28, 103.53] and info["bgr_to_rgb"] is True
    assert info["resize"] == dict(scale=[32, 32], keep_ratio=False)
    assert info["input"] == "normalised"
    assert info["test_cfg"] == dict(mode="whole", crop_size=None, stride=None)
    assert info["classes"] == ["a", "b", "c"] and len(info["palette"]) == 3
    assert info["head"] == "HamHead" and info["hamseg_version"] == hamseg.__version__
    ham = {k: info["ham"][k] for k in ("type", "S", "R", "eval_steps", "eval_seed")}
    assert ham == dict(type="NMF", S=1, R=4, eval_steps=3, eval_seed=0)


@pytest.mark.parametrize("ham", ["NMF", "VQ", "CD"])
def test_every_ham_exports_seeded_and_deterministic(tmp_path, tiny, ham):
    """No random operator, two runs equal, within 1e-4 of PyTorch at two sizes, no TracerWarning;
    CD's ridge solve has no ONNX operator: its graph inverts by elimination (MatMul, Div, Sub)."""
    import onnx

    options = {"model.decode_head.ham_cfg.type": ham, "model.decode_head.ham_cfg.eval_draws": 2}
    model = init_model(TINY, tiny["ckpt"], "cpu", cfg_options=options)
    path = str(tmp_path / "m.onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exported = export_onnx(model, path, (33, 47), seed=3)
    assert not [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    assert model.decode_head.hamburger.ham.eval_seed == 3
    graph = onnx.load(path)
    info = json.loads(graph.metadata_props[0].value)
    assert (info["ham"]["type"], info["ham"]["eval_draws"], info["ham"]["eval_seed"]) == (ham, 2, 3)
    assert random_operators(graph) == {}
    session = export.onnx_session(path)
    x = np.random.default_rng(0).normal(size=(1, 3, 41, 29)).astype(np.float32)
    assert np.array_equal(session.run(None, {"input": x})[0], session.run(None, {"input": x})[0])
    for check in verify_onnx(exported, path, [(1, 3, 33, 47), (2, 3, 65, 31)]):
        assert check["max_rel"] < TOLERANCE and check["agreement"] >= 0.999, check
    if ham == "CD":
        assert {"MatMul", "Div", "Sub"} <= {n.op_type for n in onnx.load(path).graph.node}


def test_a_tracer_warning_of_another_module_is_still_shown(tmp_path, tiny):
    """Only the shape reads of torch.nn.functional and mmseg's resize are quiet: a branch on a
    tensor's value in any other module warns."""
    model = init_model(TINY, tiny["ckpt"], "cpu")
    forward = model.decode_head.forward

    def forward_with_a_branch(inputs):
        logits = forward(inputs)
        return logits if bool(logits.mean() > -1e9) else -logits  # decided while tracing

    model.decode_head.forward = forward_with_a_branch
    with pytest.warns(torch.jit.TracerWarning, match="Python boolean") as caught:
        export_onnx(model, str(tmp_path / "m.onnx"), (33, 33))
    assert [w.filename for w in caught if w.category is torch.jit.TracerWarning] == [__file__]


def lightham(tmp_path, name: str, head_type: str, ham: dict) -> str:
    key = "ham_kwargs" if head_type == "LightHamHead" else "ham_cfg"
    head = dict(_delete_=True, type=head_type, in_channels=[64], in_index=[0], channels=16)
    head.update(ham_channels=16, num_classes=3, align_corners=False, **{key: ham})
    return tiny_config(str(tmp_path / name), head)


def test_mmseg_lighthamhead_draws_random_numbers_and_its_graph_is_removed(tmp_path):
    """mmseg's NMF2D draws a new dictionary at every forward: the graph's RandomUniformLike is
    found, the file removed, HamLightHead named."""
    model = init_model(lightham(tmp_path, "l.py", "LightHamHead", dict(MD_R=4)), None, "cpu")
    out = tmp_path / "l.onnx"
    with pytest.raises(UsageError, match="RandomUniformLike") as err:
        export_onnx(model, str(out), (32, 32))
    assert "type='HamLightHead'" in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()


def test_random_operators_are_found_in_subgraphs(tmp_path):
    from onnx import TensorProto, helper

    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])  # noqa: E731
    noise = helper.make_node("RandomNormalLike", ["x"], ["n"], name="inner")
    then = helper.make_graph([noise], "then", [], [value("n")])
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "else", [], [value("y")]
    )
    nodes = [
        helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=other),
        helper.make_node("Bernoulli", ["x"], ["b"], name="outer"),
    ]
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    graph = helper.make_model(helper.make_graph(nodes, "g", [cond, value("x")], [value("out")]))
    assert random_operators(graph) == dict(Bernoulli="outer", RandomNormalLike="inner")


def test_a_checkpoint_of_another_ham_or_head_is_refused_unless_allowed(
    tmp_path, tiny, monkeypatch, capsys
):
    """An NMF checkpoint loads strictly into the VQ model (no ham parameters) but computes
    something else: one line naming both, exit 2; --allow-config-mismatch exports it. A
    checkpoint of mmseg's LightHamHead is checked by its ham_kwargs (MD_R)."""
    out = str(tmp_path / "m.onnx")
    args = [TINY, tiny["ckpt"], "--out", out, "--shape", "32", "32", "--no-verify"]
    args += ["--cfg-options", "model.decode_head.ham_cfg.type=VQ"]
    error = one_line_error(tool(EXPORT, *args, monkeypatch=monkeypatch, capsys=capsys))
    assert "ham type='NMF' (its stored config's ham_cfg) but the config has ham type='VQ'" in error
    assert "--allow-config-mismatch" in error and not osp.exists(out)
    allowed = tool(EXPORT, *args, "--allow-config-mismatch", monkeypatch=monkeypatch, capsys=capsys)
    assert allowed.returncode == 0 and osp.exists(out)
    trained = lightham(tmp_path, "mmseg.py", "LightHamHead", dict(MD_R=4))
    ckpt = make_checkpoint(str(tmp_path / "mmseg.pth"), trained, num_classes=3)
    r8 = lightham(tmp_path, "r8.py", "HamLightHead", dict(type="NMF", R=8))
    said = r"ham R=4 \(its stored config's ham_kwargs\) but the config has ham R=8: fix"
    with pytest.raises(UsageError, match=said):
        export.check_trained_head(init_model(r8, None, "cpu").cfg, ckpt, "fix")
    ours = lightham(tmp_path, "ours.py", "HamLightHead", dict(type="NMF", R=4))
    switched = init_model(ours, ckpt, "cpu")
    export.check_trained_head(switched.cfg, ckpt, "fix")  # the one-word switch: accepted
    export_onnx(switched, out, (32, 32))


def test_bad_input_is_one_line_exit_2(tmp_path, tiny, monkeypatch, capsys):
    """Issue 51 (6): the opset message names the range actually accepted."""
    out = str(tmp_path / "m.onnx")
    high = int(torch.onnx._constants.ONNX_MAX_OPSET)
    cases = [
        ([TINY, str(tmp_path / "none.pth"), "--out", out], "checkpoint file not found"),
        (["configs/nope.py", tiny["ckpt"], "--out", out], "configs/nope.py"),
        ([TINY, tiny["ckpt"], "--out", out, "--shape", "0", "32"], "--shape 0 32"),
        ([TINY, tiny["ckpt"], "--out", out, "--opset", "99"], f"--opset 99: use 11 to {high}"),
        ([TINY, tiny["ckpt"], "--out", out, "--opset", "10"], f"--opset 10: use 11 to {high}"),
    ]
    fixtures = dict(monkeypatch=monkeypatch, capsys=capsys)
    for args, message in cases:
        assert message in one_line_error(tool(EXPORT, *args, **fixtures))
        assert not osp.exists(out)
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "onnxruntime", None)
        error = one_line_error(tool(EXPORT, *cases[0][0], **fixtures))
        assert "onnxruntime not installed: pip install 'hamseg[deploy]'" in error
    for opset in (11, high):  # both ends of the range export and verify
        model = init_model(TINY, tiny["ckpt"], "cpu")
        exported = export_onnx(model, out, (32, 32), opset=opset)
        assert verify_onnx(exported, out, [(1, 3, 32, 32)])[0]["max_rel"] < TOLERANCE


def test_verify_failure_prints_the_numbers_removes_the_file_and_exits_1(
    tmp_path, tiny, monkeypatch, capsys
):
    """The graph exported with seed 0 against PyTorch evaluating seed 1: a real mismatch."""
    export_seed_0 = export.export_onnx

    def export_then_reseed(model, *args):
        exported = export_seed_0(model, *args)
        for ham in exported.modules():
            ham.eval_seed = 1  # the hams' evaluation seed; other modules ignore it
        return exported

    monkeypatch.setattr(export, "export_onnx", export_then_reseed)
    out = str(tmp_path / "m.onnx")
    args = [TINY, tiny["ckpt"], "--out", out, "--shape", "32", "32"]
    proc = tool(EXPORT, *args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 1, proc.stderr[-2000:]
    line = re.search(r"^1x3x32x32: .* relative (\S+), .* -> FAILED", proc.stdout, re.M)
    assert line and float(line.group(1)) > 1e-4
    (error,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert f"relative {line.group(1)} (> 0.0001)" in error and "the file was removed" in error
    assert not osp.exists(out) and "wrote" not in proc.stdout


def test_infer_with_onnxruntime_writes_pytorchs_label_maps(tmp_path, tiny, monkeypatch, capsys):
    """PyTorch, ONNX Runtime with the checkpoint, and with the config alone (no weights)."""
    seeded = tiny_config(str(tmp_path / "seeded.py"), dict(ham_cfg=dict(eval_seed=0)))
    common = [tiny["images"], "--save-label", "--no-progress", "--out-dir"]
    ort = ["--config", TINY, "--backend", "onnxruntime", "--model", tiny["onnx"]]
    runs = [
        [*common, str(tmp_path / "pt"), "--config", seeded, "--checkpoint", tiny["ckpt"]],
        [*common, str(tmp_path / "ort"), "--checkpoint", tiny["ckpt"], *ort],
        [*common, str(tmp_path / "cfg"), *ort],
    ]
    for args in runs:
        proc = tool("tools/infer.py", *args, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr[-2000:]
    for a, b, c in zip(*(labels(tmp_path / d) for d in ("pt", "ort", "cfg"))):
        assert np.mean(a == b) >= 0.999 and np.array_equal(b, c)


def test_the_onnxruntime_backend_refuses_another_head_ham_or_class_count(
    tmp_path, tiny, monkeypatch, capsys
):
    """The graph's recorded head, ham and class count against the model of the config, and with
    a checkpoint, the checkpoint's recorded ham: one line naming what differs."""
    cases = {
        "model.decode_head.ham_cfg.type": ("VQ", "ham type='NMF' but the model of "),
        "model.decode_head.num_classes": (5, "num_classes=3 but the model of "),
    }
    for key, (value, said) in cases.items():
        model = init_model(TINY, None, "cpu", cfg_options={key: value})
        with pytest.raises(UsageError) as err:
            export.use_onnxruntime(model, tiny["onnx"])
        assert said in str(err.value) and f"{TINY} has " in str(err.value)
    config = tiny_config(str(tmp_path / "vq.py"), dict(ham_cfg=dict(type="VQ")))
    vq = tiny_checkpoint(str(tmp_path / "vq.pth"), config)
    out = tmp_path / "out"
    args = [tiny["images"], "--config", TINY, "--checkpoint", vq, "--backend", "onnxruntime"]
    args += ["--model", tiny["onnx"], "--out-dir", str(out)]
    error = one_line_error(tool("tools/infer.py", *args, monkeypatch=monkeypatch, capsys=capsys))
    assert "ham type='VQ' (its stored config's ham_cfg) but the config has ham type='NMF'" in error
    assert not out.exists()
