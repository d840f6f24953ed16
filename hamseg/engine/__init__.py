"""Training-engine pieces hamseg registers into mmseg: guard hooks (pre-emption, divergence, exact
resume), a sampler that resumes without loading the trained batches, crash-safe checkpoints,
channels_last on CUDA, painted test images of every rank, TTA; CPU-only training in the opt-in
:mod:`hamseg.engine.cpu` (loaded on first use of its names from here)."""

from .channels_last import ChannelsLastHook
from .checkpoints import AtomicCheckpointHook, find_latest_complete_checkpoint
from .divergence import DIVERGED_EXIT_CODE, NonFiniteLossHook, TrainingDiverged
from .extend_schedule import ExtendScheduleHook
from .launcher import watch_launcher
from .multi_eval_tta import MultiEvalTTAModel
from .preemption import (
    PREEMPTED_EXIT_CODE,
    PreemptionHook,
    TrainingPreempted,
    ignore_signals_until_exit,
    protect_workers,
    resume_command,
)
from .resume import RandomStateHook, ResumableInfiniteSampler, collate_with_worker_rng
from .stop import TrainingStopped, leave_process_group, report_exit
from .tta import HamSegTTAModel
from .visualization import EveryRankVisualizationHook

_CPU = ("setup_cpu_distributed", "CPUAmpOptimWrapper", "HamSyncBatchNorm")
_CPU += ("CPUSyncBNDistributedDataParallel",)

__all__ = [
    "DIVERGED_EXIT_CODE",
    "PREEMPTED_EXIT_CODE",
    "AtomicCheckpointHook",
    "ChannelsLastHook",
    "EveryRankVisualizationHook",
    "ExtendScheduleHook",
    "HamSegTTAModel",
    "MultiEvalTTAModel",
    "NonFiniteLossHook",
    "PreemptionHook",
    "RandomStateHook",
    "ResumableInfiniteSampler",
    "TrainingDiverged",
    "TrainingPreempted",
    "TrainingStopped",
    "collate_with_worker_rng",
    "find_latest_complete_checkpoint",
    "ignore_signals_until_exit",
    "leave_process_group",
    "protect_workers",
    "report_exit",
    "resume_command",
    "watch_launcher",
    *_CPU,
]


def __getattr__(name: str) -> object:  # PEP 562: the CPU module loads when first named
    if name in _CPU:
        from . import cpu

        return getattr(cpu, name)
    raise AttributeError(f"module 'hamseg.engine' has no attribute {name!r}")
