"""The command-line layer: what every tool shares (:mod:`.common`), ``--resume`` semantics
(:mod:`.resume`) and the mmseg-tool front end (:mod:`.mmseg_tool`)."""

from .common import (
    GUARD_HOOKS,
    LAUNCHERS,
    CLIError,
    add_guard_hooks,
    build_config,
    enable_amp,
    run_cli,
    user_message,
)

__all__ = [
    "GUARD_HOOKS",
    "LAUNCHERS",
    "CLIError",
    "add_guard_hooks",
    "build_config",
    "enable_amp",
    "run_cli",
    "user_message",
]
