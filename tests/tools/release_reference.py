"""The released HamNet (VOC, Hamburger "V2", NMF) rebuilt in plain PyTorch from
shared/reference/hamburger-facts.md ("What the public release does exactly"), not from mmseg or
hamseg: the converted mmseg model must compute its function. Names follow the release's state
dict, so its weights load with ``strict=True``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (stride, dilation) -> 1x1 (x4), BN after each, ReLU(out + shortcut)."""

    def __init__(self, inplanes: int, planes: int, stride: int, dilation: int, downsample: bool):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, dilation, dilation, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.downsample = (
            nn.Sequential(
                nn.Conv2d(inplanes, planes * 4, 1, stride, bias=False), nn.BatchNorm2d(planes * 4)
            )
            if downsample
            else None
        )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(out + shortcut)


def _layer(inplanes: int, planes: int, stride: int, dilations: Sequence[int]) -> nn.Sequential:
    blocks = [Bottleneck(inplanes, planes, stride, dilations[0], True)]
    blocks += [Bottleneck(planes * 4, planes, 1, d, False) for d in dilations[1:]]
    return nn.Sequential(*blocks)


class DeepStemResNet(nn.Module):
    """ImageNet ResNet of the release (names as in resnet101-2a57e44d.pth), output stride 8.

    Args:
        blocks: Bottlenecks per stage, (3, 4, 23, 3) for ResNet-101.
        num_classes: Size of the ImageNet classifier ``fc`` (present in the ImageNet file).
    """

    def __init__(self, blocks: Sequence[int] = (3, 4, 23, 3), num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2, 1, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, 1, 1, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.Conv2d(64, 128, 3, 1, 1, bias=False),
        )
        self.bn1 = nn.BatchNorm2d(128)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = _layer(128, 64, 1, [1] * blocks[0])
        self.layer2 = _layer(256, 128, 2, [1] * blocks[1])
        self.layer3 = _layer(512, 256, 1, [1] + [2] * (blocks[2] - 1))
        self.layer4 = _layer(1024, 512, 1, [2, 8, 16][: blocks[3]])
        self.fc = nn.Linear(2048, num_classes)

    def features(self, x: Tensor) -> Tensor:
        """Layer-4 features (B, 2048, H/8, W/8) (rounded up)."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


class ConvBNReLU(nn.Module):
    def __init__(self, cin: int, cout: int, k: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, 1, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)))


class ReleaseNMF(nn.Module):
    """NMF ham of the release (see the module docstring), S = 1, R = 64, K = 6."""

    def __init__(self, S: int = 1, R: int = 64, steps: int = 6):
        super().__init__()
        self.S, self.R, self.steps = S, R, steps

    @staticmethod
    def _coef(x: Tensor, bases: Tensor, coef: Tensor) -> Tensor:
        numer = torch.bmm(x.transpose(1, 2), bases)  # (BS, N, R)
        denom = coef.bmm(bases.transpose(1, 2).bmm(bases))  # (BS, N, R)
        return coef * numer / (denom + 1e-6)

    def forward(self, x: Tensor) -> Tensor:
        B, C, H, W = x.shape
        D = C // self.S
        x = x.view(B * self.S, D, H * W)
        bases = F.normalize(torch.rand((B * self.S, D, self.R), dtype=x.dtype), dim=1)
        with torch.no_grad():
            coef = torch.bmm(x.transpose(1, 2), bases).softmax(dim=-1)  # inv_t = 1
            for _ in range(self.steps):
                coef = self._coef(x, bases, coef)
                numer = torch.bmm(x, coef)  # (BS, D, R)
                denom = bases.bmm(coef.transpose(1, 2).bmm(coef))  # (BS, D, R)
                bases = bases * numer / (denom + 1e-6)
        coef = self._coef(x, bases, coef)
        return torch.bmm(bases, coef.transpose(1, 2)).view(B, C, H, W)


class HamburgerV2(nn.Module):
    def __init__(self, C: int = 512):
        super().__init__()
        self.lower_bread = nn.Sequential(nn.Conv2d(C, C, 1), nn.ReLU(inplace=True))
        self.ham = ReleaseNMF()
        self.cheese = ConvBNReLU(C, C, 1)
        self.upper_bread = nn.Conv2d(C, C, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        out = self.upper_bread(self.cheese(self.ham(self.lower_bread(x))))
        return F.relu(x + out)


class ReleaseHamNet(nn.Module):
    """HamNet of the release; ``state_dict()`` names equal the released checkpoint's."""

    def __init__(self, num_classes: int = 21, blocks: Sequence[int] = (3, 4, 23, 3)):
        super().__init__()
        r = DeepStemResNet(blocks)
        self.backbone = nn.Sequential(
            r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3, r.layer4
        )
        self.squeeze = ConvBNReLU(2048, 512, 3)
        self.hamburger = HamburgerV2(512)
        self.align = ConvBNReLU(512, 256, 3)
        self.fc = nn.Sequential(nn.Dropout2d(0.1), nn.Conv2d(256, num_classes, 1))

    def forward(self, img: Tensor) -> Tensor:
        x = self.align(self.hamburger(self.squeeze(self.backbone(img))))
        return F.interpolate(self.fc(x), img.shape[-2:], mode="bilinear", align_corners=True)


def read_listing(path: str) -> list[tuple[str, tuple[int, ...], str]]:
    """``(name, shape, dtype)`` rows of a state-dict listing (``name (d0, d1) dtype``)."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            name, rest = line.split(" ", 1)
            shape_text, dtype = rest.rsplit(" ", 1)
            shape = tuple(int(d) for d in shape_text.strip("()").replace(" ", "").split(",") if d)
            rows.append((name, shape, dtype))
    return rows


def synthetic_state_dict(
    rows: Sequence[tuple[str, tuple[int, ...], str]], seed: int = 0
) -> dict[str, Tensor]:
    """Random weights with the listed names, shapes and dtypes, scaled to keep activations sane.

    Conv weights ~ N(0, 1 / fan_in), norm weights ~ U(0.5, 1), biases and running means small,
    running variances ~ U(0.5, 1.5), counters 0.
    """
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, shape, dtype in rows:
        if dtype == "int64":
            state[name] = torch.zeros(shape, dtype=torch.int64)
            continue
        if name.endswith("running_var"):
            t = 0.5 + torch.rand(shape, generator=gen)
        elif len(shape) == 4:
            fan_in = shape[1] * shape[2] * shape[3]
            t = torch.randn(shape, generator=gen) / fan_in**0.5
        elif name.endswith("weight") and len(shape) == 1:
            t = 0.5 + 0.5 * torch.rand(shape, generator=gen)
        else:
            t = 0.1 * torch.randn(shape, generator=gen)
        state[name] = t.to(getattr(torch, dtype))
    return state
