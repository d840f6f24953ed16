"""Analyses of a checkpoint: :mod:`~tools.lab.analysis.features` (the spectrum of Fig. 5 and the
feature maps of Fig. 6), :mod:`~tools.lab.analysis.eval_variance` (the mIoU under the evaluation
protocols: the paper's N runs, the ensemble, seed sweeps) and
:mod:`~tools.lab.analysis.protocol_study` (the protocols compared from cached backbone features).
``tools/analysis/`` are their command lines."""
