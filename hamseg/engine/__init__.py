"""Training-engine pieces hamseg registers into mmseg. CPU-only training is the opt-in
:mod:`hamseg.engine.cpu`, loaded when one of its names is first used here."""

from .channels_last import ChannelsLastHook  # noqa: F401
from .checkpoints import AtomicCheckpointHook, find_latest_complete_checkpoint  # noqa: F401
from .divergence import DIVERGED_EXIT_CODE, NonFiniteLossHook, TrainingDiverged  # noqa: F401
from .multi_eval_tta import MultiEvalTTAModel  # noqa: F401
from .preemption import PREEMPTED_EXIT_CODE, PreemptionHook, TrainingPreempted  # noqa: F401
from .resume import RandomStateHook, ResumableInfiniteSampler  # noqa: F401
from .stop import TrainingStopped  # noqa: F401
from .tta import HamSegTTAModel  # noqa: F401
from .visualization import EveryRankVisualizationHook  # noqa: F401


def __getattr__(name: str) -> object:  # PEP 562: the CPU module loads when first named
    if name in ("setup_cpu_distributed", "CPUAmpOptimWrapper", "HamSyncBatchNorm"):
        from . import cpu

        return getattr(cpu, name)
    raise AttributeError(f"module 'hamseg.engine' has no attribute {name!r}")
