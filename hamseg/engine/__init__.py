"""Training-engine pieces hamseg registers into mmseg: guard hooks (pre-emption, divergence,
exact resume), crash-safe checkpoints, channels_last on CUDA, CPU mixed precision and CPU
multi-process training, TTA (the release's and the Context comparators')."""

from .amp import CPUAmpOptimWrapper
from .channels_last import ChannelsLastHook
from .checkpoints import AtomicCheckpointHook, find_latest_complete_checkpoint
from .distributed import setup_cpu_distributed
from .divergence import DIVERGED_EXIT_CODE, NonFiniteLossHook, TrainingDiverged
from .multi_eval_tta import MultiEvalTTAModel
from .preemption import PREEMPTED_EXIT_CODE, PreemptionHook, TrainingPreempted
from .random_state import RandomStateHook
from .stop import TrainingStopped
from .tta import HamSegTTAModel

__all__ = [
    "DIVERGED_EXIT_CODE",
    "PREEMPTED_EXIT_CODE",
    "AtomicCheckpointHook",
    "CPUAmpOptimWrapper",
    "ChannelsLastHook",
    "HamSegTTAModel",
    "MultiEvalTTAModel",
    "NonFiniteLossHook",
    "PreemptionHook",
    "RandomStateHook",
    "TrainingDiverged",
    "TrainingPreempted",
    "TrainingStopped",
    "find_latest_complete_checkpoint",
    "setup_cpu_distributed",
]
