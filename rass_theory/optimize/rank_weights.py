"""Optimal RASS rank weights: ``w* = argmin_{w in simplex} TV(g_w, N(delta, 1))``.

Method (proofs/P4-weight-program.md):

1. *Start*: KKT Newton (:mod:`rass_theory.optimize.kkt`) from the nearest known optimal
   structures (support, crossings, sign pattern) in a shipped table of certified optima
   (package data ``data/optimal_weights.jsonl``, built by ``optimize/data/build_table.py`` for
   K in {2..8, 16} on a delta grid); a table start is only a start: the result is certified at
   the requested delta (step 3) or discarded.  Otherwise the quadrature LP in its small dual
   form, a parametrised cvxpy problem (:class:`rass_theory.optimize.quadrature.CellDualLP`,
   HiGHS).  The result depends only on ``(K, delta)``, never on earlier calls (memoised with
   ``functools.lru_cache``; the LP is solved without a warm start).
2. *Polish* on the exact objective: crossings of ``f`` and ``g_w`` found to machine precision,
   interval masses from closed-form order-statistic CDFs, exact gradient and Hessian, active-set
   Newton steps (:func:`rass_theory.optimize.mixture_tv.maximize_acceptance`).
3. *Certify*: by convexity, ``TV* >= TV(w) - gap`` with the Frank-Wolfe gap
   ``gap = max_j b_j(A) - sum_j w_j b_j(A)``, ``A = {f > g_w}`` (no discretisation error).
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import io
from dataclasses import dataclass, field

import numpy as np
from scipy.special import erf, ndtr

from rass_theory._validation import check_delta, check_K

from rass_theory.exact.segments import (
    TVEvaluation,
    certified_gap,
    evaluate_tv,
    rank_segment as _segment,
)

__all__ = [
    "OptimalWeightsResult",
    "OptimalWeightsTable",
    "OptimalWeightsInterpolator",
    "optimal_rank_weights",
    "optimal_weights_table",
    "optimal_weights_interpolator",
    "DEGENERATE_DELTA",
]

#: ``delta`` at or below which the kernels coincide to working precision (``proofs/P1-rank1-reduction.md``).
DEGENERATE_DELTA = float(np.sqrt(np.finfo(np.float64).eps))
_MAX_K = 4096
_LP_NODES = 161
_GAP_TARGET = 1e-9


@dataclass(frozen=True)
class OptimalWeightsResult:
    """Optimal rank weights and their certified quality.

    Attributes
    ----------
    K, delta : int, float
        The node.
    weights : ndarray (K,)
        Rank weights, ascending ranks (``j = K-1`` is the child furthest toward the target).
    acceptance : float
        ``1 - TV(g_w, f)`` evaluated exactly at ``weights`` (crossings + closed-form masses).
    tv : float
        ``TV(g_w, f)`` at ``weights``, summed directly (keeps relative accuracy at small delta).
    gap : float
        Certified upper bound on ``tv - TV*`` (Frank-Wolfe gap, P4.3).
    lower_bound : float
        Certified lower bound on the optimal TV, ``max(tv - gap, 0)``.
    status : str
        ``"optimal"`` (gap <= 1e-9 or at the float64 rounding floor), ``"optimal_inaccurate"``
        (1e-9 < gap <= 1e-7), ``"trivial"`` (K = 1), ``"degenerate"`` (delta <= sqrt(eps):
        uniform weights), or ``"inaccurate"`` (gap > 1e-7; not seen for K <= 64).
    solver : str
        How the weights were obtained.
    iterations : int
        Exact Newton iterations (or continuation steps).
    crossings : ndarray
        Crossing points of ``f`` and ``g_w``.
    left_in_A : bool
        Whether ``(-inf, crossings[0])`` lies in ``{f > g_w}`` (the sign pattern).
    """

    K: int
    delta: float
    weights: np.ndarray
    acceptance: float
    tv: float
    gap: float
    lower_bound: float
    status: str
    solver: str
    iterations: int = 0
    crossings: np.ndarray = field(default_factory=lambda: np.zeros(0))
    left_in_A: bool = False


def segment_spacing(K: int) -> float:
    """Spacing of :func:`rass_theory.exact.segments.evaluate_tv`'s bracketing grid on the
    segments without their own crossing search (threshold and policy segments): finer for
    large K (crossings ~ K/2).  Not the engine's ``exact.laws.grid_spacing`` (the residual
    sampler's scan, which also serves the RASS segment)."""
    return min(0.04, 0.5 / K)


def lp_range(K: int, delta: float) -> tuple[float, float]:
    """Range covered by the base cells of the exchange LP."""
    top = np.sqrt(2.0 * np.log(max(K, 2)))
    return (-top - 5.0, max(delta, top) + 5.0)


# ----------------------------------------------------------------------------------------
# Shipped table of certified optima (starting points only)
# ----------------------------------------------------------------------------------------

#: Set to False to ignore the shipped table (used when rebuilding it).
_TABLE_ENABLED = True


#: package data: one JSON row per line, ``[K, delta, left_in_A, support, weights_on_support, crossings]``
TABLE_RESOURCE = "data/optimal_weights.jsonl"


@functools.lru_cache(maxsize=1)
def _raw_table() -> dict:
    """``{K: [(delta, left_in_A, support, weights_on_support, crossings), ...]}`` read from the
    package data file :data:`TABLE_RESOURCE` (written by ``optimize/data/build_table.py``)."""
    import json
    from importlib import resources

    text = resources.files("rass_theory.optimize").joinpath(TABLE_RESOURCE).read_text()
    out: dict = {}
    for line in text.splitlines():
        if line.strip():
            k, *row = json.loads(line)
            out.setdefault(int(k), []).append(tuple(row))
    return out


@functools.lru_cache(maxsize=None)
def _table(K: int):
    """``(deltas (n,), rows)`` of the shipped table for ``K`` (empty if ``K`` is not tabulated).

    Each row is ``(delta, weights (K,), crossings, left_in_A)``; generated by
    ``rass_theory/optimize/data/build_table.py`` (certified optimal at its delta).
    """
    rows = []
    for d, left, S, wS, c in _raw_table().get(K, ()):
        w = np.zeros(K)
        w[list(S)] = wS
        rows.append((float(d), w / w.sum(), np.array(c, dtype=np.float64), bool(left)))
    return np.array([r[0] for r in rows], dtype=np.float64), tuple(rows)


def _beyond_table(K: int, delta: float) -> bool:
    """Whether ``delta`` lies past the last tabulated row of ``K`` (where the table builder
    found the top-rank vertex optimal), so that vertex is worth certifying first."""
    if not _TABLE_ENABLED:
        return False
    deltas, _ = _table(K)
    return bool(deltas.size) and delta > deltas[-1]


def _table_neighbours(K: int, delta: float) -> list:
    """The bracketing table rows of ``delta``, nearest first (deterministic; at most two)."""
    if not _TABLE_ENABLED:
        return []
    deltas, rows = _table(K)
    if deltas.size == 0:
        return []
    i = int(np.searchsorted(deltas, delta))
    cand = [k for k in (i - 1, i) if 0 <= k < deltas.size]
    cand.sort(key=lambda k: (abs(deltas[k] - delta), k))
    return [rows[k] for k in cand]


# ----------------------------------------------------------------------------------------
# The solver
# ----------------------------------------------------------------------------------------


def _closed_form_uniform(K: int, delta: float, status: str, solver: str) -> OptimalWeightsResult:
    """Uniform weights (g = phi): acceptance 2 Phi(-delta/2), A = (delta/2, inf)."""
    w = np.full(K, 1.0 / K)
    tv = float(erf(delta / (2.0 * np.sqrt(2.0))))
    acc = float(2.0 * ndtr(-delta / 2.0))
    if K == 1:
        gap = 0.0
    else:
        grad = _segment(K).component_masses(np.array([delta / 2.0]), np.array([np.inf]))[0]
        gap = max(float(np.max(grad) - grad @ w), 0.0)
    gap = min(gap, tv)  # TV* >= 0 is also a certificate
    return OptimalWeightsResult(
        K=K, delta=delta, weights=w, acceptance=acc, tv=tv, gap=gap,
        lower_bound=max(tv - gap, 0.0), status=status, solver=solver,
        crossings=np.array([delta / 2.0]),
    )


def _left_in_A(ev: TVEvaluation) -> bool:
    return bool(ev.intervals.shape[0] and ev.intervals[0, 0] == -np.inf)


def _kkt_continuation(K: int, delta: float, nb, source: str = "cached", far=None) -> OptimalWeightsResult | None:
    """Newton on the KKT system from a solved neighbour, in a few delta steps (P4.7).

    ``far``: the solved row on the other side of ``delta``.  With the same support and crossing
    pattern as ``nb`` the one-step start is the two rows' linear interpolation at ``delta``
    (error ``O(h^2)`` in the row spacing ``h``: one Newton step fewer); ``nb`` itself if that fails.
    """
    from .kkt import kkt_newton

    d0, w, c, left = nb
    if abs(delta - d0) > 0.15 * (1.0 + delta):
        return None  # too far: the support and crossing pattern usually change on the way
    seg = _segment(K)
    n_steps = int(min(max(np.ceil(abs(delta - d0) / 0.1), 1), 3))
    solved = None
    if (n_steps == 1 and far is not None and far[3] == left and far[2].size == c.size
            and np.array_equal(far[1] > 0, w > 0)):
        t = (delta - d0) / (far[0] - d0)
        solved = kkt_newton(seg, delta, w + t * (far[1] - w), c + t * (far[2] - c), left)
    steps = np.linspace(d0, delta, n_steps + 1)[1:] if solved is None else []
    for d in steps:
        solved = kkt_newton(seg, float(d), w, c, left)
        if solved is None:
            return None
        if d != delta:
            ev = evaluate_tv([seg], solved[0], float(d),
                             spacing=segment_spacing(K), hessian=False)
            if ev.crossings.size != c.size or _left_in_A(ev) != left:
                return None
            w, c = solved[0], ev.crossings
    w_new, c_new = solved
    # the search only confirms the KKT crossings (P4.7)
    ev = evaluate_tv([seg], w_new, delta,
                     spacing=segment_spacing(K), hessian=False, known_crossings=c_new)
    gap = certified_gap(ev, w_new)  # <= fw_gap(ev, w_new), its D = {} candidate
    if gap > _GAP_TARGET:
        return None
    return OptimalWeightsResult(
        K=K, delta=delta, weights=w_new, acceptance=ev.acceptance, tv=ev.tv, gap=gap,
        lower_bound=max(ev.tv - gap, 0.0), status="optimal",
        solver=f"KKT-Newton(continuation from {source} delta={d0:g}, {n_steps} step(s))",
        iterations=n_steps, crossings=ev.crossings, left_in_A=_left_in_A(ev),
    )


def _top_vertex(K: int, delta: float) -> OptimalWeightsResult | None:
    """The top rank alone, if its certificate is within 1e-12 of the acceptance (large delta)."""
    w = np.eye(K)[K - 1]
    ev = evaluate_tv([_segment(K)], w, delta,
                     spacing=segment_spacing(K), hessian=False)
    gap = certified_gap(ev, w)
    if gap > 1e-12 * ev.acceptance:
        return None
    return OptimalWeightsResult(
        K=K, delta=delta, weights=w, acceptance=ev.acceptance, tv=ev.tv, gap=gap,
        lower_bound=max(ev.tv - gap, 0.0), status="optimal", solver="top-rank vertex (certified)",
        iterations=0, crossings=ev.crossings, left_in_A=_left_in_A(ev),
    )


def _solve(K: int, delta: float, w_start=None, start_name: str = "warm",
           seed_crossings=None, near: bool = True) -> OptimalWeightsResult:
    from .quadrature import solve_weights

    if w_start is None and delta >= 2.0:
        # large delta: the top rank is the usual optimum; one exact evaluation certifies it
        w_start, start_name, near = np.eye(K)[K - 1], "top-rank", True
    pol, name, gap = solve_weights(
        [_segment(K)], delta, lp_range=lp_range(K, delta),
        spacing=segment_spacing(K), w_start=w_start, start_name=start_name, gap_target=_GAP_TARGET,
        seed_crossings=seed_crossings, try_newton_first=near,
    )
    ev = pol.evaluation
    if pol.converged or gap <= _GAP_TARGET:
        status = "optimal"
    elif gap <= 1e-7:
        status = "optimal_inaccurate"
    else:
        status = "inaccurate"
    return OptimalWeightsResult(
        K=K, delta=delta, weights=pol.weights, acceptance=ev.acceptance, tv=ev.tv, gap=gap,
        lower_bound=max(ev.tv - gap, 0.0), status=status, solver=name,
        iterations=pol.iterations, crossings=ev.crossings, left_in_A=_left_in_A(ev),
    )


def optimal_rank_weights(K, delta) -> OptimalWeightsResult:
    """Optimal RASS rank weights for ``K`` children at standardised displacement ``delta``.

    Parameters
    ----------
    K : int
        Children per node, ``K >= 1``.
    delta : float
        ``||mu_target - mu_draft|| / sigma``, finite and ``>= 0``.

    Returns
    -------
    OptimalWeightsResult
        ``.weights`` (K,) on the simplex (ascending ranks), ``.acceptance`` and ``.tv`` evaluated
        exactly at those weights, ``.gap`` (certified ``tv - TV*`` bound), ``.lower_bound``
        (certified lower bound on the optimal TV), ``.status``, ``.solver``.

    Notes
    -----
    ``TV(w) = int (f - g_w)_+`` with ``g_w = sum_j w_j b_j`` is convex in ``w`` (and C^1), so

        TV* >= TV(w) + min_j grad_j - <grad, w>,   grad_j = -b_j({f > g_w}),

    which is the certificate reported as ``gap``.  Special cases: ``K = 1`` returns ``[1]``
    (RMC, acceptance ``2 Phi(-delta/2)``); ``delta <= sqrt(eps)`` returns uniform weights
    (``g = phi``, acceptance ``2 Phi(-delta/2)`` within rounding of 1) with the certified gap
    at uniform weights.  The result is a function of ``(K, delta)`` alone, bit for bit,
    whatever was solved before in the process (memoised per ``(K, delta)``; the arrays returned
    are private copies).  Starts come from a shipped table of certified optima: its lookup is
    deterministic (the two bracketing rows, nearest first, ties to the lower delta), and past
    its last row (top rank optimal there) the top-rank vertex is certified first.  Proof and error analysis: proofs/P4-weight-program.md.

    Examples
    --------
    >>> import rass_theory as rt
    >>> res = rt.optimal_rank_weights(4, 1.0)
    >>> round(res.acceptance, 3), res.status
    (0.896, 'optimal')
    """
    K = check_K(K, maximum=_MAX_K)
    delta = float(check_delta(delta))
    res = _optimal_rank_weights(K, delta, _TABLE_ENABLED)
    # the memoised result is shared: hand out private copies of its arrays
    return dataclasses.replace(res, weights=res.weights.copy(), crossings=res.crossings.copy())


@functools.lru_cache(maxsize=4096)
def _optimal_rank_weights(K: int, delta: float, use_table: bool) -> OptimalWeightsResult:
    """The solve behind :func:`optimal_rank_weights`: a pure function of its arguments (no
    per-process warm state), memoised; ``use_table`` switches the shipped starts on or off."""
    if K == 1:
        return _closed_form_uniform(1, delta, "trivial", "closed-form")
    if delta <= DEGENERATE_DELTA:
        return _closed_form_uniform(K, delta, "degenerate", "closed-form")
    neighbours = _table_neighbours(K, delta) if use_table else []
    # the top-rank vertex first past the table (or without one) at large delta; inside the
    # table's range its rows are not that vertex, so it is only tried after them
    vertex_first = (use_table and _beyond_table(K, delta)) or (delta >= 2.0 and not neighbours)
    res = _top_vertex(K, delta) if vertex_first else None
    # KKT Newton from the bracketing rows of the shipped table (nearest first); each result is
    # certified at ``delta`` or rejected
    for i, nb in enumerate(neighbours):
        if res is not None:
            break
        res = _kkt_continuation(K, delta, nb, "table", far=neighbours[1] if i == 0 and len(neighbours) > 1 else None)
    if res is None and delta >= 2.0 and not vertex_first:
        res = _top_vertex(K, delta)
    return res if res is not None else _solve(K, delta)


# ----------------------------------------------------------------------------------------
# Sweeps
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OptimalWeightsTable:
    """Optimal weights over a grid of ``(K, delta)`` (one row per pair, K-major order).

    Attributes
    ----------
    K, delta, acceptance, tv, gap, lower_bound : ndarray (m,)
    status : tuple of str
    weights : tuple of ndarray
        Row ``i`` has length ``K[i]``.
    """

    K: np.ndarray
    delta: np.ndarray
    acceptance: np.ndarray
    tv: np.ndarray
    gap: np.ndarray
    lower_bound: np.ndarray
    status: tuple
    weights: tuple

    def to_rows(self) -> list[dict]:
        """One dict per row; weights as a list."""
        return [
            {
                "K": int(self.K[i]), "delta": float(self.delta[i]),
                "acceptance": float(self.acceptance[i]), "tv": float(self.tv[i]),
                "gap": float(self.gap[i]), "lower_bound": float(self.lower_bound[i]),
                "status": self.status[i], "weights": [float(x) for x in self.weights[i]],
            }
            for i in range(self.K.size)
        ]

    def to_csv(self, path=None) -> str:
        """CSV text (weights space-separated in one column); also written to ``path`` if given."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["K", "delta", "acceptance", "tv", "gap", "lower_bound", "status", "weights"])
        for row in self.to_rows():
            writer.writerow([row["K"], repr(row["delta"]), repr(row["acceptance"]), repr(row["tv"]),
                             repr(row["gap"]), repr(row["lower_bound"]), row["status"],
                             " ".join(repr(x) for x in row["weights"])])
        text = buf.getvalue()
        if path is not None:
            with open(path, "w", newline="") as fh:
                fh.write(text)
        return text


def optimal_weights_table(Ks, deltas) -> OptimalWeightsTable:
    """Optimal rank weights for every ``K`` in ``Ks`` and ``delta`` in ``deltas``.

    Each distinct ``(K, delta)`` is solved once by :func:`optimal_rank_weights` (so every row
    equals that function's result bit for bit); rows come back in the input order.

    Notes
    -----
    Every row carries its own certificate (``gap``); see proofs/P4-weight-program.md.
    """
    Ks = [check_K(k, maximum=_MAX_K) for k in np.atleast_1d(np.asarray(Ks)).tolist()]
    ds = np.atleast_1d(check_delta(deltas, allow_array=True)).astype(np.float64)
    if len(Ks) == 0 or ds.size == 0:
        raise ValueError("Ks and deltas must be non-empty")
    rows = []
    for K in Ks:
        sols = {}
        for d in np.unique(ds):
            sols[float(d)] = optimal_rank_weights(K, float(d))
        rows.extend(sols[float(d)] for d in ds)
    return OptimalWeightsTable(
        K=np.array([r.K for r in rows]), delta=np.array([r.delta for r in rows]),
        acceptance=np.array([r.acceptance for r in rows]), tv=np.array([r.tv for r in rows]),
        gap=np.array([r.gap for r in rows]), lower_bound=np.array([r.lower_bound for r in rows]),
        status=tuple(r.status for r in rows), weights=tuple(r.weights for r in rows),
    )


# ----------------------------------------------------------------------------------------
# Interpolator for per-row deltas
# ----------------------------------------------------------------------------------------

#: delta grid of the interpolator (dense where the weights move, sparse in the top-rank regime)
INTERPOLATION_GRID = np.concatenate([
    [0.0], np.geomspace(1e-3, 0.1, 5), np.linspace(0.15, 3.0, 20), np.linspace(3.25, 6.0, 12),
    [7.0, 8.0, 10.0, 12.0, 16.0],
])


class OptimalWeightsInterpolator:
    """Deterministic map ``delta (n,) -> weights (n, K)`` by piecewise-linear interpolation.

    Parameters
    ----------
    K : int
    grid : array, optional
        Deltas at which to solve (0 is always added); default :data:`INTERPOLATION_GRID`.

    Notes
    -----
    The grid weights are optimal (certified) at the grid deltas; between grid
    points the convex combination of two simplex vectors stays on the simplex; beyond the
    last point the last weights are held.  RASS is exact for any weights, so interpolation
    only costs optimality (measured in ``bench/bench_optimal_weights.py``).

    Attributes
    ----------
    K : int
    grid : ndarray (G,)
    weights : ndarray (G, K)
    acceptance : ndarray (G,)
        Exact acceptance at the grid weights.
    gap : ndarray (G,)
        Certified gap of each grid solution.
    solvers : tuple of str
        How each grid point was solved.
    """

    def __init__(self, K: int, grid=None):
        self.K = check_K(K, maximum=_MAX_K)
        if grid is None:
            grid = INTERPOLATION_GRID
        grid = np.unique(np.concatenate([[0.0], check_delta(grid, name="grid", allow_array=True)]))
        if grid.size < 2:
            raise ValueError("grid must contain at least one positive delta")
        self.grid = grid
        W = np.empty((self.grid.size, K))
        acc = np.empty(self.grid.size)
        gaps = np.empty(self.grid.size)
        solvers = []
        prev = None
        for i, d in enumerate(self.grid):
            if K == 1 or d <= DEGENERATE_DELTA:
                res = _closed_form_uniform(K, float(d), "degenerate", "closed-form")
            else:
                # a private warm chain: the grid never depends on what was solved before
                res = None
                if prev is not None and prev.status == "optimal" and prev.delta > DEGENERATE_DELTA:
                    res = _kkt_continuation(K, float(d), (prev.delta, prev.weights, prev.crossings,
                                                           prev.left_in_A))
                if res is None:
                    res = _solve(K, float(d), None if prev is None else prev.weights, "grid-neighbour",
                                 None if prev is None else prev.crossings, near=False)
            W[i] = np.maximum(res.weights, 0.0)       # on the simplex (interpolation keeps it there)
            acc[i] = res.acceptance
            gaps[i] = res.gap
            solvers.append(res.solver)
            prev = res
        self.weights = W
        self.weights.setflags(write=False)
        self.acceptance = acc
        self.acceptance.setflags(write=False)
        self.gap = gaps
        self.gap.setflags(write=False)
        self.solvers = tuple(solvers)

    def __call__(self, delta) -> np.ndarray:
        d = np.atleast_1d(check_delta(delta, allow_array=True)).astype(np.float64)
        if d.ndim != 1:
            raise ValueError(f"delta must be a scalar or a 1-d array, got shape {d.shape}")
        g = self.grid
        idx = np.clip(np.searchsorted(g, d, side="right") - 1, 0, g.size - 2)
        t = np.clip((d - g[idx]) / (g[idx + 1] - g[idx]), 0.0, 1.0)[:, None]
        # (1 - t) a + t b >= 0 in floating point for t in [0, 1] and a, b >= 0 (no clip needed)
        out = (1.0 - t) * self.weights[idx] + t * self.weights[idx + 1]
        out /= out.sum(axis=1, keepdims=True)
        return out


@functools.lru_cache(maxsize=None)
def _interpolator(K: int) -> OptimalWeightsInterpolator:
    return OptimalWeightsInterpolator(K)


def optimal_weights_interpolator(K) -> OptimalWeightsInterpolator:
    """Cached per-``K`` interpolator of the optimal rank weights in ``delta``.

    Parameters
    ----------
    K : int
        Children per node.

    Returns
    -------
    OptimalWeightsInterpolator
        (Build one with a denser ``grid=`` directly for a smaller interpolation loss.)
        Callable ``delta (n,) -> weights (n, K)`` on the simplex, deterministic.

    Notes
    -----
    Piecewise-linear in ``delta`` between certified optima on :data:`INTERPOLATION_GRID`
    (proofs/P4-weight-program.md, P4.6).
    """
    return _interpolator(check_K(K, maximum=_MAX_K))
