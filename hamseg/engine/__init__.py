"""Training-engine pieces (hooks, TTA) that hamseg registers into mmseg."""

from .divergence import DIVERGED_EXIT_CODE, NonFiniteLossHook, TrainingDiverged
from .guards import GUARD_HOOKS, add_guard_hooks
from .preemption import PREEMPTED_EXIT_CODE, PreemptionHook, TrainingPreempted
from .random_state import RandomStateHook
from .stop import TrainingStopped
from .tta import HamSegTTAModel

__all__ = [
    "DIVERGED_EXIT_CODE",
    "GUARD_HOOKS",
    "PREEMPTED_EXIT_CODE",
    "HamSegTTAModel",
    "NonFiniteLossHook",
    "PreemptionHook",
    "RandomStateHook",
    "TrainingDiverged",
    "TrainingPreempted",
    "TrainingStopped",
    "add_guard_hooks",
]
