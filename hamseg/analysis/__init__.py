"""Analyses of a checkpoint: :mod:`~hamseg.analysis.features` (the spectrum of Fig. 5 and the
feature maps of Fig. 6), :mod:`~hamseg.analysis.eval_variance` (the mIoU under the evaluation
protocols: the paper's N runs, the ensemble, seed sweeps) and
:mod:`~hamseg.analysis.protocol_study` (the protocols compared from cached backbone features).
``tools/analysis/`` are their command lines."""
