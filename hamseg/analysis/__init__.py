"""Analyses of a checkpoint: spectrum (Fig. 5), feature maps (Fig. 6), evaluation variance."""

from .eval_variance import (
    Evaluation,
    SweepRow,
    VarianceReport,
    evaluate_repeatedly,
    seed_sweep,
    summarize,
)
from .feature_maps import draw_feature_maps, pca_rgb, pick_channels, select_channels
from .features import HAMBURGER, MissingModuleError, capture_features, get_module
from .spectrum import compute_spectra, cumulative_energy, plot_spectrum, write_spectrum

__all__ = [
    "Evaluation",
    "HAMBURGER",
    "MissingModuleError",
    "SweepRow",
    "VarianceReport",
    "capture_features",
    "compute_spectra",
    "cumulative_energy",
    "draw_feature_maps",
    "evaluate_repeatedly",
    "get_module",
    "pca_rgb",
    "pick_channels",
    "plot_spectrum",
    "seed_sweep",
    "select_channels",
    "summarize",
    "write_spectrum",
]
