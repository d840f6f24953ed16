"""Metrics that hamseg registers into mmseg: the VOC test-server writer, Context's two mIoUs."""

from .context_metric import ContextIoUMetric  # noqa: F401
from .voc_submission import VOCSubmissionMetric, voc_palette  # noqa: F401
