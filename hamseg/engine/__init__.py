"""Training-engine pieces hamseg registers into mmseg: guard hooks (pre-emption, divergence, exact
resume), crash-safe checkpoints, channels_last, every rank's painted test images, TTA. CPU-only
training is the opt-in :mod:`hamseg.engine.cpu`, loaded when one of its names is first used."""

from .channels_last import ChannelsLastHook as ChannelsLastHook
from .checkpoints import AtomicCheckpointHook as AtomicCheckpointHook
from .checkpoints import find_latest_complete_checkpoint as find_latest_complete_checkpoint
from .divergence import DIVERGED_EXIT_CODE as DIVERGED_EXIT_CODE
from .divergence import NonFiniteLossHook as NonFiniteLossHook
from .divergence import TrainingDiverged as TrainingDiverged
from .extend_schedule import ExtendScheduleHook as ExtendScheduleHook
from .launcher import watch_launcher as watch_launcher
from .multi_eval_tta import MultiEvalTTAModel as MultiEvalTTAModel
from .preemption import PREEMPTED_EXIT_CODE as PREEMPTED_EXIT_CODE
from .preemption import PreemptionHook as PreemptionHook
from .preemption import TrainingPreempted as TrainingPreempted
from .preemption import ignore_signals_until_exit as ignore_signals_until_exit
from .preemption import protect_workers as protect_workers
from .resume import RandomStateHook as RandomStateHook
from .resume import ResumableInfiniteSampler as ResumableInfiniteSampler
from .resume import collate_with_worker_rng as collate_with_worker_rng
from .stop import TrainingStopped as TrainingStopped
from .stop import leave_process_group as leave_process_group
from .stop import report_exit as report_exit
from .tta import HamSegTTAModel as HamSegTTAModel
from .visualization import EveryRankVisualizationHook as EveryRankVisualizationHook

_CPU = ("setup_cpu_distributed", "CPUAmpOptimWrapper", "HamSyncBatchNorm")


def __getattr__(name: str) -> object:  # PEP 562: the CPU module loads when first named
    if name in (*_CPU, "CPUSyncBNDistributedDataParallel"):
        from . import cpu

        return getattr(cpu, name)
    raise AttributeError(f"module 'hamseg.engine' has no attribute {name!r}")
