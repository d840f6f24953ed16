"""Dataset preparation behind tools/dataset_converters/: VOC trainaug from SBD, PASCAL Context
label maps, and the Context Shapes preview (the generator is :mod:`hamseg.datasets.context_shapes`).

Not imported by ``import hamseg``: the converters need scipy, which training does not.
"""
