"""Training-engine pieces hamseg registers into mmseg: guard hooks (pre-emption, divergence,
exact resume), a sampler that resumes without loading the trained batches, crash-safe
checkpoints, channels_last on CUDA, CPU mixed precision and CPU multi-process training, TTA,
painted test images of every rank, the Context comparators' multi-scale test."""

from .amp import CPUAmpOptimWrapper
from .channels_last import ChannelsLastHook
from .checkpoints import AtomicCheckpointHook, find_latest_complete_checkpoint
from .distributed import setup_cpu_distributed
from .divergence import DIVERGED_EXIT_CODE, NonFiniteLossHook, TrainingDiverged
from .extend_schedule import ExtendScheduleHook
from .multi_eval_tta import MultiEvalTTAModel
from .preemption import PREEMPTED_EXIT_CODE, PreemptionHook, TrainingPreempted
from .random_state import RandomStateHook
from .resume_skip import ResumableInfiniteSampler, collate_with_worker_rng
from .stop import TrainingStopped
from .tta import HamSegTTAModel
from .visualization import EveryRankVisualizationHook

__all__ = [
    "DIVERGED_EXIT_CODE",
    "PREEMPTED_EXIT_CODE",
    "AtomicCheckpointHook",
    "CPUAmpOptimWrapper",
    "ExtendScheduleHook",
    "ChannelsLastHook",
    "EveryRankVisualizationHook",
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
    "setup_cpu_distributed",
]
