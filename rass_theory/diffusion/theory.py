"""Predicted speedup of a run from exact per-node acceptance at the deltas it met.

See ``proofs/P9-tree-exactness.md`` section 6 for why the prediction is unbiased up to the
Monte-Carlo error of the per-(step, depth) acceptance means.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_K

__all__ = ["acceptance_curve", "SpeedupPrediction", "predict_speedup"]

_GRID_STEP = 0.1


_TABLES: dict = {}


def _grid_values(rule: str, K: int, top: float):
    """Tabulated acceptance on ``0, h, ..., top``; the table per ``(rule, K)`` only grows."""
    n_points = int(round(top / _GRID_STEP)) + 1
    grid, values = _TABLES.get((rule, K), (np.zeros(0), np.zeros(0)))
    if grid.size < n_points:
        point = _pointwise(rule, K)
        new = np.arange(grid.size, n_points) * _GRID_STEP
        values = np.concatenate([values, [point(float(dl)) for dl in new]])
        grid = np.arange(n_points) * _GRID_STEP
        _TABLES[(rule, K)] = (grid, values)
    return grid[:n_points], values[:n_points]


def _pointwise(rule: str, K: int):
    if rule in ("rmc", "dgrs", "rass"):
        import rass_theory as rt

        if rule == "rmc" and K != 1:
            raise ValueError(f"rule 'rmc' needs K = 1, got K = {K}")
        return lambda dl: rt.acceptance(rule, K, dl)
    if rule == "threshold":
        from ..optimize import policies

        return lambda dl: policies.optimal_threshold_policy(K, dl).acceptance
    raise ValueError(f"no exact acceptance known for rule {rule!r}")


def acceptance_curve(rule, K: int, *, max_delta: float = 10.0):
    """Vectorised exact acceptance ``delta -> alpha(rule, K, delta)``.

    Parameters
    ----------
    rule : str or verifier
        ``"rmc"``, ``"dgrs"``, ``"rass"``, ``"threshold"``, or a verifier object with an
        ``expected_acceptance(K, delta)`` method (the project's built-in verifiers).
    K : int
    max_delta : float
        Upper end of the tabulation grid (rounded up to a grid point).

    Returns
    -------
    callable
        ``f(delta array) -> acceptance array``.

    Notes
    -----
    ``rmc``/``dgrs`` use ``rt.acceptance`` directly.  Rules that need an optimisation per
    ``delta`` (``rass``, ``threshold``, verifier objects) are tabulated on a grid of step
    ``h = 0.1`` on ``[0, max_delta]`` and interpolated linearly; the interpolation error is at
    most ``max|alpha''| h^2 / 8 < 1e-3`` for ``|alpha''| < 0.8``.  Deltas beyond the grid use
    the last grid value.
    """
    K = check_K(K)
    top = float(np.ceil(max(float(max_delta), _GRID_STEP) / _GRID_STEP) * _GRID_STEP)
    if isinstance(rule, str):
        key = rule.strip().lower().replace("-", "").replace("_", "")
        if key in ("rmc", "dgrs"):
            import rass_theory as rt

            if key == "rmc" and K != 1:
                raise ValueError(f"rule 'rmc' needs K = 1, got K = {K}")
            return np.vectorize(lambda dl: rt.acceptance(key, K, float(dl)), otypes=[float])
        grid, values = _grid_values(key, K, top)
    else:
        method = getattr(rule, "expected_acceptance", None)
        if method is None:
            raise ValueError("rule must be a rule name or a verifier with expected_acceptance(K, delta)")
        grid = np.arange(0.0, top + _GRID_STEP / 2, _GRID_STEP)
        values = np.array([method(K, float(dl)) for dl in grid], dtype=float)
        if not np.all(np.isfinite(values)):
            raise ValueError("the verifier's expected_acceptance returned non-finite values")

    def curve(delta):
        return np.interp(np.asarray(delta, dtype=float), grid, values)

    return curve


@dataclass(frozen=True)
class SpeedupPrediction:
    """Predicted vs measured speedup of one run.

    Attributes
    ----------
    predicted_speedup, measured_speedup, measured_se : float
    z : float
        ``(measured - predicted) / measured_se``.
    predicted_calls : float
        Expected target calls per trajectory from the dynamic programme.
    acceptance_by_depth_predicted, acceptance_by_depth_measured : ndarray
        Mean exact acceptance ``alpha(K_j, delta)`` over the nodes met at depth ``j`` and the
        measured acceptance rate there (the in-situ check of each verifier).
    acceptance_by_depth_se : ndarray
        ``sqrt(sum alpha (1 - alpha)) / n_j``: standard error of the measured rate around the
        predicted one.
    """

    predicted_speedup: float
    measured_speedup: float
    measured_se: float
    z: float
    predicted_calls: float
    acceptance_by_depth_predicted: np.ndarray
    acceptance_by_depth_measured: np.ndarray
    acceptance_by_depth_se: np.ndarray


def predict_speedup(run, rule=None) -> SpeedupPrediction:
    """Predict the speedup of ``run`` from exact acceptance at the deltas it met.

    Parameters
    ----------
    run : SpeculativeResult
    rule : str or verifier, optional
        Rule whose exact acceptance to use; defaults to ``run.verifier`` (a rule name).

    Notes
    -----
    Let ``A_{k,j}`` be the mean of ``alpha(K_j, delta)`` over the nodes met at depth ``j`` of
    rounds starting at step ``k`` (pooled over ``k`` where a cell is empty).  Given the round
    reached depth ``j``, the node there accepts with probability ``alpha(K_j, delta)``, so
    ``P(reach j+1 | reach j) = E[alpha | reach j] ~ A_{k,j}``.  A round from ``k`` with
    ``l = min(L, n - k)`` commits ``m < l`` steps with probability
    ``prod_{i<m-1} A_{k,i} (1 - A_{k,m-1})`` and ``l`` steps with ``prod_{i<l-1} A_{k,i}``.
    Expected calls ``C(k) = c_k + sum_m P_k(m) C(k + m)``, ``C(n) = 0``, with ``c_k = 1`` except
    the frozen draft's first round at ``k = 0`` when ``L = 1`` (root already evaluated); the
    frozen draft adds the initial evaluation.  Prediction: ``n / C_total``.
    """
    rule = run.verifier if rule is None else rule
    shape = run.shape
    n = run.n_standard_steps
    nodes = run.nodes
    start = nodes.step - nodes.depth
    alpha = np.empty(nodes.delta.shape)
    for Kj in set(shape.widths):
        m = nodes.K == Kj
        if m.any():
            alpha[m] = acceptance_curve(rule, Kj, max_delta=min(10.0, nodes.delta.max()))(nodes.delta[m])
    L = shape.depth
    pooled = np.array([alpha[nodes.depth == j].mean() if np.any(nodes.depth == j) else 0.0 for j in range(L)])
    A = np.tile(pooled, (n, 1))
    sums = np.zeros((n, L))
    counts = np.zeros((n, L))
    np.add.at(sums, (start, nodes.depth), alpha)
    np.add.at(counts, (start, nodes.depth), 1)
    have = counts > 0
    A[have] = sums[have] / counts[have]

    frozen = run.draft == "frozen"
    C = np.zeros(n + 1)
    for k in range(n - 1, -1, -1):
        ell = min(L, n - k)
        reach = 1.0
        expect = 0.0
        for mlen in range(1, ell + 1):
            if mlen < ell:
                p = reach * (1 - A[k, mlen - 1])
            else:
                p = reach
            expect += p * C[k + mlen]
            reach *= A[k, mlen - 1]
        c_k = 0.0 if (frozen and k == 0 and ell == 1) else 1.0
        C[k] = c_k + expect
    total = C[0] + (1.0 if frozen else 0.0)
    predicted = n / total

    measured_rate = run.acceptance_by_depth()
    se = np.array([np.sqrt(np.sum(alpha[nodes.depth == j] * (1 - alpha[nodes.depth == j]))) /
                   max(1, np.count_nonzero(nodes.depth == j)) for j in range(L)])
    z = (run.speedup - predicted) / run.speedup_se if run.speedup_se > 0 else 0.0
    return SpeedupPrediction(float(predicted), run.speedup, run.speedup_se, float(z), float(total),
                             pooled, measured_rate, se)
