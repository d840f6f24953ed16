"""The command-line layer: what every tool shares (:mod:`.common`), ``--resume`` semantics
(:mod:`.resume`) and the mmseg-tool front end (:mod:`.mmseg_tool`)."""

from .common import LAUNCHERS, CLIError, build_config, enable_amp, run_cli, user_message

__all__ = ["LAUNCHERS", "CLIError", "build_config", "enable_amp", "run_cli", "user_message"]
