"""Training-engine pieces (norm layers, hooks, TTA) that hamseg registers into mmseg."""

from .tta import HamSegTTAModel  # noqa: F401  ('HamSegTTAModel', release MSFlip test)
