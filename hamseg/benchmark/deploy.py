"""CPU latency, PyTorch eager vs ONNX Runtime fp32/fp16/int8 at equal threads (docs/deploy.md)."""

from __future__ import annotations

import os.path as osp
import statistics
import tempfile
from typing import Any, Optional

import torch

from hamseg.apis import init_model
from hamseg.apis.export import export_onnx, onnx_session
from hamseg.apis.precision import PRECISIONS, compare, convert, predictions, val_batches

from .measure import alternate
from .models import resolve

DEMO = "configs/demo/hamhead-nmf_r18-d8_context-shapes.py"
SEGNEXT = "configs/demo/hamlighthead-nmf_mscan-t_context-shapes.py"


def latency(
    config: str,
    size: int,
    checkpoint: Optional[str],
    threads: list[int],
    runs: int = 10,
    val_images: int = 0,
) -> list[dict[str, Any]]:
    """One row per backend and thread count: median ms of a 1x3xSxS inference over ``runs``
    alternating runs (torch.set_num_threads = ORT intra-op threads, inter-op 1), min/max, the
    ratio to eager at the same threads, and (ORT) argmax agreement with fp32 and val mIoU."""
    model = init_model(resolve(config), checkpoint, "cpu")
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    rows, saved = [], torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        files = {"fp32": osp.join(tmp, "fp32.onnx")}
        exported = export_onnx(model, files["fp32"], (size, size), dynamic=True)
        batches = list(val_batches(model, val_images))
        files |= {p: osp.join(tmp, f"{p}.onnx") for p in PRECISIONS}
        for p in PRECISIONS:
            convert(files["fp32"], files[p], p, [b for b, _ in batches])
        reference = predictions(files["fp32"], batches)  # once for all four
        quality = {p: compare(reference, f, p, batches) for p, f in files.items()}
        for n in threads:
            torch.set_num_threads(n)
            run = lambda s: lambda: s.run(None, {"input": x.numpy()})  # noqa: E731
            fns = {"eager fp32": lambda: exported(x)}
            fns |= {f"ORT {p}": run(onnx_session(f, n)) for p, f in files.items()}
            times = alternate(fns, torch.device("cpu"), runs)
            eager = statistics.median(times["eager fp32"])
            for name, t in times.items():
                q = quality[name.split()[1]]  # eager: the fp32 graph's (argmax equal)
                rows.append(
                    dict(
                        backend=name,
                        threads=n,
                        ms=1e3 * statistics.median(t),
                        min_ms=1e3 * min(t),
                        max_ms=1e3 * max(t),
                        ratio=statistics.median(t) / eager,
                        runs=runs,
                        size=size,
                        agreement=q.agreement,
                        worst=q.worst,
                        miou=q.miou,
                        val_images=len(batches),
                    )
                )
    torch.set_num_threads(saved)
    return rows
