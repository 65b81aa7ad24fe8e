"""A small flow-matching velocity network trained on scikit-learn's 8x8 digits, shipped as data.

``digits_flow()`` loads the weights in ``rass_theory/models/data/digits_flow.pt`` (trained by
``bench/train_digits.py``) into :class:`DigitsVelocityNet` and wraps it as a velocity model
(``dim = 64``, ``image_shape = (8, 8)``).  States live in the normalised pixel space
``x = pixels / 8 - 1`` (pixels in ``[0, 16]``, so data in ``[-1, 1]``); :func:`to_pixels` maps
back.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .shipped import load_weights_blob

__all__ = ["DigitsVelocityNet", "digits_flow", "to_pixels", "from_pixels", "load_digits_split",
           "WEIGHTS_FILE", "PIXEL_SCALE"]

#: package-data file holding the state dict and the architecture
WEIGHTS_FILE = "digits_flow.pt"
#: ``x = pixels / PIXEL_SCALE - 1``
PIXEL_SCALE = 8.0


class DigitsVelocityNet(nn.Module):
    """MLP velocity ``u(x, s)`` with a sinusoidal embedding of the noise level ``s``.

    Parameters
    ----------
    dim : int
        State dimension (64 for 8x8 digits).
    hidden : int
        Width of the hidden layers.
    depth : int
        Number of hidden layers (each ``Linear -> SiLU``), the time embedding added to the
        first hidden layer's input.
    n_freq : int
        Frequencies of the embedding ``[s, sin(2^i pi s), cos(2^i pi s)]``, ``i < n_freq``.

    Notes
    -----
    Trained by flow matching on ``x_s = (1 - s) x0 + s xi``: minimise
    ``E || u(x_s, s) - (xi - x0) ||^2`` over ``s ~ U(0, 1)``, ``xi ~ N(0, I)``, ``x0`` a digit.
    """

    def __init__(self, dim: int = 64, hidden: int = 192, depth: int = 3, n_freq: int = 8):
        super().__init__()
        self.dim, self.hidden, self.depth, self.n_freq = dim, hidden, depth, n_freq
        emb = 2 * n_freq + 1
        self.inp = nn.Linear(dim + emb, hidden)
        self.hidden_layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(depth - 1))
        self.out = nn.Linear(hidden, dim)
        self.register_buffer("freqs", (2.0 ** torch.arange(n_freq)) * math.pi, persistent=False)

    def embed(self, s: torch.Tensor) -> torch.Tensor:
        ang = s[:, None] * self.freqs.to(s.dtype)
        return torch.cat([s[:, None], torch.sin(ang), torch.cos(ang)], dim=1)

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.silu(self.inp(torch.cat([x, self.embed(s)], dim=1)))
        for layer in self.hidden_layers:
            h = h + torch.nn.functional.silu(layer(h))
        return self.out(h)

    def config(self) -> dict:
        return {"dim": self.dim, "hidden": self.hidden, "depth": self.depth, "n_freq": self.n_freq}


def to_pixels(x):
    """Normalised states -> pixel intensities in ``[0, 16]`` (clipped)."""
    return ((x + 1.0) * PIXEL_SCALE).clip(0.0, 16.0)


def from_pixels(pixels):
    """Pixel intensities in ``[0, 16]`` -> normalised states ``pixels / 8 - 1``."""
    return pixels / PIXEL_SCALE - 1.0


def load_digits_split(test_fraction: float = 0.2, seed: int = 0):
    """scikit-learn's bundled 8x8 digits, normalised, split into (train, held-out).

    Returns
    -------
    x_train, y_train, x_test, y_test : ndarray
        States ``pixels / 8 - 1`` (float64, ``(n, 64)``) and labels.  The split is the one the
        shipped weights were trained on (``seed=0``, 20 % held out, stratified).
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = from_pixels(data.data.astype("float64"))
    x_tr, x_te, y_tr, y_te = train_test_split(x, data.target, test_size=test_fraction, random_state=seed,
                                              stratify=data.target)
    return x_tr, y_tr, x_te, y_te


def load_weights(path=None):
    """``(config, state_dict)`` from the shipped file (or ``path``), with ``weights_only=True``."""
    blob = load_weights_blob(WEIGHTS_FILE, path, made_by="bench/train_digits.py")
    return blob["config"], blob["state_dict"]


def digits_flow(device="cpu", dtype=torch.float32, path=None):
    """The shipped digits velocity model, ready for the samplers.

    Parameters
    ----------
    device : str or torch.device
    dtype : torch.dtype
        float32 (default) or float64.
    path : path-like, optional
        Another weights file written by ``bench/train_digits.py``.

    Returns
    -------
    VelocityModel
        ``dim == 64``, ``image_shape == (8, 8)``, name ``"digits_flow"``.
    """
    from .adapters import VelocityModel

    config, state = load_weights(path)
    net = DigitsVelocityNet(**{k: int(v) for k, v in config.items()})
    net.load_state_dict(state)
    net = net.to(device=device, dtype=dtype).eval()
    for p in net.parameters():
        p.requires_grad_(False)
    def velocity(x, s):
        return net(x.reshape(x.shape[0], net.dim), s).reshape(x.shape)

    return VelocityModel(velocity, dim=net.dim, image_shape=(8, 8), name="digits_flow",
                         module=net)
