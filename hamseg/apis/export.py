"""Export a segmentor to ONNX with a deterministic dictionary, and verify it with ONNX Runtime.

The exported graph takes what mmseg's data preprocessor produces, the normalised float32
(N, 3, H, W) tensor, and returns ``EncoderDecoder.encode_decode``'s logits (N, num_classes, H, W).
Every ham's evaluation dictionary is seeded (``eval_seed = seed``): the dictionary is drawn
once, outside the trace, and enters the graph as a constant
(:meth:`hamseg.models.decompositions.MatrixDecomposition2D._seeded_bases`), so the ONNX model
computes exactly what the PyTorch model computes with that ``eval_seed``. NMF and VQ unroll into
MatMul, Softmax, ReduceSum and Div; CD's ridge solve, which has no ONNX operator, is recorded as
a Gauss-Jordan inverse of its r x r matrix (:mod:`hamseg.models.ridge_solve`). mmseg's own
``LightHamHead`` is refused up front (:class:`ExportError`): its NMF2D draws a new random
dictionary at every forward (hamseg's ``HamLightHead`` takes its place). Whatever the model, a
graph that still contains a random operator (:data:`RANDOM_OPS`) is refused after the export
and its file removed. The TorchScript exporter (``dynamo=False``) is
used: it records the eager model as evaluated.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from mmseg.models.decode_heads.ham_head import Matrix_Decomposition_2D_Base
from torch import Tensor, nn

from hamseg.models.decompositions import MatrixDecomposition2D
from hamseg.utils.errors import UsageError
from hamseg.utils.messages import one_line

__all__ = [
    "ExportError",
    "RANDOM_OPS",
    "SegmentorLogits",
    "Verification",
    "check_export_options",
    "export_onnx",
    "onnx_session",
    "opset_range",
    "random_operators",
    "require_deploy",
    "seed_hams",
    "verify_onnx",
]

#: Relative logit difference above which --verify fails.
TOLERANCE = 1e-4
#: ONNX operators that draw random numbers: a graph holding one computes something else at every
#: run, never exactly the model that was evaluated.
RANDOM_OPS = frozenset(
    {
        "Bernoulli",
        "Multinomial",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
    }
)


class ExportError(UsageError):
    """The model cannot be exported (one line: what and why)."""


def opset_range() -> tuple[int, int]:
    """The opsets torch's ONNX exporter takes (7 to 23 in torch 2.14; its TorchScript exporter,
    ``dynamo=False``, is tested by torch up to 20 and warns above, but the demo models export
    and verify at 21 and 23 too); outside, torch refuses."""
    from torch.onnx import _constants

    low = getattr(_constants, "ONNX_MIN_OPSET", 7)
    high = getattr(_constants, "ONNX_MAX_OPSET", 20)
    return int(low), int(high)


def check_export_options(shape: Sequence[int], opset: int) -> None:
    """Raise one line naming ``--shape`` or ``--opset`` for values no export can take.

    Raises:
        ExportError: A height or width below 1, or an opset outside :func:`opset_range`.
    """
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


def require_deploy() -> None:
    """Raise one line naming the extra if onnx or onnxruntime is not installed."""
    missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"{' and '.join(missing)} not installed: pip install 'hamseg[deploy]' "
            "(or pip install onnx onnxruntime onnxscript)"
        )


class SegmentorLogits(nn.Module):
    """``segmentor.encode_decode(x)``: normalised (N, 3, H, W) -> logits (N, K, H, W)."""

    def __init__(self, segmentor: nn.Module) -> None:
        super().__init__()
        self.segmentor = segmentor

    def forward(self, x: Tensor) -> Tensor:
        meta = [dict(img_shape=tuple(x.shape[2:]), pad_shape=tuple(x.shape[2:]))] * x.shape[0]
        return self.segmentor.encode_decode(x, meta)


def seed_hams(model: nn.Module, seed: int) -> list[str]:
    """Set ``eval_seed`` of every ham; raise for one that cannot be exported.

    Returns:
        The names of the hams.

    Raises:
        ExportError: One of mmseg's own hams (``LightHamHead``'s NMF2D: nothing to seed, a new
            dictionary at every forward).
    """
    modules = dict(model.named_modules())
    names = []
    for name, module in modules.items():
        if isinstance(module, Matrix_Decomposition_2D_Base):
            raise ExportError(_mmseg_ham_message(name, module, modules))
        if not isinstance(module, MatrixDecomposition2D):
            continue
        module.eval_seed = seed
        names.append(name)
    return names


def _mmseg_ham_message(name: str, ham: nn.Module, modules: dict[str, nn.Module]) -> str:
    """The one line refusing mmseg's ham ``name`` (NMF2D of ``LightHamHead``), naming its head
    and what to use instead."""
    parts = name.split(".")
    heads = [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
    head = next((h for h in heads if type(modules[h]).__name__ == "LightHamHead"), None)
    draws = (
        "draws a new random dictionary at every forward"
        if getattr(ham, "rand_init", True)
        else "draws its dictionary at its first forward, not from the checkpoint"
    )
    if head is None:
        return (
            f"{name} is mmseg's {type(ham).__name__}: it {draws}, so no exported graph computes "
            "what the model evaluates; build the head on a hamseg ham (NMF, VQ) instead"
        )
    return (
        f"{head} is mmseg's LightHamHead: its NMF2D ({name}) {draws}, so no exported graph "
        "computes what the model evaluates; set the config's decode_head type='HamLightHead' "
        "(hamseg's SegNeXt head: same parameter names, mmseg's checkpoints load strictly, a "
        "seeded dictionary) and export again"
    )


def random_operators(path: str) -> dict[str, str]:
    """The random operators (:data:`RANDOM_OPS`) of the ONNX graph in ``path``, with subgraphs
    (If, Loop, Scan bodies) and local functions: op type -> name of its first node."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    found: dict[str, str] = {}
    graphs = [model.graph, *model.functions]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            if node.op_type in RANDOM_OPS:
                found.setdefault(node.op_type, node.name or "(unnamed)")
            for attr in node.attribute:
                graphs += [attr.g] if attr.HasField("g") else []
                graphs += list(attr.graphs)
    return dict(sorted(found.items()))


def export_onnx(
    segmentor: nn.Module,
    out: str,
    shape: tuple[int, int],
    dynamic: bool = False,
    opset: int = 17,
    seed: int = 0,
    batch: int = 1,
) -> SegmentorLogits:
    """Export ``segmentor`` (eval mode) to ``out``.

    Args:
        segmentor: An mmseg ``EncoderDecoder`` (e.g. from :func:`hamseg.apis.init_segmentor`).
        out: The .onnx file to write.
        shape: (H, W) of the example input.
        dynamic: Make N, H and W dynamic axes.
        opset: ONNX opset.
        seed: ``eval_seed`` of every ham (the dictionary in the graph).
        batch: N of the example input.

    Returns:
        The exported PyTorch module (for :func:`verify_onnx`).

    Raises:
        ExportError: A shape or opset no export takes (:func:`check_export_options`), an
            unsupported ham or head, the backbone cannot take ``shape``, the exporter cannot
            record the model at ``opset``, or the graph holds a random operator
            (:func:`random_operators`; ``out`` is then removed).
    """
    require_deploy()
    check_export_options(shape, opset)
    seed_hams(segmentor, seed)
    model = SegmentorLogits(segmentor.eval()).eval()
    example = torch.randn(batch, 3, *shape, generator=torch.Generator().manual_seed(seed))
    try:
        with torch.no_grad():
            model(example)  # eager: draws the seeded dictionaries outside any trace
    except RuntimeError as err:
        raise ExportError(
            f"the model cannot take an input of {shape[0]}x{shape[1]}: {one_line(err)}"
        ) from None
    axes = {0: "batch", 2: "height", 3: "width"}
    existed = os.path.exists(out)
    try:
        with torch.no_grad():
            torch.onnx.export(
                model,
                (example,),
                out,
                dynamo=False,
                opset_version=opset,
                input_names=["input"],
                output_names=["logits"],
                dynamic_axes={"input": axes, "logits": axes} if dynamic else None,
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
    found = random_operators(out)
    if found:
        os.remove(out)
        ops = ", ".join(f"{op} (at {node})" for op, node in found.items())
        raise ExportError(
            f"{out}: the exported graph draws random numbers, {ops}: every run would compute "
            "something else and none what the model evaluated; the file was removed. Use "
            "hamseg's heads and hams, whose dictionaries the exporter seeds (docs/deploy.md)"
        )
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
        return (
            f"{'x'.join(map(str, self.shape))}: max |diff| {self.max_abs:.3g}, relative "
            f"{self.max_rel:.3g}, argmax agreement {100 * self.argmax_agreement:.3f}%"
            f" -> {'ok' if self.ok else f'FAILED (> {TOLERANCE:g})'}"
        )


def onnx_session(path: str, threads: int = 0) -> Any:
    """An ONNX Runtime CPU session with full graph optimisation."""
    require_deploy()
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
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
        results.append(
            Verification(
                tuple(shape),
                float(diff.max()),
                float(diff.max() / max(np.abs(ref).max(), 1e-12)),
                float((got.argmax(1) == ref.argmax(1)).mean()),
            )
        )
    return results
