"""Training-engine pieces hamseg registers into mmseg. CPU-only training is the opt-in
:mod:`hamseg.engine.cpu`, loaded when one of its names is first used here."""

from . import channels_last, tta, visualization  # noqa: F401
from .checkpoints import find_latest_complete_checkpoint  # noqa: F401
from .preemption import PreemptionHook  # noqa: F401
from .resume import RandomStateHook, ResumableInfiniteSampler  # noqa: F401
from .stop import TrainingStopped  # noqa: F401


def __getattr__(name: str) -> object:  # PEP 562: the CPU module loads when first named
    if name in ("setup_cpu_distributed", "CPUAmpOptimWrapper", "HamSyncBatchNorm"):
        from . import cpu

        return getattr(cpu, name)
    raise AttributeError(f"module 'hamseg.engine' has no attribute {name!r}")
