"""ONNX export: normalised (or, baked, raw BGR) (N, 3, H, W) -> logits (N, K, H, W), seeded hams,
a runner's metadata; its verification, and running it in mmseg (docs/deploy.md)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import linecache
import os
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from mmseg.models.decode_heads.ham_head import Matrix_Decomposition_2D_Base
from torch import Tensor, nn

from hamseg.models.decompositions import MatrixDecomposition2D
from hamseg.utils.errors import UsageError, require_file
from hamseg.utils.messages import first_items, one_line
from hamseg.version import __version__

from .head_record import HeadRecord, differences, of_head
from .inference import class_info

TOLERANCE = 1e-4  #: relative logit difference above which --verify fails
#: ONNX operators that draw random numbers: a graph with one computes something else every run.
RANDOM_OPS = set("Bernoulli Multinomial RandomNormal RandomNormalLike RandomUniform".split())
RANDOM_OPS |= {"RandomUniformLike"}
#: The lowest opset that expresses every segmentor: mmseg resizes the logits (and SegNeXt's head
#: its levels) bilinearly with half-pixel centres, ONNX's Resize has them from opset 11; below
#: it torch writes an Upsample/Resize that computes something else (the demo model's argmax
#: agreed with PyTorch on 68% of pixels at opsets 9 and 10).
MIN_OPSET = 11
#: What torch's exporter warns when an operator it writes may not compute what PyTorch does.
MAY_NOT_MATCH = "might cause results to not match"
#: Checks on shapes that are constants of every trace, by their source line: the ham's channel
#: split, D and the seeded dictionaries' cache key (hamseg/models/decompositions.py), PolyNL's
#: channel check (the lab's tools/lab/models/poly_nl.py), torch's
#: "more than one value per channel" check of a norm (torch/nn/functional.py, SegNeXt's
#: GroupNorm), and the sizes mmseg's resize reads only to decide whether to warn about
#: align_corners (mmseg/models/utils/wrappers.py, HamNet). Their TracerWarnings are not printed;
#: any other TracerWarning is.
EXPECTED_CONSTANTS = (
    "if C % self.S:",
    "X.shape[1] != self.D",
    "cached[0] != key",
    "x.shape[1] != self.in_channels",
    "if size_prods == 1:",
    "input_h, input_w = tuple(int(x) for x in input.shape[2:])",
    "output_h, output_w = tuple(int(x) for x in size)",
)


class ExportError(UsageError):
    """The model cannot be exported (one line: what and why)."""


def opset_range() -> tuple[int, int]:
    """The opsets torch's ONNX exporter takes (7 to 23 in torch 2.14)."""
    from torch.onnx import _constants

    low, high = (getattr(_constants, f"ONNX_{e}_OPSET", d) for e, d in (("MIN", 7), ("MAX", 20)))
    return int(low), int(high)


def check_export_options(shape: Sequence[int], opset: int) -> None:
    """Raise one line naming ``--shape`` or ``--opset`` for values no export can take."""
    if len(shape) != 2 or any(int(v) != v or v < 1 for v in shape):
        raise ExportError(
            f"--shape {' '.join(map(str, shape))}: H and W must be positive integers, the size "
            "of the example input (e.g. --shape 512 512)"
        )
    low, high = opset_range()
    if not low <= opset <= high:
        raise ExportError(
            f"--opset {opset}: torch {torch.__version__.split('+')[0]}'s ONNX exporter "
            f"supports opsets {low} to {high}; use one of them (the default is 17)"
        )
    if opset < MIN_OPSET:
        raise ExportError(
            f"--opset {opset}: ONNX cannot express mmseg's bilinear resize (half-pixel "
            f"centres) below opset {MIN_OPSET}, so the graph would compute something else; use "
            f"{MIN_OPSET} to {high} (the default is 17)"
        )


def require_deploy() -> None:
    """Raise one line naming the extra if onnx or onnxruntime is not installed."""
    if missing := [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]:
        raise UsageError(
            f"{' and '.join(missing)} not installed: pip install 'hamseg[deploy]' (or pip "
            "install onnx onnxruntime onnxscript)"
        )


class SegmentorLogits(nn.Module):
    """``segmentor.encode_decode(x)``: normalised (N, 3, H, W) -> logits (N, K, H, W); with
    ``bake``, x is the raw BGR image and the channel swap and mean/std are in the graph."""

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


def deploy_metadata(segmentor: nn.Module, seed: int = 0, bake: bool = False) -> dict[str, Any]:
    """The ``hamseg`` metadata_prop of an export (JSON): what a runner does before the graph,
    mmseg's data preprocessor (mean, std in RGB order if ``bgr_to_rgb``; test-time pad
    ``size``/``size_divisor`` with ``pad_val``) and the test pipeline's ``Resize`` as mmseg's
    ``inference_model`` runs it (``scale``, ``keep_ratio``); classes, palette; the decode
    head's type and its ham's settings as built (:func:`~.head_record.ham_settings`)."""
    cfg = segmentor.cfg
    classes, palette = class_info(segmentor)
    record = of_head(segmentor.decode_head, "")
    pre = cfg.model.get("data_preprocessor", {})
    pipeline = cfg.get("test_pipeline") or cfg.get("test_dataloader", {}).get("dataset", {})
    pipeline = pipeline if isinstance(pipeline, list) else pipeline.get("pipeline", [])
    resize = next((dict(t) for t in pipeline if "Resize" in str(t.get("type"))), None)
    pad = dict(pre.get("test_cfg") or {})
    return dict(
        mean=[float(v) for v in pre.get("mean", (0, 0, 0))],
        std=[float(v) for v in pre.get("std", (1, 1, 1))],
        bgr_to_rgb=bool(pre.get("bgr_to_rgb", False)),
        pad_val=float(pre.get("pad_val", 0)),
        pad=dict(size=pad.get("size"), size_divisor=pad.get("size_divisor")),
        resize=resize and dict(scale=resize.get("scale"), keep_ratio=resize.get("keep_ratio")),
        input="bgr 0-255" if bake else "normalised",
        classes=classes,
        palette=palette,
        head=record.head,
        ham=dict(record.ham, eval_seed=seed) if record.ham else None,
        hamseg_version=__version__,
    )


def of_metadata(info: dict, source: str) -> HeadRecord:
    """The head record in a graph's ``hamseg`` metadata (a graph written before 0.2 records no
    head, and its ``ham`` as configured: only its class names are compared)."""
    names = tuple(info["classes"]) if info.get("classes") else None
    if "head" not in info:
        return HeadRecord(names=names, source=source)
    ham = info.get("ham") or {}
    return HeadRecord(info["head"], ham, len(names) if names else None, names, source)


@contextlib.contextmanager
def _captured_output() -> Any:
    """Send fd 1/2 (torch's IR dumps) to a file and record Python's warnings; yields [its text,
    the warnings] after."""
    text: list[Any] = []
    with tempfile.TemporaryFile("w+") as tmp, warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=f".*{MAY_NOT_MATCH}")
        sys.stdout.flush(), sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        os.dup2(tmp.fileno(), 1), os.dup2(tmp.fileno(), 2)
        try:
            yield text
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd), os.close(copy)
            tmp.seek(0)
            text += [tmp.read(), list(caught)]


def _expected(warning: warnings.WarningMessage) -> bool:
    """Whether ``warning`` is a TracerWarning of one of :data:`EXPECTED_CONSTANTS`."""
    if warning.category is not torch.jit.TracerWarning:
        return False
    line = linecache.getline(warning.filename, warning.lineno)
    return any(source in line for source in EXPECTED_CONSTANTS)


def finish_graph(path: str, classes: int, metadata: dict[str, str]) -> None:
    """Fix ``logits``' class dimension to ``classes`` and set ``metadata_props``."""
    import onnx

    model = onnx.load(path)
    for out in (o for o in model.graph.output if o.name == "logits"):
        out.type.tensor_type.shape.dim[1].dim_value = classes  # clears the symbol
    onnx.helper.set_model_props(model, metadata)  # replaces any
    onnx.save(model, path)


def seed_hams(model: nn.Module, seed: int) -> list[str]:
    """Set ``eval_seed`` of every hamseg ham, return their names; raise :class:`ExportError`
    for one of mmseg's hams (``LightHamHead``'s NMF2D: a new dictionary at every forward)."""
    modules = dict(model.named_modules())
    names = []
    for name, module in modules.items():
        if isinstance(module, Matrix_Decomposition_2D_Base):
            raise ExportError(_mmseg_ham_message(name, module, modules))
        if isinstance(module, MatrixDecomposition2D):
            module.eval_seed = seed
            names.append(name)
    return names


def _mmseg_ham_message(name: str, ham: nn.Module, modules: dict[str, nn.Module]) -> str:
    parts = name.split(".")
    heads = (".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1))
    head = next((h for h in heads if type(modules[h]).__name__ == "LightHamHead"), None)
    draws = "draws its dictionary at its first forward, not from the checkpoint"
    draws = "draws a new random dictionary at every forward" if ham.rand_init else draws
    fix = "build the head on a hamseg ham (NMF, VQ) instead"
    what = f"{name} is mmseg's {type(ham).__name__}: it {draws}"
    if head is not None:
        what = f"{head} is mmseg's LightHamHead: its NMF2D ({name}) {draws}"
        fix = (
            "set the config's decode_head type='HamLightHead' (hamseg's SegNeXt head: same "
            "parameter names, mmseg's checkpoints load strictly, a seeded dictionary) and export "
            "again"
        )
    return f"{what}, so no exported graph computes what the model evaluates; {fix}"


def random_operators(path: str) -> dict[str, str]:
    """Op type -> first node name of each :data:`RANDOM_OPS` operator in the ONNX file,
    subgraphs (If, Loop, Scan bodies) and local functions included."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    found = {}
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
    dynamic: bool = False,
    opset: int = 17,
    seed: int = 0,
    batch: int = 1,
    bake: bool = False,
) -> SegmentorLogits:
    """Export a CPU segmentor to ``out`` (TorchScript exporter) on a (``batch``, 3, *``shape``)
    example, N/H/W dynamic if ``dynamic`` (K static), hams seeded, :func:`deploy_metadata`, the
    normalisation in the graph if ``bake``; returns the exported module. TracerWarnings of
    :data:`EXPECTED_CONSTANTS` are not printed.

    Raises:
        ExportError: Bad options, an unsupported ham or shape, an operator missing at
            ``opset``, an operator torch says may not match PyTorch, or a graph with a random
            operator (``out`` is then removed).
    """
    require_deploy()
    check_export_options(shape, opset)
    seed_hams(segmentor, seed)
    model = SegmentorLogits(segmentor.eval(), bake).eval()
    example = torch.randn(batch, 3, *shape, generator=torch.Generator().manual_seed(seed))
    example = example * 50 + 128 if bake else example
    try:
        with torch.no_grad():
            classes = model(example).shape[1]  # eager: draws the seeded dictionaries
    except RuntimeError as err:
        raise ExportError(
            f"the model cannot take an input of {shape[0]}x{shape[1]}: {one_line(err)}"
        ) from None
    axes = dict.fromkeys(["input", "logits"], {0: "batch", 2: "height", 3: "width"})
    existed = os.path.exists(out)
    try:
        with torch.no_grad(), _captured_output() as printed:
            torch.onnx.export(
                model,
                (example,),
                out,
                dynamo=False,
                opset_version=opset,
                input_names=["input"],
                output_names=["logits"],
                dynamic_axes=axes if dynamic else None,
            )
    except torch.onnx.errors.OnnxExporterError as err:  # e.g. an operator missing at this opset
        if not existed and os.path.exists(out):
            os.remove(out)
        low, high = opset_range()
        reason = one_line(err).split(" Please feel free to request support")[0]
        higher = f"; try a higher one, up to {high}" if opset < high else ""
        raise ExportError(
            f"--opset {opset}: the ONNX exporter cannot record this model at opset {opset}: "
            f"{reason[:300]} (torch's exporter supports opsets {low} to {high}{higher})"
        ) from None
    output, caught = printed
    if mismatch := next((w for w in caught if MAY_NOT_MATCH in str(w.message)), None):
        os.remove(out)
        raise ExportError(
            f"--opset {opset}: torch's exporter says the graph may not compute what PyTorch "
            f"does ({one_line(mismatch.message, 200)}); the file was removed: use a higher "
            f"opset, up to {opset_range()[1]}"
        )
    sys.stderr.write(output)  # what torch printed for a successful export
    for w in (w for w in caught if not _expected(w)):
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if found := random_operators(out):
        os.remove(out)
        ops = ", ".join(f"{op} (at {node})" for op, node in found.items())
        raise ExportError(
            f"{out}: the exported graph draws random numbers, {ops}: every run would compute "
            "something else and none what the model evaluated; the file was removed. Use "
            "hamseg's heads and hams, whose dictionaries the exporter seeds (docs/deploy.md)"
        )
    finish_graph(out, classes, {"hamseg": json.dumps(deploy_metadata(segmentor, seed, bake))})
    return model


@dataclass(frozen=True)
class Verification:
    """ONNX Runtime against PyTorch on one random input."""

    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    argmax_agreement: float

    @property
    def ok(self) -> bool:
        return self.max_rel <= TOLERANCE

    def line(self) -> str:
        verdict = "ok" if self.ok else f"FAILED (> {TOLERANCE:g})"
        return (
            f"{'x'.join(map(str, self.shape))}: max |diff| {self.max_abs:.3g}, relative "
            f"{self.max_rel:.3g}, argmax agreement {100 * self.argmax_agreement:.3f}% -> {verdict}"
        )


def onnx_session(path: str, threads: int = 0) -> Any:
    """An ONNX Runtime CPU session: full optimisation, ``threads`` intra-op threads (0: ORT's)."""
    require_deploy()
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def verify_onnx(
    model: nn.Module, path: str, shapes: Sequence[tuple[int, int, int, int]], seed: int = 1
) -> list[Verification]:
    """Compare ONNX Runtime's logits with ``model``'s on a random input of each shape."""
    session = onnx_session(path)
    results = []
    for i, shape in enumerate(shapes):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + i))
        with torch.no_grad():
            ref = model(x).numpy()
        got = session.run(None, {"input": x.numpy()})[0]
        diff = np.abs(got - ref)
        rel = float(diff.max() / max(np.abs(ref).max(), 1e-12))
        agree = float((got.argmax(1) == ref.argmax(1)).mean())
        results.append(Verification(tuple(shape), float(diff.max()), rel, agree))
    return results


def use_onnxruntime(
    segmentor: nn.Module,
    onnx_file: str,
    threads: int = 0,
    names_from: Optional[tuple[str, str]] = None,
) -> nn.Module:
    """Make ``segmentor`` compute ``encode_decode`` with ONNX Runtime (in place; returned); the
    rest stays mmseg's. The graph's class count must be the segmentor's (checked from its shape,
    else at each run), and the head its metadata records (:func:`of_metadata`: head type, ham
    settings, class names) the segmentor's; ``names_from``: (kind, file) for the messages.

    Raises:
        UsageError: A missing or unloadable or baked file, another class count or head, or an
            input size the graph does not take.
    """
    require_file(onnx_file, "ONNX model")
    try:
        session = onnx_session(onnx_file, threads)
    except UsageError:
        raise
    except Exception as err:  # onnxruntime's own exception types
        raise UsageError(
            f"{onnx_file}: ONNX Runtime cannot load it ({one_line(err, 200)}); export the model "
            "with tools/deploy/export_onnx.py"
        ) from None
    inputs = session.get_inputs()
    outputs = session.get_outputs()
    info = json.loads(session.get_modelmeta().custom_metadata_map.get("hamseg", "{}"))
    if info.get("input", "normalised") != "normalised":
        raise UsageError(
            f"{onnx_file} takes the raw image (exported with --bake-preprocess): run it with "
            "tools/deploy/onnx_runner.py, or export without --bake-preprocess for this backend"
        )
    if len(inputs) != 1:
        raise UsageError(
            f"{onnx_file}: the graph takes {len(inputs)} inputs, not the one image tensor of "
            "tools/deploy/export_onnx.py"
        )
    (graph_input,) = inputs
    logits_at = next((i for i, o in enumerate(outputs) if o.name == "logits"), 0)
    classes, _ = class_info(segmentor)
    kind, path = names_from or ("model", "")
    named = f"{kind} {path}" if path else kind
    fix = (
        f"export the model of this {kind} (tools/deploy/export_onnx.py), or pass the {kind} "
        f"{onnx_file} was exported from"
    )

    def check_classes(channels: Any) -> None:
        if channels != len(classes):
            raise UsageError(
                f"{onnx_file} gives {channels} classes but the {named} names {len(classes)} "
                f"({first_items(classes, 8)}): {fix}"
            )

    if len(shape := outputs[logits_at].shape if outputs else []) > 1 and isinstance(shape[1], int):
        check_classes(shape[1])
    graph = of_metadata(info, onnx_file)
    if found := differences(graph, of_head(segmentor.decode_head, named, classes)):
        raise UsageError(
            f"{onnx_file} was exported from decode_head {found[0]} but the {named} has "
            f"{found[1]}: {fix}"
        )

    def encode_decode(inputs: Tensor, batch_img_metas: Any = None) -> Tensor:
        array = inputs.detach().cpu().numpy().astype(np.float32)
        try:
            logits = session.run(None, {graph_input.name: array})[logits_at]
        except Exception as err:  # onnxruntime's own exception types
            raise UsageError(
                f"{onnx_file}: ONNX Runtime cannot run an input of shape {tuple(array.shape)} "
                f"(the graph takes {graph_input.shape}; export with --dynamic for any size): "
                f"{one_line(err, 200)}"
            ) from None
        check_classes(logits.shape[1] if logits.ndim > 1 else None)
        return torch.from_numpy(logits).to(inputs.device)

    segmentor.encode_decode = encode_decode
    return segmentor
