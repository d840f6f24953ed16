"""The command-line layer that hamseg's tools share."""

from .common import LAUNCHERS, CLIError, add_guard_hooks, build_config, enable_amp, run_cli

__all__ = ["LAUNCHERS", "CLIError", "add_guard_hooks", "build_config", "enable_amp", "run_cli"]
