"""Lab and report code shared by the tools in a checkout: benchmarks, analyses, the demo head
comparison. Not part of the hamseg library."""
