"""``--cfg-options NAME=VALUE`` for a config's top-level variables (``seg_map_suffix``, ``img_dir``,
``classes``, ``crop_size``, ...), as if the line ``NAME = ...`` had been edited in the file.

mmengine 0.10.7 evaluates a config file once: values computed from a variable (a dataset's
``data_prefix`` from ``img_dir``, a head's ``num_classes`` from ``classes``, a pipeline's crop from
``crop_size``) keep the old value when ``Config.merge_from_dict`` sets the variable alone.
:func:`apply_config_variables` reads the config again with the assignments of those variables
replaced in every file of its chain (in the temporary copy mmengine reads each file from, right
after ``Config._substitute_predefined_vars``) and takes over the top-level keys that changed. A
variable assigned in a form that cannot be replaced (unpacked from an expression, chained,
augmented, inside a block) is refused with one line naming it, the file and the line.
``data_root`` and ``max_iters`` keep their own rules
(:func:`hamseg.utils.config.merge_cfg_options`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from mmengine.config import Config, ConfigDict
from mmengine.logging import print_log

from hamseg.utils.errors import UsageError

from .patching import patched

#: Variables that ``merge_cfg_options`` moves by its own rule.
OWN_RULES = ("data_root", "max_iters")


def variable_options(cfg: Config, options: dict) -> dict[str, Any]:
    """The options that set a top-level variable of ``cfg`` (no dot, not a dict, not
    :data:`OWN_RULES`)."""
    return {
        key: value
        for key, value in options.items()
        if "." not in key and key not in OWN_RULES and key in cfg and not isinstance(cfg[key], dict)
    }


def _stores(node: ast.AST) -> Iterator[ast.Name]:
    """The names a statement binds in the module's scope (not inside functions or
    comprehensions)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield ast.Name(id=node.name, lineno=node.lineno)
        return
    if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        yield node
    if isinstance(node, ast.alias):
        yield ast.Name(id=(node.asname or node.name).split(".")[0], lineno=node.lineno)
    for child in ast.iter_child_nodes(node):
        yield from _stores(child)


def _replaceable(statement: ast.stmt, values: dict) -> list[tuple[ast.expr, str]]:
    """(value node, variable) of each variable of ``values`` that ``statement`` assigns in a
    form whose right-hand side can be replaced: ``NAME = ...`` or ``A, B = x, y``."""
    if isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets = [statement.target]
        value = statement.value
    elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        targets = statement.targets
        value = statement.value
    else:
        return []
    (target,) = targets
    if isinstance(target, ast.Name):
        return [(value, target.id)] if target.id in values else []
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        pairs = list(zip(target.elts, value.elts))
        if len(target.elts) == len(value.elts) and not any(
            isinstance(node, ast.Starred) for node in target.elts + value.elts
        ):
            return [(v, t.id) for t, v in pairs if isinstance(t, ast.Name) and t.id in values]
    return []


def assign_variables(source: str, values: dict[str, Any], filename: str) -> tuple[str, set[str]]:
    """``source`` with the right-hand side of each module-level assignment of a variable of
    ``values`` replaced by the value's literal; the variables it assigned.

    Raises:
        UsageError: A variable is bound in another way (chained, augmented, unpacked from an
            expression, in a block, imported, a function).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:  # mmengine's {{$ENV:...}} placeholders are not Python
        named = [name for name in values if name in source]
        if named:
            raise UsageError(
                f"--cfg-options {named[0]}: {filename} is not plain Python, so {named[0]} cannot "
                "be set from the command line; edit it in that file"
            ) from None
        return source, set()
    edits: list[tuple[ast.expr, str]] = []
    for statement in tree.body:
        found = _replaceable(statement, values)
        edits += found
        replaced = {name for _, name in found}
        for name in _stores(statement):
            if name.id in values and name.id not in replaced:
                raise UsageError(
                    f"--cfg-options {name.id}=...: {filename} line {name.lineno} sets {name.id} in "
                    "a form the command line cannot replace (only NAME = VALUE and A, B = X, Y "
                    "at the top level); edit that line instead"
                )
    lines = source.encode("utf-8").splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    data = source.encode("utf-8")
    for node, name in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        begin = starts[node.lineno - 1] + node.col_offset  # col_offset: UTF-8 bytes
        end = starts[node.end_lineno - 1] + node.end_col_offset
        data = data[:begin] + _literal(values[name], name).encode("utf-8") + data[end:]
    return data.decode("utf-8"), {name for _, name in edits}


def _literal(value: Any, name: str) -> str:
    """The Python literal of an option value (str, number, bool, None, list or tuple of them)."""
    if isinstance(value, ConfigDict):
        value = value.to_dict()
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError):
        same = False
    if not same:
        raise UsageError(f"--cfg-options {name}: {text} is not a value a config file can hold")
    return "(" + text + ")"


def read_with_variables(filename: str, values: dict[str, Any]) -> tuple[Config, set[str]]:
    """``Config.fromfile(filename)`` as if every file of its chain assigned ``values``; the
    variables some file assigned."""
    assigned: set[str] = set()
    substitute = Config._substitute_predefined_vars

    def substitute_and_assign(filename: str, temp_config_name: str) -> None:
        substitute(filename, temp_config_name)
        if not filename.endswith(".py"):
            return
        with open(temp_config_name, encoding="utf-8") as f:
            source, found = assign_variables(f.read(), values, filename)
        with open(temp_config_name, "w", encoding="utf-8") as f:
            f.write(source)
        assigned.update(found)

    with patched(Config, "_substitute_predefined_vars", staticmethod(substitute_and_assign)):
        cfg = Config.fromfile(filename)
    return cfg, assigned


def apply_config_variables(cfg: Config, options: dict) -> list[str]:
    """Set the top-level variables among ``options`` (:func:`variable_options`) as if edited in
    ``cfg``'s file, in place: every top-level key computed from them follows. Logs one line
    naming those keys, if any.

    Returns:
        The keys that changed with them (besides the variables themselves).
    """
    values = variable_options(cfg, options)
    if not values or not cfg.filename:
        return []
    edited, assigned = read_with_variables(cfg.filename, values)
    if not assigned:
        return []
    plain = Config.fromfile(cfg.filename)
    for key in [k for k in plain if k not in edited]:
        cfg.pop(key)
    changed = [key for key in edited if key not in plain or edited[key] != plain[key]]
    for key in changed:
        cfg[key] = edited[key]
    followed = [key for key in changed if key not in values]
    if followed:  # else the plain merge would have done the same
        print_log(
            f"--cfg-options {', '.join(sorted(assigned))}: set as if edited in the config file; "
            f"{', '.join(followed)} changed with it",
            "current",
        )
    return followed
