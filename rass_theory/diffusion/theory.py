"""Predicted speedup of a run from exact per-node acceptance at the deltas it met.

See ``proofs/P9-tree-exactness.md`` section 6 for why the prediction is unbiased up to the
Monte-Carlo error of the per-(step, depth) acceptance means.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_delta, check_K

__all__ = ["SpeedupPrediction", "acceptance_curve", "predict_speedup"]

_GRID_STEP = 0.1
#: the tabulation grid stops here: beyond it every rule's acceptance is below ``(K + 1) Phi(-20) < 1e-80``
#: for ``K <= 4096`` (a grid to ``max_delta = 1e6`` would need ten million solves)
_GRID_TOP = 40.0


_TABLES: dict = {}
_SPELLINGS = {"optimallist": "optimal_list"}


def _canonical(rule: str) -> str:
    """Rule name without case, dashes or underscores, mapped back to its registered spelling."""
    key = rule.strip().lower().replace("-", "").replace("_", "")
    return _SPELLINGS.get(key, key)


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
    if rule == "threshold":
        from ..optimize import policies

        return lambda dl: policies.optimal_threshold_policy(K, dl).acceptance
    from ..optimize.dispatch import acceptance

    if rule == "rmc" and K != 1:
        raise ValueError(f"rule 'rmc' needs K = 1, got K = {K}")
    try:
        acceptance(rule, K, 0.5)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"no exact acceptance known for rule {rule!r}: {exc}") from exc
    return lambda dl: acceptance(rule, K, dl)


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
    the last grid value; the grid stops at ``delta = 40`` whatever ``max_delta`` (every rule's
    acceptance is below ``1e-80`` there).
    """
    K = check_K(K)
    max_delta = min(check_delta(max_delta, name="max_delta"), _GRID_TOP)
    top = float(np.ceil(max(max_delta, _GRID_STEP) / _GRID_STEP) * _GRID_STEP)
    if isinstance(rule, str):
        key = _canonical(rule)
        if key in ("rmc", "dgrs"):
            from ..optimize.dispatch import acceptance

            if key == "rmc" and K != 1:
                raise ValueError(f"rule 'rmc' needs K = 1, got K = {K}")
            return np.vectorize(lambda dl: acceptance(key, K, float(dl)), otypes=[float])
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
    """Predicted (and, where measured, measured) speedup.

    Attributes
    ----------
    predicted_speedup : float
        ``n_standard_steps / predicted_calls``.
    measured_speedup, measured_se, z : float
        The recorded run's ratio-of-means speedup, its SE, and ``(measured - predicted) / SE``;
        ``nan`` when the prediction is for another verifier or tree shape than the recorded one.
    predicted_calls : float
        Expected target calls per trajectory from the dynamic programme.
    acceptance_by_depth_predicted, acceptance_by_depth_measured : ndarray
        Mean exact acceptance ``alpha(K_j, delta)`` over the recorded nodes at depth ``j`` and the
        measured acceptance rate there (``nan`` for another verifier/shape).
    acceptance_by_depth_se : ndarray
        ``sqrt(sum alpha (1 - alpha)) / n_j``: standard error of the measured rate around the
        predicted one.
    verifier : str
    widths : tuple
    """

    predicted_speedup: float
    measured_speedup: float
    measured_se: float
    z: float
    predicted_calls: float
    acceptance_by_depth_predicted: np.ndarray
    acceptance_by_depth_measured: np.ndarray
    acceptance_by_depth_se: np.ndarray
    verifier: str = ""
    widths: tuple = ()


def _check_acceptance_table(A, n_std, prefetch, draft):
    """``A`` as a float array ``(n_std, L, 4)`` of probabilities, and ``n_std``; ``ValueError`` naming the rule broken."""
    from .._validation import check_positive_int

    n_std = check_positive_int(n_std, "n_std")
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 3 or A.shape[0] < n_std or A.shape[1] < 1 or A.shape[2] != 4:
        raise ValueError(f"A must have shape (n_std, L, 4) with n_std = {n_std} rows and L >= 1, got {A.shape}")
    if not np.all((A >= 0.0) & (A <= 1.0)):
        raise ValueError("A must hold acceptance probabilities in [0, 1] (no NaN)")
    if prefetch not in ("nearest", "parent", "none"):
        raise ValueError(f"prefetch must be one of ('nearest', 'parent', 'none'), got {prefetch!r}")
    if draft not in ("frozen", "model"):
        raise ValueError(f"draft must be 'frozen' or 'model', got {draft!r}")
    return A, n_std


def expected_calls(A: np.ndarray, *, n_std: int, prefetch: str, evaluate_leaves: bool, draft: str = "frozen") -> float:
    """Expected target calls per trajectory of the round-length dynamic programme.

    Parameters
    ----------
    A : ndarray, shape (n_std, L, 4)
        ``A[t, j, c]``: acceptance probability of a depth-``j`` node at stochastic step ``t``
        (counted from the first stochastic step) in a round whose drift-source class is ``c``
        (``traces.SOURCE_CLASSES``: exact, nearest, parent, model).
    n_std : int
    prefetch : {"nearest", "parent", "none"}
    evaluate_leaves : bool
    draft : {"frozen", "model"}

    Notes
    -----
    State ``(t, c)``: the next round starts at step ``t`` with a frozen velocity of class ``c``.
    With ``l = min(L, n_std - t)`` and ``A_i = A[t + i, i, c']`` (``c' = exact`` when
    ``prefetch="none"``, which pays one call to evaluate the root unless ``c`` is already exact),
    the round ends

    * by a correction at depth ``m - 1 < l - 1`` (commits ``m``) with probability
      ``prod_{i<m-1} A_i (1 - A_{m-1})``; next class ``nearest`` under ``prefetch="nearest"``
      (the children were evaluated), else ``parent``;
    * by a correction at depth ``l - 1`` (commits ``l``): next class ``nearest`` if
      ``prefetch="nearest"`` and the leaves were evaluated, else ``parent``;
    * at a leaf (commits ``l``) with probability ``prod_{i<l} A_i``: next class ``exact`` if
      the leaves were evaluated, else ``parent``.

    The round costs one batched call unless the root is exact, ``l = 1`` and leaves are not
    evaluated.  ``C(n_std, .) = 0``; the frozen draft adds the initial evaluation and starts
    in class ``exact``.  Proof: ``proofs/P9-tree-exactness.md`` section 6.
    """
    A, n_std = _check_acceptance_table(A, n_std, prefetch, draft)
    L = A.shape[1]
    EX, NE, PA, MO = range(4)
    C = np.zeros((n_std + 1, 4))
    for t in range(n_std - 1, -1, -1):
        ell = min(L, n_std - t)
        for c in range(4):
            if draft == "model":
                if c != MO:
                    continue
                c_eff, cost = MO, 1.0
            else:
                if c == MO:
                    continue
                root_call = prefetch == "none" and c != EX
                c_eff = EX if root_call else c
                cost = float(root_call) + float(ell >= 2 or c_eff != EX or evaluate_leaves)
            nxt_corr = MO if draft == "model" else (NE if prefetch == "nearest" else PA)
            nxt_corr_last = MO if draft == "model" else (NE if (prefetch == "nearest" and evaluate_leaves) else PA)
            nxt_leaf = MO if draft == "model" else (EX if evaluate_leaves else PA)
            reach, expect = 1.0, 0.0
            for m in range(1, ell + 1):
                a = A[t + m - 1, m - 1, c_eff]
                if m < ell:
                    expect += reach * (1 - a) * C[t + m, nxt_corr]
                else:
                    expect += reach * ((1 - a) * C[t + m, nxt_corr_last] + a * C[t + m, nxt_leaf])
                reach *= a
            C[t, c] = cost + expect
    if draft == "model":
        return float(C[0, MO])
    return float(1.0 + C[0, EX])


def _requested_shape(recorded, K, L):
    from .trees import TreeShape

    if K is None and L is None:
        return TreeShape(tuple(recorded))
    if K is None:
        K = recorded[0]
    if L is None and isinstance(K, (int, np.integer)):
        L = len(recorded)
    return TreeShape.from_spec(K, L)


def predict_speedup(trace_or_run, verifier=None, K=None, L=None, *, rule=None) -> SpeedupPrediction:
    """Predict the speedup of a verifier and tree shape from a recorded delta trace.

    Parameters
    ----------
    trace_or_run : SpeculativeResult or DeltaTrace
    verifier : str or verifier, optional
        Rule whose exact acceptance to use (``"rmc"``, ``"dgrs"``, ``"rass"``, ``"threshold"``,
        ``"optimal_list"``, or an object with ``expected_acceptance(K, delta)``); defaults to the
        recorded verifier.  ``rule`` is an older name for the same argument.
    K, L : int or sequence, optional
        Tree shape to predict (``TreeShape.from_spec`` rules); defaults to the recorded shape.

    Returns
    -------
    SpeedupPrediction
        With measured values and ``z`` when verifier and shape are the recorded ones.

    Notes
    -----
    For each recorded node, ``alpha(rule, K_j, delta)`` is its exact acceptance probability
    under the requested width at its depth.  Their means per cell (node step, depth,
    drift-source class; :meth:`DeltaTrace.cell_means`) feed :func:`expected_calls`.  For the
    recorded verifier and shape, ``P(accept | reach the node) = E[alpha(delta) | reach]`` and the
    cell means estimate it without bias (P9 section 6), so the prediction matches the measured
    speedup up to Monte-Carlo error.  For another verifier or shape it assumes the deltas met at
    a given (step, depth, source class) keep their law -- exact for the root's delta given its
    class, an approximation deeper in the tree (paths differ); measured agreement is reported in
    ``bench/results/gm_speedup_table.md``.
    """
    from .traces import DeltaTrace

    if verifier is not None and rule is not None:
        raise ValueError("give the verifier once: verifier= or its older name rule=, not both")
    verifier = rule if verifier is None else verifier
    if not isinstance(trace_or_run, DeltaTrace) and not hasattr(trace_or_run, "nodes"):
        raise TypeError(f"trace_or_run must be a DeltaTrace or a speculative run (SpeculativeResult), "
                        f"got {type(trace_or_run).__name__}")
    trace = trace_or_run if isinstance(trace_or_run, DeltaTrace) else DeltaTrace.from_run(trace_or_run)
    same_rule = verifier is None or (isinstance(verifier, str) and trace.verifier is not None
                                     and _canonical(verifier) == _canonical(trace.verifier))
    rule = trace.verifier if verifier is None else verifier
    if rule is None:
        raise ValueError("the trace does not name its verifier; pass verifier=")
    shape = _requested_shape(trace.widths, K, L)
    same = same_rule and tuple(shape.widths) == tuple(trace.widths)
    Lp = shape.depth
    rec_depth = np.minimum(trace.depth, Lp - 1)
    widths_at = np.asarray(shape.widths)[np.minimum(trace.depth, Lp - 1)]
    alpha = np.empty(trace.delta.shape)
    top = min(10.0, float(trace.delta.max())) if trace.delta.size else 1.0
    for Kj in set(shape.widths):
        m = widths_at == Kj
        if m.any():
            alpha[m] = acceptance_curve(rule, Kj, max_delta=top)(trace.delta[m])
    A = trace.cell_means(alpha, Lp)
    total = expected_calls(A, n_std=trace.n_std, prefetch=trace.prefetch, evaluate_leaves=trace.evaluate_leaves,
                           draft=trace.draft)
    predicted = trace.n_std / total
    Lr = trace.depth_recorded
    pooled = np.array([alpha[rec_depth == j].mean() if np.any(rec_depth == j) else np.nan for j in range(Lp)])
    se = np.array([np.sqrt(np.sum(alpha[rec_depth == j] * (1 - alpha[rec_depth == j]))) /
                   max(1, np.count_nonzero(rec_depth == j)) for j in range(Lp)])
    measured = se_m = z = float("nan")
    rate = np.full(Lp, np.nan)
    if same and trace.target_calls is not None:
        from .results import speedup_estimate

        measured, se_m = speedup_estimate(trace.n_std, trace.target_calls)
        z = (measured - predicted) / se_m if se_m > 0 else 0.0
        if not isinstance(trace_or_run, DeltaTrace):
            rate[:Lr] = trace_or_run.acceptance_by_depth()[:Lp]
    name = rule if isinstance(rule, str) else getattr(rule, "name", type(rule).__name__)
    return SpeedupPrediction(float(predicted), float(measured), float(se_m), float(z), float(total), pooled, rate, se,
                             verifier=str(name), widths=tuple(shape.widths))
