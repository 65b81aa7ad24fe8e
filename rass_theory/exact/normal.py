"""Standard normal building blocks that keep relative accuracy in both tails.

Everything the exact laws need from the standard normal beyond :mod:`scipy.special`
(``ndtr``, ``log_ndtr``): ``log phi``, an interval mass
``Phi(b) - Phi(a)`` without cancellation, the shift difference ``Phi(x - delta) - Phi(x)``
with relative accuracy for tiny ``delta``, and a quantile that stays accurate in the upper
tail when the upper-tail probability is known directly.

See ``proofs/P7-selected-law.md`` for how these enter the selected and residual laws.
"""
from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri

from rass_theory.backend import NUMPY
from rass_theory.exact.laws import shift_difference as engine_shift_difference

__all__ = [
    "LOG_SQRT_2PI",
    "log_phi",
    "interval_mass",
    "shift_difference",
    "quantile_from_tails",
]

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)

# 12-point Gauss-Legendre rule on [-1, 1]; used for short intervals of the normal density.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(12)


def log_phi(s):
    """Log of the standard normal density, ``-s^2/2 - log sqrt(2 pi)``."""
    s = np.asarray(s, dtype=np.float64)
    return -0.5 * s * s - LOG_SQRT_2PI


def interval_mass(a, b):
    """``Phi(b) - Phi(a)`` for ``a <= b`` with relative accuracy.

    Parameters
    ----------
    a, b : array_like
        Interval ends (broadcast together); ``-inf``/``inf`` allowed.

    Returns
    -------
    ndarray
        The standard normal mass of ``[a, b]`` (``>= 0``); negative when ``b < a``.

    Notes
    -----
    Three regimes, each free of catastrophic cancellation:

    * short intervals, ``(b - a) * max(1, |a|, |b|) <= 1``: a 12-point Gauss-Legendre rule
      for ``int_a^b phi``.  On the rescaled interval ``[0, 1]`` the integrand is
      ``phi(a) exp(c u - (b-a)^2 u^2 / 2)`` with ``|c|, (b-a)^2 <= 1``, and the Gauss-Legendre
      remainder ``(n!)^4 / ((2n+1) ((2n)!)^3) max|d^{2n}/du^{2n}|`` with ``n = 12`` is below
      ``1e-25`` relative to the integral;
    * both ends in the upper half-line: ``Phi(-a) - Phi(-b)`` (upper-tail probabilities are
      computed to full relative precision and, the interval being long relative to the local
      scale ``1/max(1, |x|)``, they differ by a factor of at least about ``e^{1/2}``, so the
      subtraction loses under two bits);
    * otherwise ``Phi(b) - Phi(a)``, symmetric argument.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    a, b = np.broadcast_arrays(a, b)
    sign = np.where(b >= a, 1.0, -1.0)
    lo = np.minimum(a, b)
    hi = np.maximum(a, b)
    width = hi - lo
    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.maximum(1.0, np.maximum(np.abs(lo), np.abs(hi)))
        short = np.isfinite(width) & (width * scale <= 1.0)
    out = np.where(lo >= 0.0, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))
    if np.any(short):
        out = np.array(out, dtype=np.float64, copy=True)
        half = 0.5 * width[short]
        out[short] = _gl_mass(lo[short] + half, half)
    return sign * out


def _gl_mass(center, half_width):
    """``int_{center - h}^{center + h} phi`` by 12-point Gauss-Legendre (short intervals only)."""
    pts = center[:, None] + half_width[:, None] * _GL_NODES[None, :]
    return half_width * (np.exp(log_phi(pts)) @ _GL_WEIGHTS)


def shift_difference(x, delta):
    """``Phi(x - delta) - Phi(x)`` with relative accuracy, also for tiny ``delta``.

    Notes
    -----
    Equals ``-int_{x - delta}^{x} phi``; it is ``O(delta)`` and is the CDF of ``f - phi`` where
    ``f = phi(. - delta)``.  The one implementation of the engine,
    :func:`rass_theory.exact.laws.shift_difference` (the half-width ``delta / 2`` used exactly, a
    Hermite series on short intervals, upper tails otherwise).  At ``x = +-inf`` it is 0.
    """
    x, delta = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(delta, dtype=np.float64))
    out = np.zeros(x.shape)
    fin = np.isfinite(x)
    out[fin] = engine_shift_difference(NUMPY, x[fin], delta[fin])
    return out


def quantile_from_tails(lower, upper):
    """``Phi^{-1}`` of a probability given both as ``lower = p`` and ``upper = 1 - p``.

    Uses ``ndtri(lower)`` when ``lower <= 1/2`` and ``-ndtri(upper)`` otherwise, so the
    upper tail keeps its digits when ``upper`` was computed directly (not as ``1 - p``).
    """
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    return np.where(lower <= 0.5, ndtri(np.minimum(lower, 0.5)), -ndtri(np.minimum(upper, 0.5)))
