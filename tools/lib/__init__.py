"""What a checkout's front ends share: :mod:`.mmseg_front_end` (mmseg 1.2.2's tool scripts on
hamseg configs, behind tools/mmseg_tool.py, tools/analysis/ and tools/misc/) with
:mod:`.mmseg_tool_fixes` (its fixes to those scripts); :mod:`.images` (image files in, overlays
out: tools/infer.py and the analysis tools), :mod:`.head_check` (checkpoint against config:
tools/infer.py, tools/deploy/export_onnx.py), :mod:`.splits` (tools/validate_dataset.py
``--write-splits``); and supervise.sh (the launchers' signal handling). Not part of the hamseg
library."""
