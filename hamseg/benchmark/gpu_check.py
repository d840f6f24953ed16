"""The report of ``tools/gpu_check.sh``: what the GPU suite and the CUDA benchmarks found.

``python -m hamseg.benchmark.gpu_check DIR`` collects, from ``DIR`` (``work_dirs/gpu_check``):
``pytest.xml`` (the ``-m gpu`` run's JUnit report: passed / failed / skipped per test),
``test_*.json`` (numbers the GPU tests recorded, e.g. the full VOC model's s/iter and peak
memory), ``*/*.json`` (the benchmarks' own JSON outputs) and ``steps.json`` (each step's
command, exit code and seconds), adds the machine (device name, capability, memory, driver,
torch / CUDA / cuDNN versions) and writes ``report.json`` and ``report.md`` there.
"""

from __future__ import annotations

import glob
import json
import os.path as osp
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any

__all__ = ["collect", "machine", "markdown", "test_results", "write_report"]


def machine() -> dict[str, Any]:
    """Device and software versions (the device fields only with CUDA)."""
    import torch

    info: dict[str, Any] = dict(
        python=platform.python_version(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        cuda_available=torch.cuda.is_available(),
    )
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            device=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_gib=round(props.total_memory / 2**30, 2),
            device_count=torch.cuda.device_count(),
        )
        try:
            query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            info["driver"] = subprocess.run(query, capture_output=True, text=True).stdout.strip()
        except OSError:
            info["driver"] = None
    return info


def test_results(junit_xml: str) -> list[dict[str, Any]]:
    """(name, outcome, seconds, message) of every test case in a JUnit XML file."""
    results = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = "failed" if tag in ("failure", "error") else "skipped"
                message = " ".join((node.get("message") or "").split())[:200]
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        results.append(
            dict(name=name, outcome=outcome, seconds=float(case.get("time", 0)), message=message)
        )
    return results


def _load(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def collect(folder: str) -> dict[str, Any]:
    """Everything in ``folder`` (see the module docstring) plus :func:`machine`."""
    junit = osp.join(folder, "pytest.xml")
    steps = osp.join(folder, "steps.json")
    return dict(
        machine=machine(),
        steps=_load(steps) if osp.isfile(steps) else [],
        tests=test_results(junit) if osp.isfile(junit) else [],
        recorded={
            osp.basename(p)[len("test_") : -len(".json")]: _load(p)
            for p in sorted(glob.glob(osp.join(folder, "test_*.json")))
        },
        benchmarks={
            osp.relpath(p, folder): _load(p)
            for p in sorted(glob.glob(osp.join(folder, "*", "*.json")))
        },
    )


def markdown(report: dict[str, Any]) -> str:
    """The report as markdown: machine, steps, test outcomes, recorded numbers, benchmark files."""
    m = report["machine"]
    lines = ["# GPU check", "", "| field | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in m.items()]
    lines += ["", "## Steps", "", "| step | exit code | seconds |", "| --- | --- | --- |"]
    lines += [f"| `{s['command']}` | {s['exit_code']} | {s['seconds']} |" for s in report["steps"]]
    counts = {
        o: sum(t["outcome"] == o for t in report["tests"]) for o in ("passed", "failed", "skipped")
    }
    lines += [
        "",
        f"## GPU tests: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped",
        "",
        "| test | outcome | seconds | message |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {t['name']} | {t['outcome']} | {t['seconds']:.2f} | {t['message']} |"
        for t in report["tests"]
    ]
    lines += ["", "## Numbers recorded by the tests", ""]
    lines += [f"- {k}: `{json.dumps(v)}`" for k, v in report["recorded"].items()] or ["- none"]
    lines += ["", "## Benchmark outputs (JSON, full numbers)", ""]
    lines += [f"- `{k}`" for k in report["benchmarks"]] or ["- none"]
    return "\n".join(lines) + "\n"


def write_report(folder: str) -> tuple[str, str]:
    """Write ``report.json`` and ``report.md`` into ``folder``; returns their paths."""
    report = collect(folder)
    js, md = osp.join(folder, "report.json"), osp.join(folder, "report.md")
    with open(js, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    with open(md, "w", encoding="utf-8") as f:
        f.write(markdown(report))
    return js, md


if __name__ == "__main__":
    paths = write_report(sys.argv[1] if len(sys.argv) > 1 else "work_dirs/gpu_check")
    print("wrote " + " and ".join(paths))
