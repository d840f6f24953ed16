"""HamLightHead (SegNeXt's head on hamseg's hams) against mmseg 1.2.2's LightHamHead.

mmseg's model is built from mmseg's own SegNeXt-T config; ours from configs/segnext/ (only the
decode head differs). Same weights, same initial dictionary: the same logits in evaluation; in
training, our one-step gradient is the paper's (Eq. 13), built here from mmseg's own NMF2D with
its K steps under ``no_grad``, and differs from mmseg's back-propagation through all K steps.
"""

from __future__ import annotations

import functools
import os.path as osp

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import MODELS

import hamseg  # noqa: F401  (before mmseg models)
from hamseg.models import HamLightHead
from hamseg.models.ham_light_head import ham_cfg_from_kwargs
from tests.conftest import REPO
from tests.helpers import one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

NAME = "segnext_mscan-t_1xb16-adamw-160k_ade20k-512x512.py"
OURS = osp.join(REPO, "configs", "segnext", NAME)


def mmseg_config() -> Config:
    import mmseg

    return Config.fromfile(
        osp.join(osp.dirname(mmseg.__file__), ".mim", "configs", "segnext", NAME)
    )


def build(cfg):
    init_default_scope("mmseg")
    return MODELS.build(cfg)


def features(seed: int = 0, scale: float = 1.0) -> list[torch.Tensor]:
    """MSCAN-T's four levels for a 256 x 256 image: level 1 is 32 x 32 = 1024 positions."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(32, 64, 64), (64, 32, 32), (160, 16, 16), (256, 8, 8)]
    return [scale * torch.randn(2, c, h, w, generator=g) for c, h, w in shapes]


def dictionary(seed: int = 1) -> torch.Tensor:
    """An initial NMF dictionary as both draw it: U[0, 1) with unit columns, (B*S, D, R)."""
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.rand(2, 256, 16, generator=g), dim=1)


def heads():
    """(ours, mmseg's) SegNeXt-T decode heads with mmseg's weights in both."""
    theirs = build(mmseg_config().model.decode_head)
    ours = build(Config.fromfile(OURS).model.decode_head)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return ours, theirs


def fix_dictionary(ours: HamLightHead, theirs, bases: torch.Tensor) -> None:
    """Make both heads start their NMF from ``bases``."""
    block = ours.hamburger
    block.forward = functools.partial(type(block).forward, block, bases=bases)
    theirs.hamburger.ham._build_bases = lambda *args, **kwargs: bases.clone()


def test_mmseg_segnext_checkpoint_loads_strictly_into_our_config(tmp_path):
    mmseg_model = build(mmseg_config().model)
    path = tmp_path / "segnext_t.pth"
    torch.save(dict(meta=dict(), state_dict=mmseg_model.state_dict()), path)
    ours = build(Config.fromfile(OURS).model)
    assert type(ours.decode_head) is HamLightHead
    state = torch.load(path, map_location="cpu")["state_dict"]
    ours.load_state_dict(state, strict=True)  # no key mapping
    assert torch.equal(
        ours.decode_head.hamburger.ham_out.gn.weight,
        mmseg_model.decode_head.hamburger.ham_out.gn.weight,
    )


def test_eval_logits_equal_mmseg_given_the_same_dictionary():
    ours, theirs = heads()
    ours.eval(), theirs.eval()
    bases = dictionary()
    fix_dictionary(ours, theirs, bases)
    inputs = features()
    with torch.no_grad():
        a, b = ours(inputs), theirs(inputs)
    assert a.shape == (2, 150, 32, 32)
    rel = ((a - b).abs().max() / b.abs().max()).item()
    assert rel < 1e-5, rel


def _input_grad(head, inputs) -> torch.Tensor:
    x = inputs[1].clone().requires_grad_(True)
    out = head([inputs[0], x, *inputs[2:]])
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    return x.grad


def test_training_gradient_is_the_one_step_gradient_not_mmsegs_bptt():
    """In float64: NMF's multiplicative rule divides by small denominators, so the float32
    rounding of two op orders (hamseg's in-place steps, mmseg's) shows in a few gradients."""
    ours, theirs = heads()
    for head in (ours, theirs):
        head.double().train()
        head.dropout = None  # deterministic
    bases = dictionary().double()
    fix_dictionary(ours, theirs, bases)
    inputs = [x.double() for x in features(scale=0.5)]
    g_ours = _input_grad(ours, inputs)
    g_bptt = _input_grad(theirs, inputs)

    # The one-step reference: mmseg's own NMF2D with its K steps run without autograd (Eq. 13).
    ham = theirs.hamburger.ham
    plain = type(ham).local_inference

    def one_step(x, b):
        with torch.no_grad():
            return plain(ham, x, b)

    ham.local_inference = one_step
    theirs.zero_grad()
    g_ref = _input_grad(theirs, inputs)
    scale = g_ref.abs().max()
    assert ((g_ours - g_ref).abs().max() / scale).item() < 1e-9
    assert ((g_bptt - g_ref).abs().max() / scale).item() > 1e-2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_ham_input_of_scale_1e4_is_finite_where_mmsegs_nmf_is_not(dtype):
    """The ham's input at scale 1e4 (mmseg's NMF2D gives NaN under fp16 from scale ~10): ours
    computes in float32 under autocast. The whole head stays finite too, up to where its first
    1x1 conv itself overflows fp16 (input scale 1e4; the same in mmseg's head)."""
    ours, theirs = heads()
    ours.train(), theirs.train()
    g = torch.Generator().manual_seed(0)
    z = 1e4 * torch.rand(2, 256, 32, 32, generator=g)
    with torch.autocast("cpu", dtype=dtype):
        mine = ours.hamburger.ham(z.to(dtype))
        if dtype == torch.float16:
            theirs_out = theirs.hamburger.ham(z.to(dtype))
            assert not torch.isfinite(theirs_out).all()  # the failure users report
    assert mine.dtype == dtype and torch.isfinite(mine).all()
    scale = 1e4 if dtype == torch.bfloat16 else 1e3
    for mode in (ours.train, ours.eval):
        mode()
        with torch.autocast("cpu", dtype=dtype):
            assert torch.isfinite(ours(features(scale=scale))).all()


def test_seeded_evaluation_repeats_and_random_evaluation_does_not():
    ours, _ = heads()
    ours.eval()
    inputs = features()
    with torch.no_grad():
        assert torch.equal(ours(inputs), ours(inputs))  # eval_seed=0 in the config
        ours.hamburger.ham.eval_seed = None  # mmseg's behaviour: a new draw per forward
        assert not torch.equal(ours(inputs), ours(inputs))


def test_mmseg_ham_kwargs_map_to_hamseg_nmf():
    cfg = ham_cfg_from_kwargs(
        dict(MD_S=1, MD_R=16, train_steps=6, eval_steps=7, inv_t=100, rand_init=True)
    )
    assert cfg == dict(type="NMF", S=1, R=16, train_steps=6, eval_steps=7, init="random")
    assert ham_cfg_from_kwargs(dict(rand_init=False))["init"] == "fixed"
    assert ham_cfg_from_kwargs({})["R"] == 64  # mmseg's defaults
    with pytest.raises(ValueError, match=r"unknown keys \['MD_T'\]"):
        ham_cfg_from_kwargs(dict(MD_T=1))
    kwargs = dict(in_channels=[8, 8], in_index=[0, 1], channels=8, num_classes=3)
    with pytest.raises(ValueError, match="not both"):
        HamLightHead(ham_channels=8, ham_cfg=dict(type="NMF"), ham_kwargs={}, **kwargs)


def test_an_mmseg_config_switches_by_changing_only_the_type():
    cfg = mmseg_config().model.decode_head
    cfg.type = "HamLightHead"
    head = build(cfg)  # ham_kwargs as mmseg writes them
    assert (head.hamburger.ham.R, head.hamburger.ham.eval_steps, head.hamburger.ham.grad) == (
        16,
        7,
        "one_step",
    )
    # rand_init=False: the dictionary exists from construction (a checkpoint loads before any
    # forward), as a buffer of the state dict.
    cfg.ham_kwargs.rand_init = False
    fixed = build(cfg)
    assert fixed.state_dict()["hamburger.ham.bases"].shape[-2:] == (256, 16)


def test_segnext_config_without_ade20k_is_one_line_naming_the_path(tmp_path):
    import subprocess
    import sys

    cmd = [sys.executable, "tools/train.py", OURS, "--work-dir", str(tmp_path / "w")]
    cmd += ["--cfg-options", f"train_dataloader.dataset.data_root={tmp_path}/ade"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert f"{tmp_path}/ade" in line and "ADEChallengeData2016.zip" in line, line
    assert "Traceback" not in proc.stderr
