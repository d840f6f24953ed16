"""Deployment front ends (tools/deploy/export_onnx.py, tools/deploy/onnx_runner.py) and what
export_onnx.py's ``--precision``/``--quantize`` use: :mod:`.precision` (fp16 and int8 graphs
checked against fp32) and :mod:`.int8` (the int8 recipe). docs/deploy.md. Not part of the
hamseg library."""
