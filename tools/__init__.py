"""Command-line tools (a checkout's; not installed as a Python package)."""
