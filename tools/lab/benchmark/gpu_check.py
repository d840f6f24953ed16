"""``python -m tools.lab.benchmark.gpu_check DIR``: tools/gpu_check.sh's report.{json,md} from DIR's
pytest.txt (``-v -rfE``), test_*.json, */*.json, */*.md and steps.json (docs/benchmark.md)."""

from __future__ import annotations

import glob
import json
import os.path as osp
import re
import sys
from collections import Counter
from typing import Any

from . import measure
from .measure import machine, table

#: A test's line in pytest's verbose output, a failure's line in its short summary.
_TEST = re.compile(r"^(\S+::.+?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \((.*)\))?( +\[.*)?$")
_FAILURE = re.compile(r"^(?:FAILED|ERROR) (\S+::.+?)(?: - (.*))?$")
_OUTCOME = dict(PASSED="passed", XPASS="passed", SKIPPED="skipped", XFAIL="skipped")


def parse_outcomes(text: str) -> list[dict[str, str]]:
    """Name, outcome (passed, failed, skipped) and message of every test in ``-v -rfE`` output."""
    tests: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if m := _TEST.match(line):
            tests[m[1]] = dict(name=m[1], outcome=_OUTCOME.get(m[2], "failed"), message=m[3] or "")
        elif (m := _FAILURE.match(line)) and m[1] in tests:
            tests[m[1]]["message"] = " ".join((m[2] or "").split())[:200]
    return list(tests.values())


def collect(folder: str) -> dict[str, Any]:
    """``machine``, ``steps``, ``tests``, ``recorded`` (test -> numbers), ``benchmarks`` (by
    ``DIR/FILE.json``) and ``tables`` (by ``DIR/FILE.md``)."""

    def read(pattern: str) -> dict[str, Any]:
        found = {}
        for path in sorted(glob.glob(osp.join(folder, pattern))):
            with open(path, encoding="utf-8") as f:
                found[osp.relpath(path, folder)] = json.load(f) if path[-4:] == "json" else f.read()
        return found

    tests = read("pytest.txt").get("pytest.txt", "")
    recorded = {k[len("test_") : -len(".json")]: v for k, v in read("test_*.json").items()}
    return dict(
        machine=machine(),
        steps=read("steps.json").get("steps.json", []),
        tests=parse_outcomes(tests),
        recorded=recorded,
        benchmarks=read("*/*.json"),
        tables=read("*/*.md"),
    )


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


def _numbers_table(value: Any) -> list[str]:
    """``| key | value |`` rows of every leaf: the value as JSON (full precision), ``|`` escaped."""

    def cell(v: Any) -> str:
        return " ".join((v if isinstance(v, str) else json.dumps(v)).split()).replace("|", "\\|")

    return table(("key", "value"), [(cell(k), cell(v)) for k, v in flatten(value)])


def markdown(report: dict[str, Any]) -> str:
    """Machine, steps, test outcomes and numbers, each benchmark's table and JSON values."""
    tests = report["tests"]
    n = Counter(t["outcome"] for t in report["tests"])
    lines = ["# GPU check", "", *table(("field", "value"), report["machine"].items()), ""]
    steps = [(f"`{s['command']}`", s["exit_code"], s["seconds"]) for s in report["steps"]]
    lines += ["## Steps", "", *table(("step", "exit code", "seconds"), steps), ""]
    lines += [f"## GPU tests: {n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped"]
    rows = [(t["name"], t["outcome"], t["message"]) for t in tests]
    lines += [
        "",
        *table(("test", "outcome", "message"), rows),
        "",
        "## Numbers recorded by the tests",
        "",
    ]
    for name, values in report["recorded"].items():
        lines += [f"### {name}", "", *_numbers_table(values), ""]
    lines += ["## Benchmarks", ""] if report["recorded"] else ["none", "", "## Benchmarks", ""]
    tables = dict(report.get("tables", {}))
    for name, values in report["benchmarks"].items():
        md = tables.pop(osp.splitext(name)[0] + ".md", None)
        flat = _numbers_table(values)
        lines += [f"### `{name}`", "", *([md.strip(), ""] if md else [])]
        lines += [f"<details><summary>every value of {name} ({len(flat) - 2})</summary>", ""]
        lines += [*flat, "", "</details>", ""]
    for name, md in tables.items():  # a table without its JSON
        lines += [f"### `{name}` (no JSON next to it)", "", md.strip(), ""]
    lines += [] if report["benchmarks"] or tables else ["none", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_report(folder: str) -> tuple[str, str]:
    """Write ``report.json`` and ``report.md`` into ``folder``; returns their paths."""
    report = collect(folder)
    md, js = measure.write_report(osp.join(folder, "report"), markdown(report), report, indent=2)
    return js, md


if __name__ == "__main__":
    paths = write_report(sys.argv[1] if len(sys.argv) > 1 else "work_dirs/gpu_check")
    print("wrote " + " and ".join(paths))
