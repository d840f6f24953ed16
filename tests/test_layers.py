"""hamseg's subpackages form layers that only point down (docs: hamseg/__init__.py), and the
library never imports a checkout's ``tools`` (its lab and report code, tools/lab/).

Every ``import`` and ``from ... import`` of every module, at module level and inside functions,
is read with ``ast``; an import of a hamseg subpackage higher in :data:`LAYERS` than the
importing module's own, or of ``tools``, fails the test, naming the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hamseg"
#: Bottom to top. A module may import from its own subpackage and from lower ones only.
LAYERS = (
    "utils",
    "compat",
    "models",
    "datasets",
    "evaluation",
    "engine",
    "apis",
    "cli",
)


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in the file, relative ones resolved."""
    package = list(path.relative_to(root).parts[:-1])  # the module's package, e.g. hamseg.cli
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from hamseg import engine` names a subpackage through its alias
            if module == "hamseg":
                found += [(node.lineno, f"hamseg.{alias.name}") for alias in node.names]
    return found


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "hamseg" or len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return parts[1]


def upward_imports(package: Path = PACKAGE) -> list[str]:
    """``file:line: layer imports module`` for every import of a higher layer."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package.parent)
        own = layer_of(".".join(name.with_suffix("").parts))
        if own is None:  # hamseg/__init__.py and version.py sit above/beside the layers
            continue
        for line, module in imported_modules(path, package.parent):
            target = layer_of(module)
            if target is not None and LAYERS.index(target) > LAYERS.index(own):
                problems.append(f"{name}:{line}: {own} imports {module}")
    return problems


def checkout_imports(package: Path = PACKAGE) -> list[str]:
    """``file:line: imports module`` for every import of the checkout's ``tools`` package (the
    tools that ``hamseg/.mim`` carries are data, not modules of the package)."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package.parent)
        if ".mim" in name.parts:
            continue
        for line, module in imported_modules(path, package.parent):
            if module.split(".")[0] == "tools":
                problems.append(f"{name}:{line}: imports {module}")
    return problems


def test_every_subpackage_is_a_declared_layer():
    found = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert found == set(LAYERS), found ^ set(LAYERS)


def test_no_module_imports_a_higher_layer():
    assert upward_imports() == []


def test_no_module_imports_the_checkouts_tools():
    assert checkout_imports() == []


def test_the_check_sees_imports_of_tools_inside_functions(tmp_path):
    fake = tmp_path / "hamseg"
    (fake / "apis").mkdir(parents=True)
    (fake / "apis" / "__init__.py").write_text("import tools.lab\n")
    (fake / "apis" / "demo.py").write_text(
        "def f():\n    from tools.lab.analysis import head_stats\n    from toolsmith import x\n"
    )
    assert checkout_imports(fake) == [
        "hamseg/apis/__init__.py:1: imports tools.lab",
        "hamseg/apis/demo.py:2: imports tools.lab.analysis",
    ]


def test_the_check_sees_upward_imports_inside_functions_and_relative_ones(tmp_path):
    fake = tmp_path / "hamseg"
    for layer, text in [
        ("utils", "def f():\n    from hamseg.cli import run_cli\n"),
        ("models", "from ..engine import amp\nfrom ..utils import late\n"),
        ("cli", "from ..utils import late\nfrom hamseg import models\n"),
    ]:
        (fake / layer).mkdir(parents=True)
        (fake / layer / "__init__.py").write_text(text)
    assert upward_imports(fake) == [
        "hamseg/models/__init__.py:1: models imports hamseg.engine",
        "hamseg/utils/__init__.py:2: utils imports hamseg.cli",
    ]
