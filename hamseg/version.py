"""hamseg's version, written only here (setup.py reads this file without importing hamseg)."""

__version__ = "0.1.0"
