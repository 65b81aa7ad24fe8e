"""Threshold-rank policy parameters on a certified delta table, interpolated per row.

The optimal threshold policy (:func:`rass_theory.optimize.policies.optimal_threshold_policy`)
costs a search over thresholds (about a second) per distinct ``delta``, which a batch with
per-row deltas cannot afford.  This module ships, for each tabulated ``K``, the optimal policy
parameters on a delta grid (``optimize/data/threshold_policies.npz``, built by
``optimize/data/build_threshold_table.py``) and interpolates them per row:

    p(delta) = Phi(t(delta)),  w'(delta)   piecewise linear in delta between grid points,
    t(delta) = Phi^{-1}(p(delta))          (p = 1 is t = +inf, plain RASS with w').

Exactness needs no optimality (proofs/P8-value-aware-policies.md, P8.5): any ``(t, w')`` with
``w'`` on the simplex is a valid threshold policy, and the verifier uses the same interpolated
``(t, w')`` in the selection, the acceptance ratio and the residual of each row.  Optimality is
certified on the table: at every check point (midpoints of the grid, and beyond its end) the
table stores the optimum and the interpolated policy's exact acceptance; their largest
difference is :attr:`ThresholdTable.max_gap`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

import numpy as np
from scipy.special import ndtr, ndtri

from rass_theory._validation import check_delta, check_K

__all__ = ["ThresholdTable", "threshold_table", "tabulated_K", "interpolate_parameters", "TABLE_FILE",
           "InterpolatedThresholdPolicy"]

#: Package data file of the table (``rass_theory/optimize/data``).
TABLE_FILE = "threshold_policies.npz"


@dataclass(frozen=True)
class ThresholdTable:
    """Certified threshold-policy parameters for one ``K``.

    Attributes
    ----------
    K : int
    grid : ndarray (G,)
        Ascending deltas, starting at 0.
    p : ndarray (G,)
        ``Phi(t)`` of the stored policy at each grid delta (1 means ``t = +inf``).
    weights : ndarray (G, K)
        Fallback rank weights ``w'`` (ascending ranks, on the simplex).
    acceptance : ndarray (G,)
        Exact acceptance of the stored policy at the grid deltas.
    check_delta, check_optimum, check_acceptance : ndarray (C,)
        Check points (between grid points and beyond the last one), the optimal threshold
        policy's acceptance there and the interpolated policy's exact acceptance.
    """

    K: int
    grid: np.ndarray
    p: np.ndarray
    weights: np.ndarray
    acceptance: np.ndarray
    check_delta: np.ndarray
    check_optimum: np.ndarray
    check_acceptance: np.ndarray

    @property
    def gaps(self) -> np.ndarray:
        """``optimum - interpolated acceptance`` at each check point (``>= 0`` up to rounding)."""
        return self.check_optimum - self.check_acceptance

    @property
    def max_gap(self) -> float:
        """Largest loss of acceptance against the optimal threshold policy at the check points."""
        return float(np.max(self.gaps)) if self.gaps.size else 0.0

    def parameters(self, delta):
        """``(t (n,), weights (n, K))`` of the interpolated policy at ``delta`` (scalar or (n,))."""
        d = np.atleast_1d(check_delta(delta, allow_array=True)).astype(np.float64)
        if d.ndim != 1:
            raise ValueError(f"delta must be a scalar or a 1-d array, got shape {d.shape}")
        return interpolate_parameters(self.grid, self.p, self.weights, d)


def interpolate_parameters(grid, p, weights, delta):
    """Piecewise-linear ``(p, w')`` in ``delta``; returns ``(t = Phi^{-1}(p), w')`` per row.

    Beyond the ends of ``grid`` the end parameters are held.  A convex combination of simplex
    vectors is on the simplex, and of numbers in ``(0, 1]`` is in ``(0, 1]``, so every row gets a
    valid threshold policy (``p = 1``: ``t = +inf``).
    """
    g = np.asarray(grid, dtype=np.float64)
    d = np.asarray(delta, dtype=np.float64)
    idx = np.clip(np.searchsorted(g, d, side="right") - 1, 0, g.size - 2)
    lam = np.clip((d - g[idx]) / (g[idx + 1] - g[idx]), 0.0, 1.0)
    pr = (1.0 - lam) * p[idx] + lam * p[idx + 1]
    # (1 - lam) a + lam b >= 0 in floating point for lam in [0, 1] and a, b >= 0 (table weights
    # are non-negative, tests/optimize/test_threshold_table.py): no clip needed
    w = (1.0 - lam)[:, None] * weights[idx] + lam[:, None] * weights[idx + 1]
    w /= w.sum(axis=1, keepdims=True)
    t = np.where(pr >= 1.0, np.inf, ndtri(np.minimum(pr, 1.0)))
    return t, w


@functools.lru_cache(maxsize=1)
def _load() -> dict:
    path = resources.files("rass_theory.optimize").joinpath("data", TABLE_FILE)
    with resources.as_file(path) as p, np.load(p) as z:
        return {k: np.array(z[k]) for k in z.files}


def tabulated_K() -> tuple:
    """The ``K`` values the shipped table covers."""
    return tuple(int(k) for k in _load()["Ks"])


@functools.lru_cache(maxsize=None)
def threshold_table(K) -> ThresholdTable:
    """The shipped :class:`ThresholdTable` for ``K``.

    Raises
    ------
    ValueError
        ``K`` is not tabulated (the message lists the tabulated values); ``K = 1`` has no
        threshold (every policy selects the only child).
    """
    K = check_K(K)
    data = _load()
    if K not in tabulated_K():
        raise ValueError(f"K = {K} has no certified threshold table; tabulated K: {tabulated_K()} "
                         "(build one with rass_theory/optimize/data/build_threshold_table.py)")
    key = f"K{K}_"
    arrays = {name: data[key + name] for name in ("grid", "p", "weights", "acceptance", "check_delta",
                                                  "check_optimum", "check_acceptance")}
    for a in arrays.values():
        a.setflags(write=False)
    return ThresholdTable(K=K, **arrays)


class InterpolatedThresholdPolicy:
    """Threshold-rank policy whose ``(t, w')`` follow each row's ``delta`` through a certified table.

    Parameters
    ----------
    K : int
        A tabulated ``K`` (:func:`tabulated_K`).

    Notes
    -----
    Row ``i`` uses ``(t_i, w'_i) = ThresholdTable.parameters(delta_i)``: select the top child if its
    ``s >= t_i``, otherwise rank ``j ~ w'_i``.  Its selected law is P8.1's with that row's
    parameters (:class:`rass_theory.optimize.threshold.ThresholdRowLaw`), and the verifier couples
    each row with its own law, so the output is exact for every row (P8.2, P8.5).  Acceptance at
    ``delta``: ``1 - TV(g_{t(delta), w'(delta)}, f)``, within :attr:`ThresholdTable.max_gap` of the
    optimal threshold policy at the table's check points.

    Implements the :class:`rass_theory.optimize.policies.SelectionPolicy` protocol
    (``select``, ``selected_logpdf``, ``selected_cdf``) plus ``sample_residual(delta, u)`` (the
    per-row residual draw of :func:`rass_theory.optimize.threshold.sample_threshold_residual`) and
    ``acceptance(delta)``.
    """

    def __init__(self, K):
        self.table = threshold_table(K)
        self.K = self.table.K

    def __repr__(self) -> str:
        return f"InterpolatedThresholdPolicy(K={self.K})"

    def parameters(self, delta):
        """``(t (n,), w' (n, K))`` for the rows' deltas."""
        return self.table.parameters(delta)

    def law(self, delta):
        """:class:`rass_theory.optimize.threshold.ThresholdRowLaw` of the rows' deltas."""
        from .threshold import ThresholdRowLaw

        return ThresholdRowLaw(*self.parameters(delta))

    def select(self, delta, s, rng):
        from rass_theory._validation import as_generator

        s = np.asarray(s, dtype=np.float64)
        if s.ndim != 2 or s.shape[1] != self.K:
            raise ValueError(f"s must have shape (n, K={self.K}), got {s.shape}")
        n = s.shape[0]
        d = np.broadcast_to(np.asarray(delta, dtype=np.float64), (n,))
        t, w = self.parameters(d)
        rng = as_generator(rng)
        u = rng.random(n)
        rank = np.minimum((u[:, None] >= np.cumsum(w, axis=1)[:, :-1]).sum(axis=1), self.K - 1)
        order = np.argsort(s, axis=1, kind="stable")
        rows = np.arange(n)
        top = order[:, -1]
        return np.where(s[rows, top] >= t, top, order[rows, rank])

    def _rows(self, delta, s):
        s = np.asarray(s, dtype=np.float64)
        d = np.atleast_1d(np.asarray(delta, dtype=np.float64))
        n = s.shape[0]
        if d.size not in (1, n):
            raise ValueError(f"delta has {d.size} rows but s has {n}")
        return np.broadcast_to(d, (n,)), s

    def selected_logpdf(self, delta, s):
        d, s = self._rows(delta, s)
        return self.law(d).logpdf(s)

    def selected_cdf(self, delta, s):
        d, s = self._rows(delta, s)
        return self.law(d).cdf(s)

    def sample_residual(self, delta, u):
        """Draws from ``(f - g_i)_+ / TV`` per row (``delta``, ``u`` of shape ``(n,)``)."""
        from .threshold import sample_threshold_residual

        d = np.asarray(delta, dtype=np.float64).reshape(-1)
        return sample_threshold_residual(self.law(d), d, u)

    def acceptance(self, delta) -> float:
        """Exact acceptance at one ``delta`` (P8.1, P4.1)."""
        from .policies import threshold_acceptance

        delta = check_delta(delta)
        t, w = self.parameters(delta)
        return float(threshold_acceptance(self.K, delta, float(t[0]), w[0]))
