"""CPU latency of ONNX graphs (e.g. one model's fp32, fp16 and int8), timed in turn run by run.

    python tools/deploy/benchmark_onnx.py MODEL.onnx [MORE.onnx ...] --shape H W [--runs 10]
        [--threads 1] [--out FILE.json]

Each run calls every graph once, in an order reversed every other run, after one warm-up call;
prints per graph the median wall and CPU ms (the process's CPU time: what other processes on a
shared machine stretch less), min-max, and their ratios to the first graph; --out writes every
number with the CPU's name and instruction sets (AVX2, AVX-512 VNNI, AMX) as JSON. numpy and
onnxruntime only.
"""

import argparse
import json
import platform
import statistics
import time

import numpy as np
import onnxruntime as ort

FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "amx_bf16")


def cpu() -> dict:
    """The CPU's name and which of :data:`FLAGS` it has (Linux' /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return dict(name=platform.processor(), flags=None)
    name = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if "model name" in ln), "")
    return dict(name=name, flags=[f for f in FLAGS if f in text.split()])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("models", nargs="+")
    p.add_argument("--shape", type=int, nargs=2, required=True, metavar=("H", "W"))
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads")
    p.add_argument("--out", help="write every number as JSON")
    args = p.parse_args()
    x = np.random.default_rng(0).normal(size=(1, 3, *args.shape)).astype(np.float32)
    calls = {}
    for path in args.models:
        (options := ort.SessionOptions()).intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        calls[path] = lambda s=session: s.run(None, {s.get_inputs()[0].name: x})
        calls[path]()  # warm-up
    times = {path: ([], []) for path in calls}
    for run in range(args.runs):
        for path in list(calls)[:: -1 if run % 2 else 1]:
            wall, cpu_time = time.perf_counter(), time.process_time()
            calls[path]()
            times[path][0].append(1e3 * (time.perf_counter() - wall))
            times[path][1].append(1e3 * (time.process_time() - cpu_time))
    rows = [
        dict(
            model=path,
            ms=statistics.median(w),
            min_ms=min(w),
            max_ms=max(w),
            cpu_ms=statistics.median(c),
        )
        for path, (w, c) in times.items()
    ]
    for row in rows:
        row.update(ratio=row["ms"] / rows[0]["ms"], cpu_ratio=row["cpu_ms"] / rows[0]["cpu_ms"])
        print(
            f"{row['model']}: {row['ms']:.1f} ms ({row['min_ms']:.1f}-{row['max_ms']:.1f}), CPU "
            f"{row['cpu_ms']:.1f} ms; / first: {row['ratio']:.2f}x, CPU {row['cpu_ratio']:.2f}x"
        )
    result = dict(rows=rows, cpu=cpu(), onnxruntime=ort.__version__, shape=args.shape)
    result.update(runs=args.runs, threads=args.threads)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
