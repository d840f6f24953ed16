"""Lab and report code shared by the tools in a checkout: benchmarks, analyses, the demo head
comparison and the lab's context heads (``tools.lab.models``). Not part of the hamseg library."""
