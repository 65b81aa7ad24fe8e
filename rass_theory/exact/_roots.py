"""One vectorised bracketing root finder for every crossing and inverse-CDF solve.

The residual-law engine solves many independent scalar equations at once: the crossings of
``f`` and ``g`` (one per grid cell where ``log f - log g`` changes sign) and the inverse CDF
of the residual (one per rejected row).  All of them go through :func:`bracketed_roots`,
which is :func:`scipy.optimize.elementwise.find_root` (Chandrupatla's method: inverse
quadratic interpolation safeguarded by bisection, per element, converged elements dropped)
with the tolerances the exact module documents: a bracket of relative width ``~8 eps``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["bracketed_roots"]

_EPS = np.finfo(np.float64).eps
#: |values| are clipped here: only the sign matters far from a root, and an infinite value
#: (``g = 0`` gives ``log f - log g = +inf``) would stop the iteration
_CLIP = 1e3


def bracketed_roots(fun, a, b, *, args=(), xrtol: float = 4 * _EPS, xatol: float | None = None,
                    maxiter: int = 200):
    """Roots of ``fun`` in brackets ``[a, b]`` (``fun(a)`` and ``fun(b)`` of opposite sign).

    Parameters
    ----------
    fun : callable
        Elementwise ``fun(x, *args) -> array`` of ``x``'s shape; NaN is read as 0.
    a, b : ndarray
        Bracket ends (same shape; ``a <= b``).
    args : tuple of ndarray
        Extra per-element arrays broadcastable with ``a`` (e.g. row indices).
    xrtol, xatol : float
        Relative and absolute tolerance on the root (defaults: ``4 eps`` and ``4 eps``, so the
        final bracket is ``<= 8 eps (1 + |x|)`` wide).
    maxiter : int

    Returns
    -------
    ndarray
        The root estimates; where a bracket end is an exact zero it is returned, and where the
        bracket is empty (``a == b``) ``a``.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return a.copy()
    # imported on first use: scipy.optimize costs ~1 s to import, and most callers of
    # rass_theory.exact (closed forms, the bound) never solve a root
    from scipy.optimize.elementwise import find_root

    def clipped(x, *extra):
        v = np.asarray(fun(x, *extra), dtype=np.float64)
        return np.clip(np.where(np.isnan(v), 0.0, v), -_CLIP, _CLIP)

    tol = dict(xrtol=xrtol, xatol=4 * _EPS if xatol is None else xatol, fatol=0.0, frtol=0.0)
    res = find_root(clipped, (a, np.maximum(b, a)), args=args, tolerances=tol, maxiter=maxiter)
    x = np.asarray(res.x, dtype=np.float64)
    lo, hi = res.bracket
    # an invalid bracket (values of one sign after clipping, or a == b): keep the better end
    bad = ~np.isfinite(x)
    if np.any(bad):
        fl, fh = res.f_bracket
        x = np.where(bad, np.where(np.abs(fl) <= np.abs(fh), lo, hi), x)
    return x
