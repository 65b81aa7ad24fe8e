"""Argument validation shared by every public function.

Each helper raises ``ValueError`` (or ``TypeError``) whose message names the argument and
the rule it broke, so that bad input never turns into a silent NaN deep inside a formula.
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "check_K",
    "check_delta",
    "check_weights",
    "WEIGHTS_ATOL",
    "check_positive_int",
    "check_probability",
    "check_finite_array",
    "as_generator",
]


def check_positive_int(value, name: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` after checking ``minimum <= value <= maximum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_K(K, *, maximum: int | None = None) -> int:
    """Validate the number of children per node ``K`` (a positive integer)."""
    return check_positive_int(K, "K", minimum=1, maximum=maximum)


def check_delta(delta, *, name: str = "delta", allow_array: bool = False):
    """Validate a standardised mean displacement: finite and ``>= 0``.

    Returns a Python float, or a float64 array when ``allow_array`` is true.
    """
    if isinstance(delta, bool):
        raise TypeError(f"{name} must be a real number, got a bool")
    try:
        raw = np.asarray(delta)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number, got {delta!r}") from exc
    # strings ("1" would parse), None (it would read as NaN), objects and booleans are not numbers
    if raw.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real number or an array of them, got {delta!r} "
                        f"(dtype {raw.dtype})")
    arr = raw.astype(np.float64, copy=False)
    if arr.ndim > 0 and not allow_array:
        raise ValueError(f"{name} must be a scalar, got an array of shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {delta!r}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got {delta!r}")
    return arr if arr.ndim > 0 else float(arr)


#: the one tolerance of every weight check (entries >= -WEIGHTS_ATOL, sums within WEIGHTS_ATOL * K)
WEIGHTS_ATOL = 1e-9


def check_weights(weights, K: int | None = None, *, name: str = "weights", n: int | None = None,
                  renormalise: bool = True) -> np.ndarray:
    """Validate rank weights on the probability simplex: one routine for every entry point.

    Parameters
    ----------
    weights : array_like, shape (K,) or, when ``n`` is given, (n, K)
        Finite; entries ``>= -WEIGHTS_ATOL``; each vector sums to 1 within ``WEIGHTS_ATOL * K``
        (``WEIGHTS_ATOL = 1e-9``).
    K : int, optional
        Required number of ranks.
    name : str
        Name used in error messages.
    n : int, optional
        Also accept per-row weights of shape ``(n, K)`` (``n = -1``: any number of rows).
    renormalise : bool
        Return ``clip(w, 0) / sum`` (default) or only the clipped weights (the exact laws read
        ``w / sum(w)`` themselves, keeping deviations from uniform weights to relative accuracy).

    Returns
    -------
    ndarray, float64
    """
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers, got {weights!r}") from exc
    if n is None and w.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {w.shape}")
    if w.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (K,) or (n, K), got shape {w.shape}")
    if w.shape[-1] == 0:
        raise ValueError(f"{name} must not be empty (K >= 1), got shape {w.shape}")
    if K is not None and w.shape[-1] != K:
        if w.ndim == 1:
            raise ValueError(f"{name} must have length K={K}, got length {w.size}")
        raise ValueError(f"{name} must have shape (n, K) with K={K}, got shape {w.shape}")
    if w.ndim == 2 and n is not None and n >= 0 and w.shape[0] != n:
        raise ValueError(f"{name} must have shape (K,) or (n, K) = {(n, w.shape[1])}, got {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} must be finite, got {w}")
    if np.any(w < -WEIGHTS_ATOL):
        raise ValueError(f"{name} must be non-negative (tolerance {WEIGHTS_ATOL}), min entry {w.min()!r}")
    total = w.sum(axis=-1)
    bad = np.abs(total - 1.0) > WEIGHTS_ATOL * max(1, w.shape[-1])
    if np.any(bad):
        raise ValueError(f"{name} must sum to 1 (tolerance {WEIGHTS_ATOL} * K), "
                         f"got sum {np.atleast_1d(total)[np.atleast_1d(bad)][0]!r}")
    w = np.clip(w, 0.0, None)
    return w / w.sum(axis=-1, keepdims=True) if renormalise else w


def check_probability(value, name: str, *, open_interval: bool = True) -> float:
    """Validate a probability such as a significance level ``alpha``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if open_interval and not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {value}")
    if not open_interval and not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def check_finite_array(array, name: str, *, ndim: int | None = None, dtype_kind: str = "f") -> np.ndarray:
    """Validate a real, finite NumPy array (optionally of a given number of dimensions)."""
    arr = np.asarray(array)
    if dtype_kind == "f" and arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or infinity)")
    return arr


def as_generator(rng) -> np.random.Generator:
    """Normalise ``rng`` (None, int, SeedSequence or Generator) to a NumPy ``Generator``."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (numbers.Integral, np.random.SeedSequence)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be None, an int, a SeedSequence or a numpy Generator, got {type(rng).__name__}")
