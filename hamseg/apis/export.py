"""ONNX export (docs/deploy.md): normalised (or raw BGR, baked) (N, 3, H, W) -> logits (N, K, H,
W), hams seeded, a runner's metadata; checked against PyTorch and the checkpoint's recorded head;
ONNX Runtime as an mmseg segmentor's network."""

import importlib.util
import inspect
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmseg.models.decode_heads.ham_head import Matrix_Decomposition_2D_Base
from mmseg.registry import MODELS
from torch import Tensor, nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.models import MatrixDecomposition2D
from hamseg.utils.errors import UsageError, first_items, one_line, require_file
from hamseg.version import __version__

from .inference import class_info

TOLERANCE = 1e-4  #: relative logit difference above which a graph fails its check
RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform"}
RANDOM_OPS.add("RandomUniformLike")
#: mmseg resizes logits (and SegNeXt's head its levels) bilinearly with half-pixel centres, which
#: ONNX's Resize expresses from opset 11; at 9-10 the demo model's argmax agreed on 68% of pixels.
MIN_OPSET = 11
#: Modules whose TracerWarnings are shape reads that are constants of every trace (torch's norm
#: checks, mmseg's resize reading sizes for its align_corners warning); others are shown.
QUIET_TRACERS = r"(torch\.nn\.functional|mmseg\.models\.utils\.wrappers)$"
#: Ham settings that do not change what an evaluated model computes (training, D, evaluation).
NOT_COMPARED = {"D", "train_steps", "grad", "eta", "eval_steps", "eval_seed", "eval_draws"}
SAME_HEAD = {"LightHamHead": "HamLightHead"}  #: one head for the checks (same checkpoints)


def require_deploy() -> None:
    """Raise one line naming the extra if onnx or onnxruntime is not installed."""
    if missing := [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]:
        raise UsageError(f"{' and '.join(missing)} not installed: pip install 'hamseg[deploy]'")


def check_export_options(shape: Sequence[int], opset: int) -> None:
    """Raise one line naming ``--shape`` or ``--opset`` for values no export can take (opsets:
    :data:`MIN_OPSET` to the highest of torch's exporter)."""
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


def ham_settings(ham: nn.Module) -> dict[str, Any]:
    """Type and constructor arguments of a hamseg ham as built."""
    mro = type(ham).__mro__[: type(ham).__mro__.index(MatrixDecomposition2D) + 1]
    names = [n for cls in mro for n in inspect.signature(cls.__init__).parameters]
    return dict(type=type(ham).__name__, **{n: getattr(ham, n) for n in names if hasattr(ham, n)})


def head_record(head: nn.Module, names: Optional[list] = None) -> dict[str, Any]:
    """A built decode head: type, its first ham's settings ({}: none), classes."""
    ham = next((m for m in head.modules() if isinstance(m, MatrixDecomposition2D)), None)
    settings = ham_settings(ham) if ham is not None else {}
    return dict(head=type(head).__name__, ham=settings, classes=head.num_classes, names=names)


def differences(a: dict, b: dict) -> Optional[tuple[str, str]]:
    """What records ``a`` and ``b`` say of the first thing they disagree on (None: not said)."""
    heads = [SAME_HEAD.get(r["head"], r["head"]) for r in (a, b)]
    if None not in heads and heads[0] != heads[1]:
        return a["head"], b["head"]
    if a["ham"] is not None and b["ham"] is not None:
        x, y = a["ham"], b["ham"]
        keys = [k for k in x if k in y and k not in NOT_COMPARED and x[k] != y[k]]
        keys = ["type"] if x.get("type") != y.get("type") else keys
        if keys:
            return tuple(
                "ham " + ", ".join(f"{k}={h.get(k)!r}" for k in keys) if h else "no ham"
                for h in (x, y)
            )
    if None not in (a["classes"], b["classes"]) and a["classes"] != b["classes"]:
        return f"num_classes={a['classes']}", f"num_classes={b['classes']}"
    if a["names"] and b["names"] and list(a["names"]) != list(b["names"]):
        i = next(i for i, (x, y) in enumerate(zip(a["names"], b["names"])) if x != y)
        return f"class {i} {a['names'][i]!r}", f"class {i} {b['names'][i]!r}"
    return None


def config_head(cfg: Config) -> Optional[dict]:
    """:func:`head_record` of ``cfg``'s decode head, built (random weights; mmseg's
    ``LightHamHead`` as ``HamLightHead``, which maps its ``ham_kwargs``); None if none."""
    if not isinstance(head := cfg.get("model", {}).get("decode_head"), dict):
        return None  # e.g. a cascade's list of heads
    with warnings.catch_warnings():  # mmseg's loss builders warn about training options
        warnings.simplefilter("ignore")
        return head_record(MODELS.build(dict(head, type=SAME_HEAD.get(head["type"], head["type"]))))


def check_trained_head(cfg: Config, checkpoint: str, fix: str) -> None:
    """Raise one line if the training config stored in ``checkpoint`` (``meta['cfg']``) builds
    another decode head, ham or class count than ``cfg`` (the weights: the strict load's)."""
    loaded = load_checkpoint_file(checkpoint)
    stored = (loaded.get("meta") or {}).get("cfg") if isinstance(loaded, dict) else None
    try:
        stored = stored and Config.fromstring(stored, ".py")
        trained = stored and config_head(stored)
    except KeyError:  # a type of another code base (the strict load compared the weights)
        trained = None
    if found := trained and differences(trained, config_head(cfg)):
        head = stored.model.decode_head
        entry = next((f"'s {k}" for k in ("ham_cfg", "ham_kwargs") if head.get(k)), "")
        raise UsageError(
            f"{checkpoint} was trained with decode_head {found[0]} (its stored config{entry}) "
            f"but the config has {found[1]}: {fix}"
        )


def deploy_metadata(segmentor: nn.Module, seed: int = 0, bake: bool = False) -> dict[str, Any]:
    """The ``hamseg`` metadata_prop (JSON): what a runner does around the graph as mmseg's
    inference (preprocessor, test pipeline's Resize, test_cfg), classes, palette, head, ham."""
    cfg = segmentor.cfg
    classes, palette = class_info(segmentor)
    record = head_record(segmentor.decode_head)
    pre = cfg.model.get("data_preprocessor", {})
    pipeline = cfg.get("test_pipeline") or cfg.get("test_dataloader", {}).get("dataset", {})
    pipeline = pipeline if isinstance(pipeline, list) else pipeline.get("pipeline", [])
    resize = next((dict(t) for t in pipeline if "Resize" in str(t.get("type"))), None)
    pad, test_cfg = pre.get("test_cfg") or {}, cfg.model.get("test_cfg") or {}
    return dict(
        mean=[float(v) for v in pre.get("mean", (0, 0, 0))],
        std=[float(v) for v in pre.get("std", (1, 1, 1))],
        bgr_to_rgb=bool(pre.get("bgr_to_rgb", False)),
        pad_val=float(pre.get("pad_val", 0)),
        pad=dict(size=pad.get("size"), size_divisor=pad.get("size_divisor")),
        resize=resize and dict(scale=resize.get("scale"), keep_ratio=resize.get("keep_ratio")),
        test_cfg={k: test_cfg.get(k) for k in ("mode", "crop_size", "stride")},
        input="bgr 0-255" if bake else "normalised",
        classes=classes,
        palette=palette,
        head=record["head"],
        ham=dict(record["ham"], eval_seed=seed) if record["ham"] else None,
        hamseg_version=__version__,
    )


def seed_hams(model: nn.Module, seed: int) -> None:
    """Set ``eval_seed`` of every hamseg ham; UsageError for mmseg's (nothing to seed)."""
    for name, module in model.named_modules():
        if isinstance(module, Matrix_Decomposition_2D_Base):
            raise UsageError(
                f"{name} is mmseg's {type(module).__name__}: it draws its dictionary at random "
                "(at every forward, or the first), so no graph computes what the model evaluates;"
                " set the config's decode_head type='HamLightHead' (hamseg's SegNeXt head: "
                "mmseg's checkpoints load strictly, a seeded dictionary) and export again"
            )
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
    N/H/W dynamic unless ``dynamic`` is False (K static), hams seeded, :func:`deploy_metadata`;
    returns the exported module. UsageError (one line, nothing left at ``out``) otherwise."""
    require_deploy()
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
        raise UsageError(f"{out}: the graph draws random numbers, {ops}; the file was removed")
    import onnx

    graph, meta = onnx.load(out), json.dumps(deploy_metadata(segmentor, seed, bake))
    graph.graph.output[0].type.tensor_type.shape.dim[1].dim_value = classes  # not a symbol
    onnx.helper.set_model_props(graph, {"hamseg": meta})
    onnx.save(graph, out)
    return model


@dataclass(frozen=True)
class Verification:
    """ONNX Runtime against PyTorch on one random input."""

    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    argmax_agreement: float

    def line(self) -> str:
        return (
            f"{'x'.join(map(str, self.shape))}: max |diff| {self.max_abs:.3g}, relative "
            f"{self.max_rel:.3g}, argmax agreement {100 * self.argmax_agreement:.3f}% -> "
            f"{'ok' if self.max_rel <= TOLERANCE else f'FAILED (> {TOLERANCE:g})'}"
        )


def onnx_session(path: str, threads: int = 0) -> Any:
    """An ONNX Runtime CPU session, ``threads`` intra-op threads (0: ORT's choice)."""
    import onnxruntime as ort

    (options := ort.SessionOptions()).intra_op_num_threads = threads
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def verify_onnx(
    model: nn.Module, path: str, shapes: Sequence[Sequence[int]], seed: int = 1
) -> list[Verification]:
    """Compare ONNX Runtime's logits with ``model``'s on a random input of each shape."""
    session = onnx_session(path)
    results = []
    for i, shape in enumerate(shapes):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + i))
        with torch.no_grad():
            ref = model(x).numpy()
        got = session.run(None, {"input": x.numpy()})[0]
        diff, top = float(np.abs(got - ref).max()), max(float(np.abs(ref).max()), 1e-12)
        agree = float((got.argmax(1) == ref.argmax(1)).mean())
        results.append(Verification(tuple(shape), diff, diff / top, agree))
    return results


def use_onnxruntime(
    segmentor: nn.Module, onnx_file: str, threads: int = 0, names_from: Optional[tuple] = None
) -> nn.Module:
    """Make ``segmentor`` compute ``encode_decode`` with ONNX Runtime (in place; returned). Its
    head, ham and classes must be the graph's and, with ``names_from=('checkpoint', FILE)``, the
    checkpoint's. A static graph takes other sizes resized to its own (the logits back)."""
    kind, path = names_from or ("model", "")
    require_file(onnx_file, "ONNX model")
    if kind == "checkpoint" and path:
        check_trained_head(segmentor.cfg, path, "pass the config it was trained with")
    try:
        session = onnx_session(onnx_file, threads)
    except Exception as err:  # onnxruntime's own exception types
        raise UsageError(
            f"{onnx_file}: ONNX Runtime cannot load it ({one_line(err, 200)})"
        ) from None
    info = json.loads(session.get_modelmeta().custom_metadata_map.get("hamseg", "{}"))
    if info.get("input", "normalised") != "normalised":
        raise UsageError(
            f"{onnx_file} takes the raw image (exported with --bake-preprocess): run it with "
            "tools/deploy/onnx_runner.py, or export without --bake-preprocess for this backend"
        )
    classes, _ = class_info(segmentor)
    channels = session.get_outputs()[0].shape[1]
    channels = channels if isinstance(channels, int) else None
    graph = dict(
        head=info.get("head"), ham=info.get("ham"), classes=channels, names=info.get("classes")
    )
    if found := differences(graph, head_record(segmentor.decode_head, classes)):
        named = f"{kind} {path}" if path else kind
        raise UsageError(
            f"{onnx_file} was exported from decode_head {found[0]} but the {named} has "
            f"{found[1]} ({first_items(classes, 4)}): export the model of this {kind} "
            f"(tools/deploy/export_onnx.py), or pass the {kind} {onnx_file} was exported from"
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
