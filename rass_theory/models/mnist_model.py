"""A small plain-torch UNet velocity model trained on MNIST 28x28, shipped as data.

``mnist_unet()`` loads the weights in ``rass_theory/models/data/mnist_unet.pt`` (trained by
``bench/train_mnist.py``) into :class:`MnistUNet` and wraps it as a velocity model
(``dim = 784``, ``image_shape = (1, 28, 28)``).  States live in the normalised pixel space
``x = pixels / 127.5 - 1`` (see :mod:`rass_theory.models.mnist_data`).
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .mnist_data import MNIST_SHAPE
from .shipped import load_weights_blob

__all__ = ["MnistUNet", "mnist_unet", "load_unet_weights", "WEIGHTS_FILE", "WeightsMismatchError"]

#: package-data file holding the state dict and the architecture
WEIGHTS_FILE = "mnist_unet.pt"


class WeightsMismatchError(ValueError):
    """A weights file does not fit the architecture it names (missing, extra or reshaped tensors)."""


class _ResBlock(nn.Module):
    """``x + conv(silu(gn(conv(silu(gn(x))) + proj(temb))))`` at one resolution."""

    def __init__(self, channels: int, temb: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.proj = nn.Linear(temb, channels)
        self.norm2 = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.proj(temb)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return x + h


class MnistUNet(nn.Module):
    """UNet velocity ``u(x, s)`` on ``(n, 1, 28, 28)`` images, resolutions 28 -> 14 -> 7 -> 14 -> 28.

    Parameters
    ----------
    channels : tuple of 3 int
        Widths at 28x28, 14x14 and 7x7.
    n_mid : int
        Residual blocks at 7x7.
    temb : int
        Width of the time embedding.
    n_freq : int
        Frequencies of the sinusoidal embedding of ``s``: ``sin, cos(pi f_i s)`` with ``f_i``
        geometric from 1 to 500.
    groups : int
        GroupNorm groups (must divide every width).

    Notes
    -----
    Trained by flow matching on the interpolant ``x_s = (1 - s) x0 + s xi`` (``s = 1`` noise,
    ``s = 0`` data): minimise ``E || u(x_s, s) - (xi - x0) ||^2``, whose minimiser is the
    velocity ``E[xi - x0 | x_s]`` the samplers integrate (``bench/train_mnist.py``).  Skip
    connections are added (not concatenated); down-sampling is a stride-2 convolution and
    up-sampling a stride-2 transposed convolution.
    """

    def __init__(self, channels=(16, 32, 64), n_mid: int = 2, temb: int = 64, n_freq: int = 16,
                 groups: int = 8):
        super().__init__()
        c1, c2, c3 = (int(c) for c in channels)
        self.channels, self.n_mid, self.temb, self.n_freq, self.groups = (c1, c2, c3), n_mid, temb, n_freq, groups
        self.register_buffer("freqs", math.pi * torch.logspace(0.0, math.log10(500.0), n_freq),
                             persistent=False)
        self.time = nn.Sequential(nn.Linear(2 * n_freq, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.inp = nn.Conv2d(1, c1, 3, padding=1)
        self.enc1 = _ResBlock(c1, temb, groups)
        self.down1 = nn.Conv2d(c1, c2, 3, stride=2, padding=1)
        self.enc2 = _ResBlock(c2, temb, groups)
        self.down2 = nn.Conv2d(c2, c3, 3, stride=2, padding=1)
        self.mid = nn.ModuleList(_ResBlock(c3, temb, groups) for _ in range(n_mid))
        self.up2 = nn.ConvTranspose2d(c3, c2, 2, stride=2)
        self.dec2 = _ResBlock(c2, temb, groups)
        self.up1 = nn.ConvTranspose2d(c2, c1, 2, stride=2)
        self.dec1 = _ResBlock(c1, temb, groups)
        self.out_norm = nn.GroupNorm(groups, c1)
        self.out = nn.Conv2d(c1, 1, 3, padding=1)

    def embed(self, s: torch.Tensor) -> torch.Tensor:
        ang = s[:, None] * self.freqs.to(s.dtype)
        return self.time(torch.cat([torch.sin(ang), torch.cos(ang)], dim=1))

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        t = self.embed(s)
        h1 = self.enc1(self.inp(x), t)                       # 28x28
        h2 = self.enc2(self.down1(h1), t)                    # 14x14
        h = self.down2(h2)                                   # 7x7
        for block in self.mid:
            h = block(h, t)
        h = self.dec2(self.up2(h) + h2, t)
        h = self.dec1(self.up1(h) + h1, t)
        return self.out(F.silu(self.out_norm(h)))

    def config(self) -> dict:
        return {"channels": list(self.channels), "n_mid": self.n_mid, "temb": self.temb,
                "n_freq": self.n_freq, "groups": self.groups}


def load_unet_weights(path=None):
    """``(config, state_dict)`` from the shipped file (or ``path``), with ``weights_only=True``."""
    blob = load_weights_blob(WEIGHTS_FILE, path, made_by="bench/train_mnist.py")
    if not isinstance(blob, dict) or "config" not in blob or "state_dict" not in blob:
        raise WeightsMismatchError(f"weights file {path or WEIGHTS_FILE} must hold a dict with 'config' and "
                                   "'state_dict' (as written by bench/train_mnist.py)")
    return blob["config"], blob["state_dict"]


def build_unet(config: dict, state_dict: dict) -> MnistUNet:
    """An :class:`MnistUNet` from ``config`` with exactly ``state_dict``'s tensors loaded.

    Raises
    ------
    WeightsMismatchError
        If the configuration is not one of the architecture's, or the state dict misses a tensor,
        has an extra one, or has one of another shape: never a partly random network.
    """
    try:
        net = MnistUNet(channels=tuple(int(c) for c in config["channels"]), n_mid=int(config["n_mid"]),
                        temb=int(config["temb"]), n_freq=int(config["n_freq"]), groups=int(config["groups"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise WeightsMismatchError(f"weights config {config!r} does not describe an MnistUNet: {exc}") from exc
    expected = net.state_dict()
    missing = sorted(set(expected) - set(state_dict))
    extra = sorted(set(state_dict) - set(expected))
    reshaped = sorted(k for k in set(expected) & set(state_dict)
                      if tuple(expected[k].shape) != tuple(state_dict[k].shape))
    if missing or extra or reshaped:
        raise WeightsMismatchError(
            "weights do not match the MnistUNet architecture "
            f"(config {config}): missing {missing[:5]}, unexpected {extra[:5]}, "
            f"wrong shape {[(k, tuple(state_dict[k].shape), tuple(expected[k].shape)) for k in reshaped[:5]]}")
    net.load_state_dict(state_dict, strict=True)
    return net


def mnist_unet(device="cpu", dtype=torch.float32, path=None):
    """The shipped MNIST UNet velocity model, ready for the samplers.

    Parameters
    ----------
    device : str or torch.device
    dtype : torch.dtype
        float32 (default) or float64.
    path : path-like, optional
        Another weights file written by ``bench/train_mnist.py``.

    Returns
    -------
    VelocityModel
        ``dim == 784``, ``image_shape == (1, 28, 28)``, name ``"mnist_unet"``.  Its
        ``velocity(x, s)`` takes flattened states ``(n, 784)``; the wrapped network itself
        (``.fn``) takes images ``(n, 1, 28, 28)`` and raises :class:`ValueError` naming that shape
        for any other shape, dtype or device.

    Raises
    ------
    WeightsMismatchError
        If the weights file does not fit the architecture.
    """
    from .adapters import VelocityModel

    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    config, state = load_unet_weights(path)
    net = build_unet(config, state).to(device=device, dtype=dtype).eval()
    for p in net.parameters():
        p.requires_grad_(False)
    dev = next(net.parameters()).device
    shape = MNIST_SHAPE

    def velocity(x, s):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"mnist_unet: x must be a torch.Tensor of shape (n, {', '.join(map(str, shape))}), "
                             f"got {type(x).__name__}")
        if x.ndim != 4 or tuple(x.shape[1:]) != shape:
            raise ValueError(f"mnist_unet: x must have shape (n, {', '.join(map(str, shape))}), got {tuple(x.shape)}")
        if x.dtype != dtype:
            raise ValueError(f"mnist_unet: x must have dtype {dtype} (shape (n, 1, 28, 28)), got {x.dtype}")
        if x.device != dev:
            raise ValueError(f"mnist_unet: x (shape (n, 1, 28, 28)) must be on {dev}, got {x.device}")
        s = torch.as_tensor(s, dtype=x.dtype, device=x.device)
        if s.ndim == 0:
            s = s.expand(x.shape[0])
        if tuple(s.shape) != (x.shape[0],):
            raise ValueError(f"mnist_unet: s must be a scalar or have shape ({x.shape[0]},), got {tuple(s.shape)}")
        return net(x, s)

    return VelocityModel(velocity, dim=784, image_shape=shape, name="mnist_unet", module=net)
