"""hamseg.compat.mmcv_ops: mmseg imports on mmcv-lite, the PyTorch ops equal mmcv's, and without
any mmcv ``import hamseg`` says in one line what to install."""

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from hamseg.compat import mmcv_ops
from hamseg.compat.mmcv_ops import MISSING_MMCV_MESSAGE, point_sample, sigmoid_focal_loss

needs_lite = pytest.mark.skipif(
    mmcv_ops.compiled_mmcv_available(), reason="compiled mmcv present: nothing is replaced"
)


def import_hamseg_with(block: str) -> subprocess.CompletedProcess:
    code = f"import sys\n{block}\nimport hamseg\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)


def test_no_mmcv_says_what_to_install_and_a_broken_one_keeps_its_error():
    result = import_hamseg_with("sys.modules['mmcv'] = None  # as if no mmcv is installed")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == f"ImportError: {MISSING_MMCV_MESSAGE}"
    result = import_hamseg_with("sys.modules['mmcv.version'] = None  # present but broken")
    assert result.returncode == 1 and MISSING_MMCV_MESSAGE not in result.stderr
    assert "mmcv.version" in result.stderr.strip().splitlines()[-1]


def test_mmseg_packages_import_after_hamseg_in_a_fresh_interpreter():
    code = (
        "import hamseg, mmseg.models, mmseg.datasets, mmseg.apis, mmseg.utils;"
        "from mmseg.models.losses import FocalLoss; from mmseg.models.utils import point_sample;"
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


@needs_lite
def test_other_ops_raise_a_clear_error_naming_the_op():
    with pytest.raises(ModuleNotFoundError, match=r"mmcv\.ops\.roi_align is a compiled mmcv op"):
        from mmcv.ops import roi_align  # noqa: F401
    # mmseg's guarded imports still see ModuleNotFoundError and keep their fallbacks
    from mmseg.models.decode_heads import cc_head, psa_head

    assert cc_head.CrissCrossAttention is None and psa_head.PSAMask is None


@needs_lite
def test_nothing_is_replaced_when_compiled_mmcv_is_found(monkeypatch):
    import importlib.util

    monkeypatch.setattr(mmcv_ops, "compiled_mmcv_available", lambda: True)
    monkeypatch.delitem(sys.modules, "mmcv.ops")
    assert mmcv_ops.install() is False
    assert "mmcv.ops" not in sys.modules
    monkeypatch.undo()
    assert mmcv_ops.install() is True and importlib.util.find_spec("mmcv._ext") is None


def bilinear_by_hand(image: torch.Tensor, x: float, y: float) -> torch.Tensor:
    """Bilinear sample of (C, H, W) at pixel coordinates (x, y), zero outside (grid_sample)."""
    c, h, w = image.shape
    x0, y0 = int(torch.floor(torch.tensor(x))), int(torch.floor(torch.tensor(y)))
    out = torch.zeros(c)
    for yy, wy in ((y0, y0 + 1 - y), (y0 + 1, y - y0)):
        for xx, wx in ((x0, x0 + 1 - x), (x0 + 1, x - x0)):
            if 0 <= yy < h and 0 <= xx < w:
                out += wy * wx * image[:, yy, xx]
    return out


@pytest.mark.parametrize("align_corners", [False, True])
def test_point_sample_equals_hand_bilinear(align_corners):
    torch.manual_seed(0)
    image = torch.randn(2, 3, 5, 7)
    points = torch.rand(2, 4, 2)  # (N, P, 2), x then y in [0, 1]
    out = point_sample(image, points, align_corners=align_corners)
    assert out.shape == (2, 3, 4)
    h, w = 5, 7
    for n in range(2):
        for p in range(4):
            px, py = points[n, p].tolist()
            if align_corners:
                x, y = px * (w - 1), py * (h - 1)
            else:
                x, y = px * w - 0.5, py * h - 0.5
            torch.testing.assert_close(out[n, :, p], bilinear_by_hand(image[n], x, y))
    grid = point_sample(image, points.view(2, 2, 2, 2), align_corners=align_corners)
    torch.testing.assert_close(grid.flatten(2), out)


def test_sigmoid_focal_loss_background_index_and_gradient_match_mmseg_python_version():
    from mmseg.models.losses.focal_loss import py_sigmoid_focal_loss

    torch.manual_seed(2)
    x = torch.randn(5, 3, requires_grad=True)
    t = torch.tensor([0, 2, 3, 1, 3])  # 3 == num_classes: background, all classes negative
    ours = sigmoid_focal_loss(x, t, 2.0, 0.5, None, "none")
    one_hot = F.one_hot(t, 4)[:, :3]
    theirs = py_sigmoid_focal_loss(x, one_hot, gamma=2.0, alpha=0.5, reduction="none")
    torch.testing.assert_close(ours, theirs)
    (g_ours,) = torch.autograd.grad(ours.sum(), x)
    (g_theirs,) = torch.autograd.grad(theirs.sum(), x)
    torch.testing.assert_close(g_ours, g_theirs)


def test_mmseg_gpu_focal_loss_path_runs_on_the_pure_torch_op():
    from mmseg.models.losses import focal_loss

    torch.manual_seed(3)
    pred, target = torch.randn(7, 3), torch.randint(0, 3, (7,))
    one_hot = F.one_hot(target, 3)
    ours = focal_loss.sigmoid_focal_loss(pred, target, one_hot, gamma=2.0, alpha=0.5)
    ref = focal_loss.py_sigmoid_focal_loss(pred, one_hot, gamma=2.0, alpha=0.5)
    torch.testing.assert_close(ours, ref)
