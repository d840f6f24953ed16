"""ONNX export (docs/deploy.md): normalised (or raw BGR, baked) (N, 3, H, W) -> logits (N, K, H,
W), hams seeded, a runner's metadata; checked against PyTorch and the checkpoint's recorded head;
ONNX Runtime as an mmseg segmentor's network."""

import importlib.util
import inspect
import json
import os
import warnings
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmseg.registry import MODELS
from torch import Tensor, nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.models import MatrixDecomposition2D
from hamseg.utils.errors import UsageError, require_file
from hamseg.utils.messages import one_line
from hamseg.version import __version__

from .inference import class_info

TOLERANCE = 1e-4  #: relative logit difference above which a graph fails its check
RANDOM_OPS = ("Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform")
RANDOM_OPS += ("RandomUniformLike",)
#: mmseg's bilinear resize (half-pixel centres) needs ONNX's Resize of opset 11; at 9-10 the
#: demo model's argmax agreed on 68% of pixels.
MIN_OPSET = 11
#: Modules whose TracerWarnings are shape reads, constants of every trace; others are shown.
QUIET_TRACERS = r"(torch\.nn\.functional|mmseg\.models\.utils\.wrappers)$"
#: Ham settings that do not change what an evaluated model computes.
NOT_COMPARED = {"D", "train_steps", "grad", "eta", "eval_steps", "eval_seed", "eval_draws"}
SAME_HEAD = {"LightHamHead": "HamLightHead"}  #: one head for the checks (same checkpoints)


def check_export_options(shape: Sequence[int], opset: int) -> None:
    """One line naming the missing extra, ``--shape`` or ``--opset`` if no export can run."""
    if missing := [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]:
        raise UsageError(f"{' and '.join(missing)} not installed: pip install 'hamseg[deploy]'")
    if min(shape) < 1:
        raise UsageError(f"--shape {' '.join(map(str, shape))}: H and W must be positive")
    high = int(getattr(torch.onnx._constants, "ONNX_MAX_OPSET", 20))
    if not MIN_OPSET <= opset <= high:
        raise UsageError(
            f"--opset {opset}: use {MIN_OPSET} to {high} (torch {torch.__version__.split('+')[0]}"
            f" writes up to {high}; below {MIN_OPSET} ONNX cannot express mmseg's bilinear resize)"
        )


class SegmentorLogits(nn.Module):
    """``segmentor.encode_decode(x)``; ``bake``: x is the raw BGR image, normalised inside."""

    def __init__(self, segmentor: nn.Module, bake: bool = False) -> None:
        super().__init__()
        self.segmentor = segmentor
        self.bake = deploy_metadata(segmentor) if bake else None
        for key in ("mean", "std") if bake else ():
            self.register_buffer(key, torch.tensor(self.bake[key]).view(1, 3, 1, 1))

    def forward(self, x: Tensor) -> Tensor:
        if self.bake:
            x = ((x.flip(1) if self.bake["bgr_to_rgb"] else x) - self.mean) / self.std
        meta = [dict(img_shape=tuple(x.shape[2:]), pad_shape=tuple(x.shape[2:]))] * x.shape[0]
        return self.segmentor.encode_decode(x, meta)


def head_record(head: nn.Module, classes: Optional[list] = None) -> dict[str, Any]:
    """A built decode head's type, class count and names, its first ham's type and constructor
    arguments (None: no ham)."""
    ham = next((m for m in head.modules() if isinstance(m, MatrixDecomposition2D)), None)
    record = dict(head=type(head).__name__, num_classes=head.num_classes, classes=classes)
    if ham is None:
        return dict(record, ham=None)
    mro = type(ham).__mro__[: type(ham).__mro__.index(MatrixDecomposition2D) + 1]
    names = [n for cls in mro for n in inspect.signature(cls.__init__).parameters]
    settings = {n: getattr(ham, n) for n in names if hasattr(ham, n)}
    return dict(record, ham=dict(type=type(ham).__name__, **settings))


def differences(a: dict, b: dict) -> Optional[tuple[str, str]]:
    """What records ``a`` and ``b`` say of the first thing they disagree on (None: nothing)."""
    heads = [SAME_HEAD.get(r.get("head"), r.get("head")) for r in (a, b)]
    if None not in heads and heads[0] != heads[1]:
        return a["head"], b["head"]
    x, y = a.get("ham"), b.get("ham")
    if x and y:
        keys = [k for k in x if k in y and k not in NOT_COMPARED and x[k] != y[k]]
        keys = ["type"] if x["type"] != y["type"] else keys
        if keys:
            return tuple("ham " + ", ".join(f"{k}={h[k]!r}" for k in keys) for h in (x, y))
    counts = [r.get("num_classes") for r in (a, b)]
    if None not in counts and counts[0] != counts[1]:
        return f"num_classes={counts[0]}", f"num_classes={counts[1]}"
    if a.get("classes") and b.get("classes") and list(a["classes"]) != list(b["classes"]):
        i = next(i for i, (x, y) in enumerate(zip(a["classes"], b["classes"])) if x != y)
        return f"class {i} {a['classes'][i]!r}", f"class {i} {b['classes'][i]!r}"
    return None


def check_trained_head(cfg: Config, checkpoint: str, fix: str) -> None:
    """One line if the config stored in ``checkpoint`` builds another decode head, ham or class
    count than ``cfg`` (weights that load strictly may still compute something else)."""
    loaded = load_checkpoint_file(checkpoint)
    stored = (loaded.get("meta") or {}).get("cfg") if isinstance(loaded, dict) else None
    try:
        heads = [Config.fromstring(stored, ".py").model.decode_head, cfg.model.decode_head]
        with warnings.catch_warnings():  # mmseg's loss builders warn about training options
            warnings.simplefilter("ignore")
            types = [SAME_HEAD.get(h["type"], h["type"]) for h in heads]  # a cascade: TypeError
            trained, built = [
                head_record(MODELS.build(dict(h, type=t))) for h, t in zip(heads, types)
            ]
    except (AttributeError, KeyError, TypeError):  # no stored config, or another code base's
        return
    if found := differences(trained, built):
        entry = next((f"'s {k}" for k in ("ham_cfg", "ham_kwargs") if heads[0].get(k)), "")
        raise UsageError(
            f"{checkpoint} was trained with decode_head {found[0]} (its stored config{entry}) "
            f"but the config has {found[1]}: {fix}"
        )


def deploy_metadata(segmentor: nn.Module, bake: bool = False) -> dict[str, Any]:
    """The graph's ``hamseg`` metadata: what a runner does around it as mmseg's inference does
    (data preprocessor, the test pipeline's Resize, test_cfg), palette, :func:`head_record`."""
    cfg, (classes, palette) = segmentor.cfg, class_info(segmentor)
    pre, test_cfg = cfg.model.get("data_preprocessor", {}), cfg.model.get("test_cfg") or {}
    pipeline = cfg.get("test_pipeline") or cfg.get("test_dataloader", {}).get("dataset", {})
    pipeline = pipeline if isinstance(pipeline, list) else pipeline.get("pipeline", [])
    resize = next((t for t in pipeline if "Resize" in str(t.get("type"))), None)
    pad = pre.get("test_cfg") or {}
    return dict(
        mean=[float(v) for v in pre.get("mean", (0, 0, 0))],
        std=[float(v) for v in pre.get("std", (1, 1, 1))],
        bgr_to_rgb=bool(pre.get("bgr_to_rgb", False)),
        pad_val=float(pre.get("pad_val", 0)),
        pad=dict(size=pad.get("size"), size_divisor=pad.get("size_divisor")),
        resize=resize and dict(scale=resize.get("scale"), keep_ratio=resize.get("keep_ratio")),
        test_cfg={k: test_cfg.get(k) for k in ("mode", "crop_size", "stride")},
        input="bgr 0-255" if bake else "normalised",
        palette=palette,
        hamseg_version=__version__,
        **head_record(segmentor.decode_head, classes),
    )


def seed_hams(model: nn.Module, seed: int) -> None:
    """Set ``eval_seed`` of every hamseg ham: its dictionaries enter the graph as constants."""
    for module in model.modules():
        if isinstance(module, MatrixDecomposition2D):
            module.eval_seed = seed


def random_operators(path: str) -> dict[str, str]:
    """Op type -> first node of each :data:`RANDOM_OPS` operator in the file, subgraphs too."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    found: dict[str, str] = {}
    graphs = [model.graph, *model.functions]
    while graphs:
        for node in graphs.pop().node:
            if node.op_type in RANDOM_OPS:
                found.setdefault(node.op_type, node.name or "(unnamed)")
            for attr in node.attribute:
                graphs += ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
    return dict(sorted(found.items()))


def export_onnx(
    segmentor: nn.Module,
    out: str,
    shape: tuple[int, int],
    dynamic: bool = True,
    opset: int = 17,
    seed: int = 0,
    bake: bool = False,
) -> SegmentorLogits:
    """Export a CPU segmentor to ``out`` (TorchScript exporter) on a (1, 3, *``shape``) example,
    N/H/W dynamic unless ``dynamic`` is False, hams seeded, :func:`deploy_metadata`; returns the
    exported module. One line, and nothing left at ``out``, if it cannot."""
    check_export_options(shape, opset)
    seed_hams(segmentor, seed)
    model = SegmentorLogits(segmentor.eval(), bake).eval()
    example = torch.randn(1, 3, *shape, generator=torch.Generator().manual_seed(seed))
    example = example * 50 + 128 if bake else example
    try:
        with torch.no_grad():
            classes = model(example).shape[1]  # eager: draws the seeded dictionaries
    except RuntimeError as err:
        raise UsageError(f"the model cannot take {shape[0]}x{shape[1]}: {one_line(err)}") from None
    axes = dict.fromkeys(["input", "logits"], {0: "batch", 2: "height", 3: "width"})
    names = dict(input_names=["input"], output_names=["logits"], dynamo=False, opset_version=opset)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=QUIET_TRACERS)
        try:  # a failed export writes no file
            torch.onnx.export(
                model, (example,), out, dynamic_axes=axes if dynamic else None, **names
            )
        except torch.onnx.errors.OnnxExporterError as err:
            reason = one_line(err).split(" Please feel free to request support")[0][:300]
            raise UsageError(f"--opset {opset}: torch cannot record the model: {reason}") from None
    if found := random_operators(out):
        os.remove(out)
        ops = ", ".join(f"{op} (at {node})" for op, node in found.items())
        raise UsageError(
            f"{out}: the graph draws random numbers, {ops}; the file was removed (mmseg's "
            "LightHamHead draws its dictionary at random: use type='HamLightHead')"
        )
    import onnx

    graph = onnx.load(out)
    graph.graph.output[0].type.tensor_type.shape.dim[1].dim_value = classes  # not a symbol
    onnx.helper.set_model_props(graph, {"hamseg": json.dumps(deploy_metadata(segmentor, bake))})
    onnx.save(graph, out)
    return model


def onnx_session(path: str) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def verify_onnx(model: nn.Module, path: str, shapes: Sequence[Sequence[int]]) -> list[dict]:
    """ONNX Runtime's logits against ``model``'s on a random input of each shape: the largest
    difference, relative to the largest logit too, and the argmax agreement."""
    session, results = onnx_session(path), []
    for i, shape in enumerate(shapes):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(1 + i))
        with torch.no_grad():
            ref = model(x).numpy()
        got = session.run(None, {"input": x.numpy()})[0]
        diff, top = float(np.abs(got - ref).max()), max(float(np.abs(ref).max()), 1e-12)
        agree = float((got.argmax(1) == ref.argmax(1)).mean())
        results.append(dict(shape=shape, max_abs=diff, max_rel=diff / top, agreement=agree))
    return results


def use_onnxruntime(
    segmentor: nn.Module, onnx_file: str, checkpoint: Optional[str] = None
) -> nn.Module:
    """Make ``segmentor`` compute ``encode_decode`` with ONNX Runtime (in place) if the graph's
    head, ham and classes are the segmentor's (and the ``checkpoint``'s, whose weights it does
    not need). A static graph takes other sizes resized to its own."""
    require_file(onnx_file, "ONNX model")
    if checkpoint:
        check_trained_head(segmentor.cfg, checkpoint, "pass the config it was trained with")
    try:
        session = onnx_session(onnx_file)
    except Exception as err:  # onnxruntime's own exception types
        raise UsageError(f"{onnx_file}: ONNX Runtime: {one_line(err, 200)}") from None
    info = json.loads(session.get_modelmeta().custom_metadata_map.get("hamseg", "{}"))
    if info.get("input", "normalised") != "normalised":
        raise UsageError(
            f"{onnx_file} takes the raw image (exported with --bake-preprocess): run it with "
            "tools/deploy/onnx_runner.py, or export without --bake-preprocess for this backend"
        )
    if found := differences(info, head_record(segmentor.decode_head, class_info(segmentor)[0])):
        model = checkpoint or segmentor.cfg.filename or "the config"
        raise UsageError(
            f"{onnx_file} was exported from decode_head {found[0]} but the model of {model} has "
            f"{found[1]}: export this model (tools/deploy/export_onnx.py), or pass the config "
            "and checkpoint the graph was exported from"
        )
    (graph_input,) = session.get_inputs()
    size = tuple(graph_input.shape[2:])
    size = size if all(isinstance(v, int) for v in size) else None

    def encode_decode(inputs: Tensor, batch_img_metas: Any = None) -> Tensor:
        x = inputs.detach().float().cpu()
        resize = lambda t, to: F.interpolate(t, to, mode="bilinear", align_corners=False)
        fit = size is not None and tuple(x.shape[2:]) != size
        logits = session.run(None, {graph_input.name: (resize(x, size) if fit else x).numpy()})[0]
        logits = torch.from_numpy(logits)
        return (resize(logits, inputs.shape[2:]) if fit else logits).to(inputs.device)

    segmentor.encode_decode = encode_decode
    return segmentor
