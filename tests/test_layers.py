"""Imports point down: hamseg's layers (utils < compat < models < datasets < evaluation < engine <
apis < cli), scripts that are scripts (tools/ imports hamseg and upstream packages only: no
``tools.*``, no ``sys.path`` edits, no ``# noqa: E402``), nothing in hamseg/ or tools/ imports
``projects``, and a project under projects/ imports hamseg's public modules only (no other
project, no tools). Every import, at module level and inside functions, is read with ``ast``;
failures name file:line."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("utils", "compat", "models", "datasets", "evaluation", "engine", "apis", "cli")


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in a file, relative ones resolved; ``from
    hamseg import engine`` also names ``hamseg.engine``."""
    package = list(path.relative_to(root).parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "hamseg" and len(parts) > 1 and parts[1] in LAYERS else None


def problems(root: Path = ROOT) -> list[str]:
    """``file:line: what`` for every import that points the wrong way."""
    found = []
    for path in sorted(root.glob("hamseg/**/*.py")) + sorted(root.glob("tools/**/*.py")):
        name = path.relative_to(root)
        if ".mim" in name.parts:
            continue
        own = layer_of(".".join(name.with_suffix("").parts))
        for line, module in imports(path, root):
            top, target = module.split(".")[0], layer_of(module)
            if top in ("tools", "projects"):
                found.append(f"{name}:{line}: imports {module}")
            elif own and target and LAYERS.index(target) > LAYERS.index(own):
                found.append(f"{name}:{line}: {own} imports {module}")
        if name.parts[0] == "tools":
            for line, text in enumerate(path.read_text().splitlines(), 1):
                if "sys.path" in text or "noqa: E402" in text:
                    found.append(f"{name}:{line}: {text.strip()}")
    for path in sorted(root.glob("projects/*/**/*.py")):
        name = path.relative_to(root)
        for line, module in imports(path, root):
            parts = module.split(".")
            other = parts[0] == "projects" and parts[1:2] != [name.parts[1]]
            private = parts[0] == "hamseg" and any(p.startswith("_") for p in parts[1:])
            if parts[0] == "tools" or other or private:
                found.append(f"{name}:{line}: imports {module}")
    return found


def test_every_subpackage_is_a_declared_layer():
    found = {p.name for p in (ROOT / "hamseg").iterdir() if (p / "__init__.py").exists()}
    assert found == set(LAYERS), found ^ set(LAYERS)


def test_the_library_imports_point_down():
    assert [p for p in problems() if p.startswith("hamseg")] == []


def test_scripts_are_scripts_and_projects_use_the_public_library():
    assert [p for p in problems() if not p.startswith("hamseg")] == []


def test_the_check_sees_every_kind_of_wrong_import(tmp_path):
    files = {
        "hamseg/utils/a.py": "def f():\n    from hamseg.cli import run_cli\n",
        "hamseg/models/b.py": "from ..engine import amp\nfrom ..utils import late\n",
        "hamseg/cli/c.py": "from hamseg import models\nimport projects.context_lab\n",
        "tools/t.py": "import sys\nsys.path.insert(0, '.')\n"
        "from tools.lib import x  # noqa: E402\n",
        "projects/lab/m.py": "import hamseg.models\nfrom projects.other import y\nimport tools\n",
        "projects/lab/n.py": "from hamseg.engine._private import z\nfrom projects.lab import m\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert problems(tmp_path) == [
        "hamseg/cli/c.py:2: imports projects.context_lab",
        "hamseg/models/b.py:1: models imports hamseg.engine",
        "hamseg/models/b.py:1: models imports hamseg.engine.amp",
        "hamseg/utils/a.py:2: utils imports hamseg.cli",
        "hamseg/utils/a.py:2: utils imports hamseg.cli.run_cli",
        "tools/t.py:3: imports tools.lib",
        "tools/t.py:3: imports tools.lib.x",
        "tools/t.py:2: sys.path.insert(0, '.')",
        "tools/t.py:3: from tools.lib import x  # noqa: E402",
        "projects/lab/m.py:2: imports projects.other",
        "projects/lab/m.py:2: imports projects.other.y",
        "projects/lab/m.py:3: imports tools",
        "projects/lab/n.py:1: imports hamseg.engine._private",
        "projects/lab/n.py:1: imports hamseg.engine._private.z",
    ]
