"""The report of ``tools/gpu_check.sh``: what the GPU suite and the CUDA benchmarks found.

``python -m hamseg.benchmark.gpu_check DIR`` collects, from ``DIR`` (``work_dirs/gpu_check``):
``pytest.xml`` (the ``-m gpu`` run's JUnit report: passed / failed / skipped per test),
``test_*.json`` (numbers the GPU tests recorded, e.g. the full VOC model's s/iter and peak
memory), ``*/*.json`` (each benchmark's numbers: gpu_check.sh gives every benchmark its own
folder, ``context/``, ``model/``, ``segnext/``, ``deploy/``) with the tables the benchmarks
wrote next to them (``*/*.md``), and ``steps.json`` (each step's command, exit code and seconds),
adds the machine (device name, capability, memory, driver, torch / CUDA / cuDNN versions) and
writes ``report.json`` and ``report.md`` there. Both carry every number: ``report.md`` shows
each benchmark's table and then every value of its JSON, one ``| key | value |`` row each.
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

__all__ = ["collect", "flatten", "machine", "markdown", "test_results", "write_report"]


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
    """Everything in ``folder`` (see the module docstring) plus :func:`machine`.

    Returns:
        ``machine``, ``steps``, ``tests`` (:func:`test_results`), ``recorded`` (test name ->
        numbers), ``benchmarks`` (``DIR/FILE.json`` -> the file's content) and ``tables``
        (``DIR/FILE.md`` -> the markdown a benchmark wrote).
    """
    junit = osp.join(folder, "pytest.xml")
    steps = osp.join(folder, "steps.json")

    def files(pattern: str) -> list[str]:
        return sorted(glob.glob(osp.join(folder, pattern)))

    return dict(
        machine=machine(),
        steps=_load(steps) if osp.isfile(steps) else [],
        tests=test_results(junit) if osp.isfile(junit) else [],
        recorded={
            osp.basename(p)[len("test_") : -len(".json")]: _load(p) for p in files("test_*.json")
        },
        benchmarks={osp.relpath(p, folder): _load(p) for p in files(osp.join("*", "*.json"))},
        tables={osp.relpath(p, folder): _read(p) for p in files(osp.join("*", "*.md"))},
    )


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) of every leaf of a JSON value; a list of plain values is one leaf.

    >>> flatten({"env": {"device": "cuda"}, "rows": [{"ms": 1.5}], "all": [1, 2]})
    [('env.device', 'cuda'), ('rows.0.ms', 1.5), ('all', [1, 2])]
    """
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return [(prefix, value)]
    return [leaf for key, v in items for leaf in flatten(v, f"{prefix}.{key}" if prefix else key)]


def _cell(value: Any) -> str:
    """A table cell: the value as JSON (numbers at full precision), ``|`` escaped."""
    text = value if isinstance(value, str) else json.dumps(value)
    return " ".join(text.split()).replace("|", "\\|")


def _numbers_table(value: Any) -> list[str]:
    lines = ["| key | value |", "| --- | --- |"]
    return lines + [f"| {_cell(k)} | {_cell(v)} |" for k, v in flatten(value)]


def markdown(report: dict[str, Any]) -> str:
    """The report as markdown: machine, steps, test outcomes, the tests' numbers, and each
    benchmark's table followed by every value of its JSON."""
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
    for name, values in report["recorded"].items():
        lines += [f"### {name}", "", *_numbers_table(values), ""]
    if not report["recorded"]:
        lines += ["none", ""]
    lines += ["## Benchmarks", ""]
    tables = dict(report.get("tables", {}))
    for name, values in report["benchmarks"].items():
        table = tables.pop(osp.splitext(name)[0] + ".md", None)
        lines += [f"### `{name}`", ""]
        lines += [table.strip(), ""] if table else []
        flat = _numbers_table(values)
        lines += [f"<details><summary>every value of {name} ({len(flat) - 2})</summary>", ""]
        lines += [*flat, "", "</details>", ""]
    for name, table in tables.items():  # a table without its JSON
        lines += [f"### `{name}` (no JSON next to it)", "", table.strip(), ""]
    if not report["benchmarks"] and not tables:
        lines += ["none", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


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
