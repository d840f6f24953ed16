"""Helpers shared by hamseg's command-line tools."""

from .cli import CLIError, build_config, run_cli

__all__ = ["CLIError", "build_config", "run_cli"]
