"""Leaf helpers of every layer: user-facing errors, one-line messages, config-dict walking,
a process map with a progress bar. They import no other hamseg subpackage."""
