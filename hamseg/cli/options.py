"""``--cfg-options``: every key checked against the config, top-level variables set as if edited
in the file, ``data_root=`` and ``max_iters=`` moving what used them (docs/usage.md)."""

import ast
import difflib
import inspect
import os.path as osp
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config, ConfigDict
from mmengine.runner import Runner
from mmseg import registry

from hamseg.utils.config import SPLITS, split_datasets
from hamseg.utils.errors import UsageError

from .common import notice

OWN_RULES = ("data_root", "max_iters")  # hamseg's rules read them, defined or not
#: Keys read beyond the signature of what is built there: by mmengine's Runner at the top level,
#: by mmseg's EncoderDecoder from its ``test_cfg`` (slide inference).
KNOWN = {
    "": {"compile", "model_wrapper_cfg", "runner_type", "activation_checkpointing"},
    "model.test_cfg": {"mode", "crop_size", "stride"},
}
#: What builds a dict without ``type`` at these top-level keys.
_DEFAULT_TYPES = {f"{s}_dataloader": torch.utils.data.DataLoader for s in SPLITS}
_DEFAULT_TYPES["optim_wrapper"] = "OptimWrapper"


def accepted_keys(kind: Any) -> set[str] | None:
    """The keyword arguments of a class or a ``type`` of mmseg's registries, ``**kwargs``
    followed into its base classes; None where that cannot be told; no type: none."""
    target = kind
    for name in registry.__all__ if isinstance(kind, str) else ():
        if (target := getattr(registry, name).get(kind)) is not None:
            break
    if target is None:
        return None if kind is not None else set()
    names: set[str] = set()
    is_class = isinstance(target, type)
    for owner in [c for c in target.__mro__ if "__init__" in vars(c)] if is_class else [target]:
        if owner in (object, torch.nn.Module):
            return names
        try:
            params = inspect.signature(owner).parameters.values()
        except (TypeError, ValueError):
            return None
        names |= {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return names
    return None


def check_key(cfg: Config, key: str) -> None:
    """Refuse in one line, naming the nearest key, a key that the config does not define and
    that what is built at its place (the top level: mmengine's Runner) does not take."""
    node: Any = cfg
    parts = key.split(".")
    for i, part in enumerate(parts):
        if isinstance(node, (list, tuple)):
            if part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                continue
            near = [str(len(node) - 1)] if node else []  # the last index
        elif isinstance(node, (dict, Config)):
            if part in node:
                node = node[part]
                continue
            kind = node.get("type", _DEFAULT_TYPES.get(parts[0]) if i == 1 else None)
            accepted = accepted_keys(kind if i else Runner)
            if accepted is None or part in accepted | KNOWN.get(".".join(parts[:i]), set()):
                return
            defined = list(node) + (list(OWN_RULES) if i == 0 else [])
            near = difflib.get_close_matches(part, defined, n=1)
            near = near or difflib.get_close_matches(part, sorted(accepted), n=1)
        else:
            return  # inside a value: mmengine's merge decides
        hint = f"did you mean {'.'.join([*parts[:i], near[0]])}? " if near else ""
        where = f" in {'.'.join(parts[:i])}" if i else ""
        raise UsageError(
            f"--cfg-options {key}: {osp.basename(cfg.filename or 'the config')} has no key "
            f"{part!r}{where}; {hint}a new key is written +{key}=VALUE"
        )


def _assign(source: str, values: dict[str, Any], filename: str) -> tuple[str, set[str]]:
    """``source`` with each top-level ``NAME = ...`` (also ``A, B = X, Y``) of a variable of
    ``values`` given its literal; the names given. Another binding of one is refused."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # mmengine's {{$ENV:...}} placeholders are not Python
        return source, set()

    def literal(name: str) -> ast.expr:
        value = values[name]
        text = repr(value.to_dict() if isinstance(value, ConfigDict) else value)
        try:
            node = ast.parse(text, mode="eval").body
            ast.literal_eval(node)
        except (ValueError, SyntaxError):
            raise UsageError(f"--cfg-options {name}: {text} is not a config value") from None
        return node

    given: dict[int, str] = {}  # id(target) -> name
    for st in tree.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            target = st.targets[0]
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            target = st.target
        else:
            continue
        if isinstance(target, ast.Name) and target.id in values:
            st.value, given[id(target)] = literal(target.id), target.id
        elif isinstance(target, ast.Tuple) and isinstance(st.value, ast.Tuple):
            for i, name in enumerate(target.elts if len(target.elts) == len(st.value.elts) else []):
                if isinstance(name, ast.Name) and name.id in values:
                    st.value.elts[i], given[id(name)] = literal(name.id), name.id
    for node in ast.walk(tree):
        name = node.asname or node.name if isinstance(node, ast.alias) else None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            name = node.id
        if name in values and id(node) not in given:
            raise UsageError(
                f"--cfg-options {name}=...: {filename} line {node.lineno} sets {name} in a form "
                "the command line cannot replace (only NAME = VALUE and A, B = X, Y at the top "
                "level); edit that line instead"
            )
    return ast.unparse(tree), set(given.values())


def apply_config_variables(cfg: Config, options: dict) -> list[str]:
    """Set the config's top-level variables among ``options`` as if edited in every file of its
    chain (wrapping mmengine's private ``Config._substitute_predefined_vars``, pinned by a
    canary): the top-level keys computed from them follow. The keys that followed."""
    values = {k: v for k, v in options.items() if k in cfg and k not in OWN_RULES}
    values = {k: v for k, v in values.items() if "." not in k and not isinstance(cfg[k], dict)}
    if not values or not cfg.filename:
        return []
    assigned: set[str] = set()
    substitute = Config.__dict__["_substitute_predefined_vars"]

    def substitute_and_assign(filename: str, temp_config_name: str) -> None:
        substitute.__func__(filename, temp_config_name)
        if filename.endswith(".py"):
            temp = Path(temp_config_name)
            source, found = _assign(temp.read_text(encoding="utf-8"), values, filename)
            temp.write_text(source, encoding="utf-8")
            assigned.update(found)

    Config._substitute_predefined_vars = staticmethod(substitute_and_assign)
    try:
        edited = Config.fromfile(cfg.filename)
    finally:
        Config._substitute_predefined_vars = substitute
    if not assigned:
        return []
    for key in [k for k in cfg if k not in edited]:
        cfg.pop(key)
    changed = [key for key in edited if key not in cfg or edited[key] != cfg[key]]
    for key in changed:
        cfg[key] = edited[key]
    if followed := [key for key in changed if key not in values]:
        names = ", ".join(sorted(assigned))
        notice(f"--cfg-options {names}: as if edited in the config; {', '.join(followed)} followed")
    return followed


def merge_cfg_options(cfg: Config, options: dict) -> dict:
    """``--cfg-options`` as hamseg's tools read them: each key checked (a leading ``+`` adds a
    new one), the config's variables set as if edited, mmengine's merge; ``data_root=PATH`` also
    moves every dataset that had the variable's value, ``max_iters=N`` the loop, the validation
    and checkpoint intervals and ``by_epoch=False`` schedulers' ends that had the old length (a
    warm-up that no longer fits becomes a tenth of the run)."""
    for key in options:
        if not key.startswith("+") and key not in OWN_RULES:
            check_key(cfg, key)
    options = {key.removeprefix("+"): value for key, value in options.items()}
    apply_config_variables(cfg, options)
    old_root = cfg.get("data_root")
    old_iters = cfg.get("max_iters", (cfg.get("train_cfg") or {}).get("max_iters"))
    cfg.merge_from_dict(options)
    if "max_iters" in options:
        train, hooks = cfg.get("train_cfg") or {}, cfg.get("default_hooks") or {}
        schedulers = cfg.get("param_scheduler") or []
        schedulers = [schedulers] if isinstance(schedulers, dict) else schedulers
        places = [
            (train, "max_iters"),
            (train, "val_interval"),
            (hooks.get("checkpoint"), "interval"),
        ]
        places += [(s, "end") for s in schedulers if s.get("by_epoch") is False]
        for node, key in places:
            if node and node.get(key) == old_iters:
                node[key] = options["max_iters"]
        n, warm = options["max_iters"], max(1, options["max_iters"] // 10)
        for node in (s for s in schedulers if s.get("by_epoch") is False):
            # a warm-up as long as the new run becomes a tenth of it (mmengine needs begin < end)
            if node.get("end", 0) > n:
                node["end"] = warm
            if node.get("begin", 0) >= n:
                node["begin"] = warm
    if "data_root" in options:
        new, datasets = options["data_root"], [leaf for _, leaf in split_datasets(cfg, SPLITS)]
        for dataset in datasets:
            if old_root is not None and dataset.get("data_root") == old_root:
                dataset["data_root"] = new
        if not any(dataset.get("data_root") == new for dataset in datasets):
            raise UsageError(
                f"--cfg-options data_root={new}: no dataset of this config uses its data_root "
                f"variable ({old_root!r}); set <split>_dataloader.dataset.data_root=PATH instead"
            )
    return options
