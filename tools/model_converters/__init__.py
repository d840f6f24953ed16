"""Checkpoint conversion behind tools/convert_release_checkpoint.py: :mod:`.release_checkpoint`
(the authors' released HamNet as an mmseg checkpoint). Not part of the hamseg library."""
