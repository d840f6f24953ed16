"""What a built decode head or an exported graph says about it (head type, ham settings as built
from hamseg's ``ham_cfg`` or mmseg's ``ham_kwargs``, classes), and one line naming what two
records disagree on (docs/deploy.md; a checkout's tools/lib/head_check.py records a config and a
checkpoint's stored config this way). A checkpoint's keys and shapes are the strict load's to
compare (:mod:`.checkpoint`)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Optional

from mmseg.models.decode_heads.ham_head import Matrix_Decomposition_2D_Base
from mmseg.registry import MODELS
from torch import nn

from hamseg.models.decompositions import MatrixDecomposition2D
from hamseg.models.ham_light_head import ham_cfg_from_kwargs

#: Ham settings that do not change what an evaluated (exported) model computes: training only
#: (train_steps, grad, eta), derived from the channels (D), or chosen at evaluation and export.
NOT_COMPARED = {"D", "train_steps", "grad", "eta", "eval_steps", "eval_seed", "eval_draws"}
#: Head types that are one head for these checks: mmseg's SegNeXt head and hamseg's twin, whose
#: checkpoints are interchangeable (docs/segnext.md).
SAME_HEAD = {"LightHamHead": "HamLightHead"}


@dataclass(frozen=True)
class HeadRecord:
    """The decode head as one source records it; None where the source does not say.

    Attributes:
        head: The head's type name, e.g. 'HamHead', 'HamLightHead', 'FCNHead'.
        ham: :func:`ham_settings` of its ham ({} for a head without one).
        classes: The class count.
        names: The class names.
        source: Where it was read, for messages (e.g. "its stored config's ham_kwargs").
    """

    head: Optional[str] = None
    ham: Optional[dict] = None
    classes: Optional[int] = None
    names: Optional[tuple] = None
    source: str = ""


def ham_settings(ham: nn.Module) -> dict[str, Any]:
    """Type and constructor arguments of a ham module as built; mmseg's NMF2D as the hamseg NMF
    that ``HamLightHead`` builds for its ``ham_kwargs``, with mmseg's gradient (through every
    step) and unseeded evaluation."""
    if isinstance(ham, Matrix_Decomposition_2D_Base):
        kwargs = dict(MD_S=ham.S, MD_R=ham.R, train_steps=ham.train_steps)
        kwargs.update(eval_steps=ham.eval_steps, rand_init=ham.rand_init)
        cfg = dict(ham_cfg_from_kwargs(kwargs), grad="bptt", eval_seed=None, eval_draws=1)
        ham = MODELS.build(cfg if ham.rand_init else dict(cfg, D=getattr(ham, "D", 512)))
    names: list[str] = []
    for cls in type(ham).__mro__[: type(ham).__mro__.index(MatrixDecomposition2D) + 1]:
        names += [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
    settings = {n: getattr(ham, n) for n in dict.fromkeys(names) if hasattr(ham, n)}
    return dict(type=type(ham).__name__, **settings)


def _first_ham(module: nn.Module) -> Optional[nn.Module]:
    hams = (MatrixDecomposition2D, Matrix_Decomposition_2D_Base)
    return next((m for m in module.modules() if isinstance(m, hams)), None)


def of_head(head: nn.Module, source: str, names: Optional[list] = None) -> HeadRecord:
    """The record of a built decode head (its first ham; ``names``: the model's classes)."""
    ham = _first_ham(head)
    settings = ham_settings(ham) if ham is not None else {}
    names = tuple(names) if names else None
    return HeadRecord(type(head).__name__, settings, head.num_classes, names, source)


def _ham_text(settings: dict, keys: list[str]) -> str:
    if not settings:
        return "no ham"
    return "ham " + ", ".join(f"{k}={settings.get(k)!r}" for k in keys)


def differences(a: HeadRecord, b: HeadRecord) -> Optional[tuple[str, str]]:
    """What ``a`` and ``b`` say (e.g. "ham type='NMF'", "ham type='VQ'") of the first field
    they disagree on among those both record: head type, ham type (or no ham), the other
    compared ham settings, class count, class names; None if they agree."""
    heads = [SAME_HEAD.get(h, h) for h in (a.head, b.head)]
    if None not in heads and heads[0] != heads[1]:
        return a.head, b.head
    if a.ham is not None and b.ham is not None and a.ham != b.ham:
        if not (a.ham and b.ham):  # one of them has no ham
            return _ham_text(a.ham, ["type"]), _ham_text(b.ham, ["type"])
        types = [a.ham.get("type"), b.ham.get("type")]
        keys = ["type"] if None not in types and types[0] != types[1] else [*a.ham]
        keys = [k for k in keys if k in b.ham and k not in NOT_COMPARED]
        keys = [k for k in keys if a.ham[k] != b.ham[k]]
        if keys:
            return _ham_text(a.ham, keys), _ham_text(b.ham, keys)
    if None not in (a.classes, b.classes) and a.classes != b.classes:
        return f"num_classes={a.classes}", f"num_classes={b.classes}"
    if None not in (a.names, b.names) and a.names != b.names:
        i = next((i for i, (x, y) in enumerate(zip(a.names, b.names)) if x != y), 0)
        return f"class {i} {a.names[i]!r}", f"class {i} {b.names[i]!r}"
    return None
