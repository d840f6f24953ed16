"""Cost benchmarks (docs/benchmark.md), front ends tools/benchmark_*.py and tools/gpu_check.sh:
``zoo`` (Table 3's modules), ``measure`` (time, memory, MACs), ``context`` (Table 3, the sweep),
``models`` (whole models, SegNeXt), ``deploy`` (ONNX Runtime), ``gpu_check`` (the report)."""
