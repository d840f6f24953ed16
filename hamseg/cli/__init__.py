"""The command-line layer: what every tool shares (:mod:`.common`), ``--cfg-options``
(:mod:`.options`), the checks before iteration 1 (:mod:`.preflight`), ``--resume``
(:mod:`.resume`)."""

from .common import LAUNCHERS, CLIError, add_guard_hooks, build_config, enable_amp, run_cli

__all__ = ["LAUNCHERS", "CLIError", "add_guard_hooks", "build_config", "enable_amp", "run_cli"]
