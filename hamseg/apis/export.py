"""ONNX export with its checks, fp16/int8 copies checked on the val split, and ONNX Runtime as a
segmentor's network (docs/deploy.md)."""

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
from mmengine.registry import init_default_scope
from mmseg.evaluation.metrics import IoUMetric
from mmseg.registry import DATASETS, MODELS
from torch import Tensor, nn

from hamseg.compat.checkpoint import load_checkpoint_file
from hamseg.models import MatrixDecomposition2D
from hamseg.utils.config import leaf_datasets
from hamseg.utils.errors import UsageError, one_line, require_file
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
        self.segmentor, self.bake = segmentor, deploy_metadata(segmentor) if bake else None
        for key in ("mean", "std") if bake else ():
            self.register_buffer(key, torch.tensor(self.bake[key]).view(1, 3, 1, 1))

    def forward(self, x: Tensor) -> Tensor:
        if self.bake:
            x = ((x.flip(1) if self.bake["bgr_to_rgb"] else x) - self.mean) / self.std
        meta = [dict(img_shape=tuple(x.shape[2:]), pad_shape=tuple(x.shape[2:]))] * x.shape[0]
        return self.segmentor.encode_decode(x, meta)


def head_record(head: nn.Module, classes: Optional[list] = None) -> dict[str, Any]:
    """A built decode head's type, class names and first ham's constructor arguments."""
    ham = next((m for m in head.modules() if isinstance(m, MatrixDecomposition2D)), None)
    classes = list(classes or [f"class {i}" for i in range(head.num_classes)])
    record = dict(head=type(head).__name__, classes=classes)
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
    p, q = a.get("classes") or [], b.get("classes") or []
    if p and q and len(p) != len(q):
        return f"num_classes={len(p)}", f"num_classes={len(q)}"
    i = next((i for i, (x, y) in enumerate(zip(p, q)) if x != y), None)
    return None if i is None else (f"class {i} {p[i]!r}", f"class {i} {q[i]!r}")


def check_trained_head(cfg: Config, checkpoint: str, fix: str) -> None:
    """One line if the config stored in ``checkpoint`` builds another head, ham or class count."""
    loaded = load_checkpoint_file(checkpoint)
    stored = (loaded.get("meta") or {}).get("cfg") if isinstance(loaded, dict) else None
    try:
        heads = [Config.fromstring(stored, ".py").model.decode_head, cfg.model.decode_head]
        with warnings.catch_warnings():  # mmseg's loss builders warn about training options
            warnings.simplefilter("ignore")
            built = [MODELS.build(dict(h, type=SAME_HEAD.get(h["type"], h["type"]))) for h in heads]
    except (AttributeError, KeyError, TypeError):  # none stored, a cascade, another code base's
        return
    if found := differences(*map(head_record, built)):
        entry = next((f"'s {k}" for k in ("ham_cfg", "ham_kwargs") if heads[0].get(k)), "")
        raise UsageError(
            f"{checkpoint} was trained with decode_head {found[0]} (its stored config{entry}) "
            f"but the config has {found[1]}: {fix}"
        )


def deploy_metadata(segmentor: nn.Module, bake: bool = False) -> dict[str, Any]:
    """The graph's ``hamseg`` metadata: what a runner does around it as mmseg's inference does."""
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


def random_operators(model: Any) -> dict[str, str]:
    """Op type -> first node of each :data:`RANDOM_OPS` operator in an ONNX model, subgraphs too."""
    found, graphs = {}, [model.graph, *model.functions]
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
    """Export a CPU segmentor's logits (N, H, W dynamic unless not ``dynamic``), hams seeded;
    returns the module exported, or one line and no file at ``out``."""
    check_export_options(shape, opset)
    import onnx

    for ham in (m for m in segmentor.modules() if isinstance(m, MatrixDecomposition2D)):
        ham.eval_seed = seed  # its dictionaries enter the graph as constants
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
    if found := random_operators(graph := onnx.load(out)):
        os.remove(out)
        ops = ", ".join(f"{op} (at {node})" for op, node in found.items())
        raise UsageError(
            f"{out}: the graph draws random numbers, {ops}; the file was removed (mmseg's "
            "LightHamHead draws its dictionary at random: use type='HamLightHead')"
        )
    graph.graph.output[0].type.tensor_type.shape.dim[1].dim_value = classes  # not a symbol
    onnx.helper.set_model_props(graph, {"hamseg": json.dumps(deploy_metadata(segmentor, bake))})
    onnx.save(graph, out)
    return model


def onnx_session(path: str) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def verify_onnx(model: nn.Module, path: str, shapes: Sequence[Sequence[int]]) -> list[dict]:
    """ONNX Runtime's logits against ``model``'s on a random input of each shape."""
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


def use_onnxruntime(segmentor: nn.Module, onnx_file: str, checkpoint: Optional[str] = None) -> Any:
    """``segmentor`` computing ``encode_decode`` in ONNX Runtime if the graph's head, ham and
    classes are its own (and ``checkpoint``'s); a static graph's other sizes are resized."""
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
    size = graph_input.shape[2:] if all(isinstance(v, int) for v in graph_input.shape[2:]) else None

    def encode_decode(inputs: Tensor, batch_img_metas: Any = None) -> Tensor:
        x = inputs.detach().float().cpu()
        resize = lambda t, to: F.interpolate(t, to, mode="bilinear", align_corners=False)
        fit = size is not None and list(x.shape[2:]) != size
        logits = session.run(None, {graph_input.name: (resize(x, size) if fit else x).numpy()})[0]
        logits = torch.from_numpy(logits)
        return (resize(logits, inputs.shape[2:]) if fit else logits).to(inputs.device)

    segmentor.encode_decode = encode_decode
    return segmentor


def gate_datasets(cfg: Config, precision: str) -> tuple[Any, Any]:
    """The val dataset and int8's calibration one (train, val pipeline); one line if not there."""
    init_default_scope(cfg.get("default_scope", "mmseg"))

    def build(dataset_cfg: dict, split: str) -> Any:
        reason = "has no images"
        try:
            if len(dataset := DATASETS.build(dataset_cfg)):
                return dataset
        except (AssertionError, OSError, ValueError) as err:  # empty: mmengine's ValueError
            reason = reason if type(err) is ValueError else f"is not there ({one_line(err, 300)})"
        raise UsageError(
            f"{precision}: the check needs the config's {split} split, which {reason}: pass "
            "--cfg-options data_root=PATH"
        )

    val = build(cfg.val_dataloader.dataset, "val")
    if precision != "int8":
        return val, None
    train = next(leaf_datasets(cfg.train_dataloader.dataset))
    return val, build(dict(train, pipeline=val.pipeline.transforms), "train")


def samples(model: torch.nn.Module, dataset: Any, count: int = 0, size: Any = None) -> list:
    """(preprocessed input (1, 3, H, W), ground truth (H, W)) of ``count`` samples spread over
    ``dataset`` (0: all), inputs resized to a static graph's ``size``."""
    out = []
    for i in np.linspace(0, len(dataset) - 1, min(count or len(dataset), len(dataset))):
        data = model.data_preprocessor({k: [v] for k, v in dataset[round(i)].items()}, False)
        x, gt = data["inputs"].float(), data["data_samples"][0].gt_sem_seg.data[0]
        x = F.interpolate(x, tuple(size), mode="bilinear") if size is not None else x
        out.append((x.numpy(), gt))
    return out


def convert(src: str, out: str, precision: str, calibration: list[np.ndarray]) -> None:
    """Write the fp32 graph ``src`` as 'fp16' (float32 input and output) or 'int8' (ORT's static
    QOperator format, per-channel 7-bit weights, uint8 activations, the Hamburger in float)."""
    import onnx
    from onnxruntime import quantization as q
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from onnxruntime.transformers.float16 import convert_float_to_float16

    if precision == "fp16":
        onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), out)
    else:
        quant_pre_process(src, out)  # BN folded: every Conv weight an initializer
        feeds = iter([{"input": x} for x in calibration])
        reader = type("R", (q.CalibrationDataReader,), {"get_next": lambda _: next(feeds, None)})
        q.quantize_static(
            out,
            out,
            reader(),
            quant_format=q.QuantFormat.QOperator,
            op_types_to_quantize=["Conv", "Add", "Mul", "Relu", "MaxPool"],
            nodes_to_exclude=[n.name for n in onnx.load(out).graph.node if "/hamburger/" in n.name],
            per_channel=True,
            reduce_range=True,  # 7-bit weights: AVX2's u8 x s8 products saturate 16 bits
            activation_type=q.QuantType.QUInt8,
        )
    graph, meta = onnx.load(out), onnx.load(src, load_external_data=False).metadata_props
    onnx.helper.set_model_props(graph, {**{p.key: p.value for p in meta}, "precision": precision})
    onnx.save(graph, out)


def compare(fp32: str, other: str, batches: list, classes: int) -> dict[str, float]:
    """The graph ``other`` against the graph ``fp32`` on ``batches``: argmax agreement over all
    pixels and of the worst image, and both val mIoUs (%, mmseg's IoUMetric)."""
    maps, mious = [], []
    for path in (other, fp32):
        session, preds, areas = onnx_session(path), [], []
        for x, gt in batches:
            logits = torch.from_numpy(session.run(None, {"input": x})[0])
            preds.append(F.interpolate(logits, gt.shape, mode="bilinear")[0].argmax(0))
            areas.append(IoUMetric.intersect_and_union(preds[-1], gt, classes, 255))
        totals = [torch.stack(a).sum(0) for a in zip(*areas)]
        mious.append(float(100 * np.nanmean(IoUMetric.total_area_to_metrics(*totals)["IoU"])))
        maps.append(preds)
    same = [float((a == b).sum()) for a, b in zip(*maps)]
    worst = min(s / p.numel() for s, p in zip(same, maps[0]))
    agreement = sum(same) / sum(p.numel() for p in maps[0])
    return dict(agreement=agreement, worst=worst, miou=mious[0], miou_fp32=mious[1])
