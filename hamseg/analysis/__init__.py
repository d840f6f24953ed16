"""Analyses of a checkpoint: :mod:`~hamseg.analysis.features` (the spectrum of Fig. 5 and the
feature maps of Fig. 6) and :mod:`~hamseg.analysis.eval_variance` (the mIoU's dependence on the
ham's random dictionary). ``tools/analysis/`` are their command lines."""
