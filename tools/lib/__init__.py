"""What a checkout's front ends share: :mod:`.mmseg_front_end` (mmseg 1.2.2's tool scripts on
hamseg configs, behind tools/mmseg_tool.py, tools/analysis/ and tools/misc/) with
:mod:`.mmseg_tool_fixes` (its fixes to those scripts), and supervise.sh (the launchers' signal
handling). Not part of the hamseg library."""
