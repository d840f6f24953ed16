"""HamLightHead against mmseg 1.2.2's LightHamHead (built from mmseg's own SegNeXt-T config;
ours from configs/segnext/): strict loading, equal logits from one dictionary, the one-step
gradient (from mmseg's own NMF2D with its K steps under no_grad), fp16, every hamseg ham."""

from __future__ import annotations

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


def features(seed: int = 0, scale: float = 1.0, size: int = 256) -> list[torch.Tensor]:
    """MSCAN-T's four levels for a batch of two ``size`` x ``size`` images (strides 4 to 32):
    for 256, level 1 (the head's) is 32 x 32 = 1024 positions."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(c, size // s, size // s) for c, s in ((32, 4), (64, 8), (160, 16), (256, 32))]
    return [scale * torch.randn(2, c, h, w, generator=g) for c, h, w in shapes]


def dictionary(seed: int = 1) -> torch.Tensor:
    """An initial NMF dictionary as both draw it: U[0, 1) with unit columns, (1, D, R)."""
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.rand(1, 256, 16, generator=g), dim=1)


def heads(bases: torch.Tensor | None = None):
    """(ours, mmseg's) SegNeXt-T decode heads with mmseg's weights in both; with ``bases`` both
    start their NMF from that dictionary (mmseg's ``rand_init=False`` buffer, our 'fixed')."""
    theirs = build(mmseg_config().model.decode_head)
    cfg = Config.fromfile(OURS).model.decode_head
    if bases is not None:
        cfg.ham_cfg = dict(init="fixed")
        theirs.hamburger.ham.rand_init = False
        theirs.hamburger.ham.register_buffer("bases", bases.clone())
    ours = build(cfg)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return ours, theirs


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
    ours, theirs = heads(dictionary())
    ours.eval(), theirs.eval()
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
    ours, theirs = heads(dictionary())
    for head in (ours, theirs):
        head.double().train()
        head.dropout = None  # deterministic
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
def test_autocast_whole_head_on_features_of_scale_1e4_is_finite(dtype):
    """Features of scale 1e4 (in the autocast dtype, as a backbone under autocast gives them):
    the squeeze's output peaks near 7e4, beyond fp16's 65504, so under fp16 mmseg's head is
    inf/NaN from its squeeze on; ours runs the squeeze in float32 under fp16 (its GroupNorm
    bounds what follows) and is finite in both modes, gradients too. bf16 has float32's range:
    both heads are finite. (A 64 x 64 image: fp16 convolutions are slow on CPU.)"""
    ours, theirs = heads()
    for train in (True, False):
        for head in (ours, theirs):
            head.train(train)
        inputs = [x.to(dtype).requires_grad_(True) for x in features(scale=1e4, size=64)]
        with torch.autocast("cpu", dtype=dtype):
            out = ours(inputs)
            with torch.no_grad():
                reference = theirs(inputs)
        assert out.dtype == dtype and torch.isfinite(out).all()
        assert torch.isfinite(reference).all() == (dtype == torch.bfloat16)
        if train:
            out.float().square().mean().backward()
            grads = [x.grad for x in inputs[1:]] + [p.grad for p in ours.parameters()]
            assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_mmseg_ham_kwargs_map_to_hamseg_nmf():
    cfg = ham_cfg_from_kwargs(
        dict(MD_S=1, MD_R=16, train_steps=6, eval_steps=7, inv_t=100, rand_init=True)
    )
    assert cfg == dict(type="NMF", S=1, R=16, train_steps=6, eval_steps=7, init="random")
    assert ham_cfg_from_kwargs(dict(rand_init=False))["init"] == "fixed"
    assert ham_cfg_from_kwargs({})["R"] == 64  # mmseg's defaults
    with pytest.raises(ValueError, match="MD_T"):
        ham_cfg_from_kwargs(dict(MD_T=1))
    # ham_cfg next to ham_kwargs overrides what they map to
    kwargs = dict(in_channels=[8, 8], in_index=[0, 1], channels=8, num_classes=3)
    head = HamLightHead(8, ham_cfg=dict(eval_seed=0, R=4), ham_kwargs=dict(MD_R=16), **kwargs)
    assert (head.hamburger.ham.R, head.hamburger.ham.eval_seed) == (4, 0)
    assert HamLightHead(8, ham_kwargs=dict(MD_R=16), **kwargs).hamburger.ham.eval_seed is None


def test_our_configs_are_mmsegs_with_the_type_switched_and_take_its_overrides():
    """configs/segnext/ keep mmseg's ham_kwargs: the same ham as mmseg's config (evaluated as
    mmseg's, a draw per forward), and mmseg's --cfg-options on ham_kwargs work, as do hamseg's
    on ham_cfg (applied through Config.merge_from_dict, as tools/train.py applies them)."""
    ours, theirs = Config.fromfile(OURS), mmseg_config()
    assert ours.model.decode_head == dict(theirs.model.decode_head, type="HamLightHead")
    head = build(ours.model.decode_head).eval()
    ham = head.hamburger.ham
    got = (ham.S, ham.R, ham.train_steps, ham.eval_steps, ham.grad, ham.eval_seed, ham.init)
    assert got == (1, 16, 6, 7, "one_step", None, "random")
    inputs = features(size=128)
    with torch.no_grad():
        assert not torch.equal(head(inputs), head(inputs))
    ours.merge_from_dict({"model.decode_head.ham_kwargs.MD_R": 32})
    assert build(ours.model.decode_head).hamburger.ham.R == 32
    options = {"model.decode_head.ham_cfg.eval_seed": 0, "model.decode_head.ham_cfg.eval_draws": 12}
    ours.merge_from_dict(options)
    ensemble = build(ours.model.decode_head).eval()
    assert (ensemble.hamburger.ham.R, ensemble.hamburger.ham.eval_draws) == (32, 12)
    with torch.no_grad():
        assert torch.equal(ensemble(inputs), ensemble(inputs))
    # rand_init=False: a dictionary buffer from construction (a checkpoint loads before any
    # forward; mmseg registers it inside the first forward)
    ours.merge_from_dict({"model.decode_head.ham_kwargs.rand_init": False})
    fixed = build(ours.model.decode_head)
    assert fixed.state_dict()["hamburger.ham.bases"].shape == (1, 256, 32)


@pytest.mark.slow
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


F64 = torch.float64

# --------------------------------------------------------------------------------------------
# Every hamseg ham in the SegNeXt head, on a small head (16 channels, GN) with odd sizes
# --------------------------------------------------------------------------------------------
HAMS = {
    "nmf": dict(type="NMF", R=4, eval_seed=0),
    "nmf-draws": dict(type="NMF", R=4, eval_seed=0, eval_draws=3),
    "nmf-bptt": dict(type="NMF", R=4, grad="bptt", eval_seed=0),
    "nmf-uniform-codes": dict(type="NMF", R=4, coef_init="uniform", eval_seed=1),
    "nmf-fixed": dict(type="NMF", R=4, init="fixed"),
    "nmf-online": dict(type="NMF", R=4, init="online"),
    "nmf-learned": dict(type="NMF", R=4, init="learned", grad="bptt"),
    "cd": dict(type="CD", R=4, inv_t=10, eval_seed=0),
    "cd-draws": dict(type="CD", R=4, inv_t=10, eval_seed=0, eval_draws=3),
    "cd-bptt-online": dict(type="CD", R=4, inv_t=10, grad="bptt", init="online"),
    "vq": dict(type="VQ", R=4, inv_t=10, eval_seed=0),
    "vq-draws": dict(type="VQ", R=4, inv_t=10, eval_seed=0, eval_draws=3),
    "vq-fixed": dict(type="VQ", R=4, inv_t=10, init="fixed"),
}


def small_head(ham_cfg: dict, dtype=torch.float32, align_corners: bool = False) -> HamLightHead:
    torch.manual_seed(0)
    head = HamLightHead(
        ham_channels=16,
        ham_cfg=dict(ham_cfg, train_steps=3, eval_steps=4),
        in_channels=[6, 10, 12],
        in_index=[0, 1, 2],
        channels=8,
        num_classes=5,
        norm_cfg=dict(type="GN", num_groups=4, requires_grad=True),
        dropout_ratio=0.0,
        align_corners=align_corners,
    )
    for m in head.modules():  # GN affine away from 1/0, so a missed or doubled norm shows
        if isinstance(m, torch.nn.GroupNorm):
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return head.to(dtype)


def small_levels(dtype=torch.float32, seed: int = 3) -> list[torch.Tensor]:
    """Three levels of odd sizes; level 0 (the head's) 9 x 11."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(6, 9, 11), (10, 5, 6), (12, 3, 3)]
    return [torch.randn(2, c, h, w, generator=g, dtype=dtype) for c, h, w in shapes]


@pytest.mark.parametrize("name", list(HAMS))
def test_every_ham_builds_trains_a_step_and_repeats_in_eval(name):
    head = small_head(HAMS[name]).train()
    ham = head.hamburger.ham
    assert type(ham).__name__ == HAMS[name]["type"] and ham.D == 16
    levels = [x.requires_grad_(True) for x in small_levels()]
    before = {k: v.clone() for k, v in head.state_dict().items()}
    out = head(levels)
    assert out.shape == (2, 5, 9, 11)
    loss = torch.nn.functional.cross_entropy(out, torch.randint(0, 5, (2, 9, 11)))
    loss.backward()
    for x in levels:
        assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for pname, p in head.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
    if HAMS[name].get("init") == "learned":
        assert ham.bases.grad.abs().sum() > 0  # the learned dictionary trains (BPTT)
    torch.optim.SGD(head.parameters(), lr=0.1).step()
    after = head.state_dict()
    assert not torch.equal(after["conv_seg.weight"], before["conv_seg.weight"])
    if HAMS[name].get("init") == "online":  # the EMA warm start moved with the training forward
        assert not torch.equal(after["hamburger.ham.bases"], before["hamburger.ham.bases"])
    head.eval()
    with torch.no_grad():
        first = head(small_levels())
        assert torch.isfinite(first).all()
        assert torch.equal(first, head(small_levels()))  # seeded or fixed: the same logits
