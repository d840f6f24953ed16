"""The squeeze by level (hamseg/models/level_squeeze.py): its resize matrices equal torch's
bilinear resize, and it runs only where it computes what the module calls compute. Its equality
with mmseg's squeeze(cat(resize(x))) inside the head: tests/models/test_ham_light_head.py."""

import pytest
import torch
import torch.nn.functional as F
from mmcv.cnn import ConvModule

from hamseg.models.level_squeeze import applies, bilinear_matrix


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("sizes", [(3, 9), (5, 11), (7, 7), (9, 4), (1, 6), (6, 1)])
def testbilinear_matrix_is_torchs_bilinear_resize(sizes, align_corners):
    (h, H), (w, W) = sizes, sizes[::-1]
    x = torch.randn(2, 3, h, w, dtype=torch.float64)
    ref = F.interpolate(x, size=(H, W), mode="bilinear", align_corners=align_corners)
    a_h = bilinear_matrix(h, H, align_corners, x)
    a_w = bilinear_matrix(w, W, align_corners, x)
    # (H, h) @ (.., h, w) @ (w, W) -> (.., H, W)
    torch.testing.assert_close(a_h @ x @ a_w.t(), ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(a_h.sum(1), torch.ones(H, dtype=torch.float64))


def test_applies_only_where_the_module_calls_are_reproduced():
    gn = dict(type="GN", num_groups=2, requires_grad=True)
    squeeze = ConvModule(5, 4, 1, norm_cfg=gn)
    levels = [torch.rand(1, 3, 9, 7), torch.rand(1, 2, 5, 4)]
    assert applies(squeeze, levels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not applies(squeeze, levels)
    handle = squeeze.register_forward_pre_hook(lambda *a: None)
    assert not applies(squeeze, levels)
    handle.remove()
    assert applies(squeeze, levels)
    assert not applies(ConvModule(5, 4, 3, padding=1, norm_cfg=gn), levels)
    reordered = ConvModule(5, 4, 1, norm_cfg=dict(type="BN"), order=("norm", "conv", "act"))
    assert not applies(reordered, levels)
    traced = []
    record = lambda x: traced.append(applies(squeeze, [x])) or x  # noqa: E731
    torch.jit.trace(record, torch.rand(1, 5, 3, 3), check_trace=False)
    assert traced == [False]
