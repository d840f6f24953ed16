"""The context modules of the benchmark."""

from __future__ import annotations

import torch

from hamseg.benchmark.zoo import SPECS


def test_every_module_maps_the_tensor_to_its_shape():
    x = torch.randn(2, 16, 6, 7)
    for key, spec in SPECS.items():
        module = spec.build(16, 4, 2).eval()
        with torch.no_grad():
            assert module(x).shape == x.shape, key
