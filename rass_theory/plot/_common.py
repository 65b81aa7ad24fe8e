"""Helpers shared by the figure modules: argument checks and progress reporting."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._validation import check_K, check_delta, check_positive_int

ProgressFn = Callable[[int, int], None]


def check_K_values(K_values, name: str = "K_values", *, maximum: int = 64) -> tuple[int, ...]:
    """Validate a non-empty collection of distinct positive integers (sorted ascending)."""
    if isinstance(K_values, (int, np.integer)) and not isinstance(K_values, bool):
        K_values = (K_values,)
    try:
        values = [check_K(k, maximum=maximum) for k in K_values]
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from None
    if not values:
        raise ValueError(f"{name} must not be empty")
    return tuple(sorted(set(values)))


def check_deltas(deltas, name: str = "deltas", *, maximum: float = 40.0) -> np.ndarray:
    """Validate a non-empty 1-d grid of finite deltas in ``[0, maximum]`` (sorted, unique)."""
    arr = check_delta(np.atleast_1d(np.asarray(deltas, dtype=float)), name=name, allow_array=True)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty one-dimensional grid, got shape {arr.shape}")
    if np.any(arr > maximum):
        raise ValueError(f"{name} must be <= {maximum}, got max {arr.max()}")
    return np.unique(arr)


def check_ints(values, name: str, *, minimum: int = 1) -> tuple[int, ...]:
    """Validate a non-empty collection of integers ``>= minimum`` (sorted, unique)."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = (values,)
    out = [check_positive_int(v, name, minimum=minimum) for v in values]
    if not out:
        raise ValueError(f"{name} must not be empty")
    return tuple(sorted(set(out)))


class Progress:
    """Count work units and forward ``(done, total)`` to an optional callback."""

    def __init__(self, total: int, callback: ProgressFn | None):
        self.total, self.done, self.callback = int(total), 0, callback
        if callback is not None:
            callback(0, self.total)

    def step(self, n: int = 1):
        self.done += n
        if self.callback is not None:
            self.callback(self.done, self.total)


def optimal_weights_cached(K: int, delta: float):
    """``optimal_rank_weights(K, delta)`` for the figures (that function is itself memoised, so
    the acceptance, weights and tree figures of one report share their convex programs)."""
    from rass_theory.optimize import optimal_rank_weights

    return optimal_rank_weights(int(K), float(delta))


def rass_acceptance(K: int, delta: float) -> float:
    """Exact RASS acceptance at the optimal weights, through :func:`optimal_weights_cached`.

    Equals ``rt.acceptance("rass", K, delta)``: the acceptance is evaluated exactly at the
    optimiser's returned weights.
    """
    from rass_theory.optimize.dispatch import acceptance

    if K == 1:
        return float(acceptance("rass", 1, delta))
    res = optimal_weights_cached(int(K), float(delta))
    return float(acceptance("rass", int(K), float(delta), weights=res.weights))


def tile_images(images, n_side: int) -> np.ndarray:
    """Tile ``n_side**2`` images of shape ``(h, w)`` into one mosaic with 1-pixel NaN gutters."""
    images = np.asarray(images, dtype=float)
    h, w = images.shape[1:]
    out = np.full((n_side * (h + 1) - 1, n_side * (w + 1) - 1), np.nan)
    for i, img in enumerate(images[: n_side * n_side]):
        r, c = divmod(i, n_side)
        out[r * (h + 1): r * (h + 1) + h, c * (w + 1): c * (w + 1) + w] = img
    return out
