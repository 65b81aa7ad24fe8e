"""Value-aware selection policies: rules that pick one child from the list using the values
of the projections ``s``, with an exactly known selected density.

Exactness (proofs/P8-value-aware-policies.md, P8.2): if the selected child's projection has
density ``g`` (under the draft), accepting it with probability ``min(1, f/g)`` and otherwise
drawing from ``(f - g)_+ / TV(g, f)`` outputs exactly ``f``, whatever ``g`` is; the acceptance
is ``1 - TV(g, f)``.  So any policy below can be verified by the same maximal coupling and
residual as RASS (P2), and optimised by the convex program of P4 when it is linear in its
weights.

Protocol (docs/ARCHITECTURE.md): ``.K``; ``.select(delta (n,), s (n, K), rng) -> index (n,)``
(column of the selected child); ``.selected_logpdf(delta, s)`` and ``.selected_cdf(delta, s)``
per row, ``delta (n,)``, ``s (n,)`` or ``(n, m)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from rass_theory._validation import as_generator, check_delta, check_K, check_weights

from rass_theory.exact.segments import evaluate_tv, segments_cdf, segments_logpdf
from .list_rule import far_rows
from .rank_weights import segment_spacing, optimal_rank_weights
from .threshold import ThresholdRowLaw, threshold_segments

__all__ = [
    "SelectionPolicy",
    "RankPolicy",
    "ThresholdRankPolicy",
    "ThresholdPolicyResult",
    "optimal_threshold_policy",
    "threshold_acceptance",
    "TwoLevelThresholdPolicy",
    "TwoLevelPolicyResult",
    "optimal_two_level_policy",
]


@runtime_checkable
class SelectionPolicy(Protocol):
    """A rule that selects one of ``K`` children and knows its selected law exactly."""

    K: int

    def select(self, delta: np.ndarray, s: np.ndarray, rng) -> np.ndarray:
        """Column index ``(n,)`` of the selected child for projections ``s (n, K)``."""

    def selected_logpdf(self, delta: np.ndarray, s: np.ndarray) -> np.ndarray:
        """Log density of the selected child's projection, per row."""

    def selected_cdf(self, delta: np.ndarray, s: np.ndarray) -> np.ndarray:
        """CDF of the selected child's projection, per row."""


def _rows(delta, s):
    """``delta`` as ``(n,)`` (or one value), ``s`` as ``(n, m)`` and whether ``s`` came as ``(n,)``."""
    d = np.atleast_1d(check_delta(delta, allow_array=True)).astype(np.float64)
    s = np.asarray(s, dtype=np.float64)
    if s.ndim not in (1, 2):
        raise ValueError(f"s must have shape (n,) or (n, m), got {s.shape}")
    if d.size not in (1, s.shape[0]):
        raise ValueError(f"delta has {d.size} rows but s has {s.shape[0]}")
    return d, (s[:, None] if s.ndim == 1 else s), s.ndim == 1


def _ranked(s, K, rng):
    """Check the children's ``s (n, K)``; return the generator, their stable ascending order and the
    top ``s`` of every row."""
    s = np.asarray(s, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != K:
        raise ValueError(f"s must have shape (n, K={K}), got {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("s must be finite")
    order = np.argsort(s, axis=1, kind="stable")
    return as_generator(rng), order, s[np.arange(s.shape[0]), order[:, -1]]


def _draw_rank(weights, n, rng):
    cw = np.cumsum(weights)
    cw[-1] = 1.0
    return np.minimum(np.searchsorted(cw, rng.random(n), side="right"), weights.size - 1)


class _SegmentMixturePolicy:
    """Shared part of the policies whose selected law is a weighted mixture of segment laws.

    Subclasses set ``K``, ``weights`` and ``_segments`` (see :mod:`rass_theory.optimize.threshold`).
    """

    def acceptance(self, delta) -> float:
        """Exact acceptance ``1 - TV(g, N(delta, 1))`` of this policy (P4.1-P4.2, P8.2)."""
        delta = check_delta(delta)
        return evaluate_tv(self._segments, self.weights, delta,
                           spacing=segment_spacing(self.K), hessian=False).acceptance


class ThresholdRankPolicy(_SegmentMixturePolicy):
    """Select the top child if its ``s >= t``; otherwise select rank ``j ~ weights``.

    Parameters
    ----------
    K : int
    t : float
        Threshold (``inf`` gives RASS with ``weights``).
    weights : array (K,)
        Rank weights used when the top child is below ``t``.

    Notes
    -----
    ``g(s) = K phi(s) Phi(s)^(K-1)`` for ``s >= t`` and
    ``g(s) = sum_j w_j K C(K-1,j) phi(s) Phi(s)^j (Phi(t) - Phi(s))^(K-1-j)`` for ``s < t``;
    ``G(s) = Phi(s)^K`` for ``s >= t`` and ``Phi(t)^K sum_j w_j I_{Phi(s)/Phi(t)}(j+1, K-j)``
    for ``s < t`` (proofs/P8-value-aware-policies.md, P8.1).
    """

    def __init__(self, K, t, weights):
        self.K = check_K(K)
        if isinstance(t, bool) or not np.isscalar(t) or np.isnan(float(t)):
            raise ValueError(f"t must be a real number or inf, got {t!r}")
        self.t = float(t)
        self.weights = check_weights(weights, self.K)
        self._segments = threshold_segments(self.K, self.t)

    def select(self, delta, s, rng):
        rng, order, top_s = _ranked(s, self.K, rng)
        n = order.shape[0]
        j = np.where(top_s >= self.t, self.K - 1, _draw_rank(self.weights, n, rng))
        return order[np.arange(n), j]

    def _law(self, n: int):
        """The selected law of ``n`` rows in the one law engine (:class:`~rass_theory.exact.laws.RankLaw`)."""
        return ThresholdRowLaw(np.full(n, self.t), np.broadcast_to(self.weights, (n, self.K)))

    def selected_logpdf(self, delta, s):
        d, s2, flat = _rows(delta, s)
        out = self._law(s2.shape[0]).logpdf(s2)
        return out[:, 0] if flat else out

    def selected_cdf(self, delta, s):
        d, s2, flat = _rows(delta, s)
        out = self._law(s2.shape[0]).cdf(s2)
        return out[:, 0] if flat else out


class RankPolicy(ThresholdRankPolicy):
    """RASS: sort the children by ``s`` and select rank ``j ~ weights`` (ascending ranks).

    The threshold-rank policy with ``t = inf`` (the top child is never taken for its value).

    Notes
    -----
    ``g(s) = sum_j w_j K C(K-1, j) phi(s) Phi(s)^j (1 - Phi(s))^(K-1-j)``,
    ``G(s) = sum_j w_j I_{Phi(s)}(j + 1, K - j)`` (proofs/P8-value-aware-policies.md, P8.1).
    """

    def __init__(self, weights):
        weights = check_weights(weights)
        super().__init__(weights.size, np.inf, weights)


# ----------------------------------------------------------------------------------------
# Optimisation over (t, w')
# ----------------------------------------------------------------------------------------


def _inner(K: int, delta: float, t: float, w_start=None):
    """Optimal ``w'`` and certified acceptance for a fixed threshold ``t``."""
    from .quadrature import solve_weights

    top = np.sqrt(2.0 * np.log(max(K, 2)))
    pol, name, gap = solve_weights(
        threshold_segments(K, t), delta,
        lp_range=(-top - 5.0, max(delta, top) + 5.0), spacing=segment_spacing(K),
        w_start=w_start, start_name="neighbour", gap_target=1e-9,
    )
    return pol.evaluation.acceptance, pol.weights, gap, pol.evaluation.tv


def threshold_acceptance(K, delta, t, weights) -> float:
    """Exact acceptance ``1 - TV(g, f)`` of :class:`ThresholdRankPolicy` (P8.1, P4.1)."""
    return ThresholdRankPolicy(K, t, weights).acceptance(delta)


@dataclass(frozen=True)
class ThresholdPolicyResult:
    """Best threshold-rank policy for ``(K, delta)``.

    Attributes
    ----------
    policy : ThresholdRankPolicy
    acceptance : float
        Exact acceptance of ``policy``.
    t : float
        Threshold (``inf`` when plain RASS is best).
    weights : ndarray (K,)
    gap : float
        Certified gap of the inner weight program at ``t`` (optimality in ``w'`` only; the
        1-D search over ``t`` is not certified).
    rass_acceptance : float
        Optimal RASS acceptance (``t = inf``), for comparison.
    tv : float
        ``TV(g, f) = 1 - acceptance``, summed directly.
    """

    policy: ThresholdRankPolicy
    acceptance: float
    t: float
    weights: np.ndarray
    gap: float
    rass_acceptance: float
    tv: float


def _concave_upper_bound(xs, fs) -> float:
    """Upper bound on ``max a`` over ``[xs[0], xs[-1]]`` for concave ``a`` sampled at sorted ``xs``.

    With ``k`` the best sample, the maximum lies in ``[xs[k-1], xs[k+1]]``; on each of the two
    cells the chords of the neighbouring cells, extended, lie above ``a`` (concavity), so the
    maximum over the cell of the lower of the two lines bounds it (``inf`` where both chords
    are missing).
    """
    xs = np.asarray(xs, dtype=np.float64)
    fs = np.asarray(fs, dtype=np.float64)
    n, k = xs.size, int(np.argmax(fs))

    def chord(i, j):
        # (value at 0, slope) of the chord through samples i, j; None where one is missing
        if i < 0 or j >= n:
            return None
        slope = (fs[j] - fs[i]) / (xs[j] - xs[i])
        return fs[i] - slope * xs[i], slope

    def cell_max(c1, c2, lo, hi):
        # max over [lo, hi] of min(line c1, line c2) (a missing line does not bound)
        lines = [c for c in (c1, c2) if c is not None]
        if not lines:
            return np.inf
        pts = [lo, hi]
        if len(lines) == 2 and lines[0][1] != lines[1][1]:
            x = (lines[1][0] - lines[0][0]) / (lines[0][1] - lines[1][1])
            if lo < x < hi:
                pts.append(x)
        return max(min(c0 + sl * x for c0, sl in lines) for x in pts)

    ub = fs[k]
    if k > 0:
        ub = max(ub, cell_max(chord(k - 2, k - 1), chord(k, k + 1), xs[k - 1], xs[k]))
    if k < n - 1:
        ub = max(ub, cell_max(chord(k - 1, k), chord(k + 1, k + 2), xs[k], xs[k + 1]))
    return float(ub)


class _FlatTop(Exception):
    """Raised inside the 1-D search once more evaluations cannot gain ``ftol``."""


def _refine_max(a, lo, hi, xtol, ftol, known, best_so_far) -> None:
    """Maximise ``a`` on ``[lo, hi]`` by bounded Brent search (values cached by ``a``).

    ``known()`` returns the ``{t: a(t)}`` evaluated so far.  The search stops at Brent's
    ``xtol``, or as soon as the concave upper bound (:func:`_concave_upper_bound`) from the
    samples in ``[lo, hi]`` is within ``ftol`` of their best (a flat top: more evaluations
    cannot gain ``ftol``) or ``ftol`` below ``best_so_far()`` (the bracket cannot win).
    """
    from scipy.optimize import minimize_scalar

    def flat():
        pts = sorted((t, v) for t, v in known().items() if lo <= t <= hi)
        if len(pts) < 3:
            return False
        ub = _concave_upper_bound([p[0] for p in pts], [p[1] for p in pts])
        return ub - max(p[1] for p in pts) <= ftol or ub < best_so_far() - ftol

    def neg(t):
        v = a(t)
        if flat():
            raise _FlatTop
        return -v

    a(lo), a(hi)
    try:
        minimize_scalar(neg, bounds=(lo, hi), method="bounded",
                        options={"xatol": xtol, "maxiter": 100})
    except _FlatTop:
        pass


def optimal_threshold_policy(K, delta, *, n_grid: int = 25, xtol: float = 1e-6,
                             ftol: float = 1e-12) -> ThresholdPolicyResult:
    """Best threshold-rank policy: exact convex program in ``w'``, bracketed search in ``t``.

    Parameters
    ----------
    K : int
    delta : float
    n_grid : int
        Points of the initial ``t`` grid on ``[-3, delta + 3]``.
    xtol : float
        Absolute tolerance in ``t`` of the bounded Brent search.
    ftol : float
        Flatness tolerance: a bracket's search stops once the concave upper bound on ``a``
        over it is within ``ftol`` of its best sample (or ``ftol`` below the best value found).

    Notes
    -----
    ``a(t) = max_{w'} acceptance(t, w')``.  The grid maximum is bracketed by its neighbours and
    refined by bounded Brent search (the grid is checked for a single interior maximum; if
    ``a`` is not unimodal on the grid, the two best local maxima are refined and the best
    kept).  Each inner program is warm-started (exact Newton) from the weights at the nearest
    threshold already solved.  The search stops early on a flat top: if ``a`` is concave on
    the bracket, the extended chords between its samples bound its maximum, and the search
    ends once that bound is within ``ftol`` of the best sample.
    ``t = inf`` (RASS) is always a candidate, so the result is never worse than RASS.
    Proof of the selected law and of exactness: proofs/P8-value-aware-policies.md.
    """
    K = check_K(K)
    delta = check_delta(delta)
    rass = optimal_rank_weights(K, delta)
    # far_rows: alpha*(K, delta) < exp(-746), so every policy's acceptance rounds to 0 (P10.8);
    # the threshold search would scan a grid of delta / 0.1 points for nothing
    far = bool(far_rows(np.array([float(K)]), np.array([delta]))[0])
    if K == 1 or delta <= np.sqrt(np.finfo(float).eps) or far:
        pol = ThresholdRankPolicy(K, np.inf, rass.weights)
        return ThresholdPolicyResult(pol, rass.acceptance, np.inf, rass.weights, rass.gap,
                                     rass.acceptance, rass.tv)
    cache: dict[float, tuple] = {}

    def a(t):
        # warm start from the solved threshold nearest to t (a sweep or a shrinking bracket)
        t = float(t)
        if t not in cache:
            w0 = cache[min(cache, key=lambda u: abs(u - t))][1] if cache else rass.weights
            cache[t] = _inner(K, delta, t, w0)
        return cache[t][0]

    # the two best local maxima of the grid (ends included), each refined by bounded Brent search
    ts, cand = _grid_maxima(a, delta, n_grid)
    for i in cand:
        _refine_max(a, ts[max(i - 1, 0)], ts[min(i + 1, n_grid - 1)], xtol, ftol,
                    lambda: {t: v[0] for t, v in cache.items()},
                    lambda: max(v[0] for v in cache.values()))
    return _best_threshold_result(K, cache, rass)


def _grid_maxima(a, delta: float, n_grid: int):
    """Threshold grid ``ts`` on ``[-3, delta + 3]`` and the indices of the two highest local maxima of ``a`` on it.

    Local maxima include the grid ends; ties keep grid order.
    """
    ts = np.linspace(-3.0, delta + 3.0, n_grid)
    vals = np.array([a(t) for t in ts])
    cand = [i for i in range(n_grid)
            if (i == 0 or vals[i] >= vals[i - 1]) and (i == n_grid - 1 or vals[i] >= vals[i + 1])]
    return ts, sorted(cand, key=lambda i: -vals[i])[:2]


def _best_threshold_result(K: int, cache: dict, rass) -> ThresholdPolicyResult:
    """The best threshold solved so far, or plain RASS (``t = inf``) when it is at least as good.

    ``cache`` maps a threshold ``t`` to the ``(acceptance, weights, gap, tv)`` of :func:`_inner`;
    ``rass`` is the :func:`optimal_rank_weights` result for the same ``(K, delta)``.
    """
    t_best = max(cache, key=lambda t: cache[t][0])
    acc, w, gap, tv = cache[t_best]
    if rass.acceptance >= acc:
        t_best, acc, w, gap, tv = np.inf, rass.acceptance, rass.weights, rass.gap, rass.tv
    policy = ThresholdRankPolicy(K, t_best, w)
    return ThresholdPolicyResult(policy, acc, t_best, np.asarray(w), gap, rass.acceptance, tv)


# ----------------------------------------------------------------------------------------
# Two-level thresholds (P8.4)
# ----------------------------------------------------------------------------------------


class TwoLevelThresholdPolicy(_SegmentMixturePolicy):
    """Top child if its ``s >= t1``; else, if the top ``s >= t2``, rank ``j ~ w1``; else rank ``j ~ w2``.

    Parameters
    ----------
    K : int
    t1, t2 : float
        Thresholds, ``t2 < t1``.
    weights1, weights2 : array (K,)
        Rank weights of the middle branch (``t2 <= max < t1``) and of the low branch (``max < t2``).

    Notes
    -----
    With ``C_j = K C(K-1, j)``, ``n = K-1-j`` (proofs/P8-value-aware-policies.md, P8.4):
    ``g = K phi Phi^(K-1)`` on ``s >= t1``;
    ``g = sum_j w1_j C_j phi Phi^j (Phi(t1) - Phi)^n`` on ``t2 <= s < t1``;
    ``g = sum_j w1_j C_j phi Phi^j [(Phi(t1)-Phi)^n - (Phi(t2)-Phi)^n] + sum_j w2_j C_j phi Phi^j (Phi(t2)-Phi)^n``
    on ``s < t2``.  Linear in ``(w1, w2)``, each on its own simplex.
    """

    def __init__(self, K, t1, t2, weights1, weights2):
        from .threshold import two_level_segments

        self.K = check_K(K)
        for name, v in (("t1", t1), ("t2", t2)):
            if isinstance(v, bool) or not np.isscalar(v) or not np.isfinite(float(v)):
                raise ValueError(f"{name} must be a finite real number, got {v!r}")
        self.t1, self.t2 = float(t1), float(t2)
        if not self.t2 < self.t1:
            raise ValueError(f"t2 must be < t1, got t1={self.t1}, t2={self.t2}")
        self.weights1 = check_weights(weights1, self.K, name="weights1")
        self.weights2 = check_weights(weights2, self.K, name="weights2")
        self.weights = np.concatenate([self.weights1, self.weights2])
        self._segments = two_level_segments(self.K, self.t1, self.t2)

    def select(self, delta, s, rng):
        rng, order, top_s = _ranked(s, self.K, rng)
        n = order.shape[0]
        j1 = _draw_rank(self.weights1, n, rng)
        j2 = _draw_rank(self.weights2, n, rng)
        j = np.where(top_s >= self.t1, self.K - 1, np.where(top_s >= self.t2, j1, j2))
        return order[np.arange(n), j]

    def selected_logpdf(self, delta, s):
        d, s2, flat = _rows(delta, s)
        out = segments_logpdf(self._segments, self.weights, s2)
        return out[:, 0] if flat else out

    def selected_cdf(self, delta, s):
        d, s2, flat = _rows(delta, s)
        out = np.clip(segments_cdf(self._segments, self.weights, s2), 0.0, 1.0)
        return out[:, 0] if flat else out


@dataclass(frozen=True)
class TwoLevelPolicyResult:
    """Best two-level threshold policy found (exact acceptance; search over ``(t1, t2)`` not certified).

    ``gap`` certifies the weights for the returned thresholds (cell-LP bound, P4.4).
    """

    policy: TwoLevelThresholdPolicy
    acceptance: float
    t1: float
    t2: float
    weights1: np.ndarray
    weights2: np.ndarray
    gap: float
    tv: float
    threshold_acceptance: float


def _two_level_inner(K: int, delta: float, t1: float, t2: float, seeds=None):
    from .quadrature import exchange_lp
    from .threshold import two_level_segments

    segs = two_level_segments(K, t1, t2)
    top = np.sqrt(2.0 * np.log(max(K, 2)))
    ex = exchange_lp(segs, delta, lp_range=(-top - 5.0, max(delta, top) + 5.0),
                     tol=1e-9, max_iter=5, spacing=segment_spacing(K), n_blocks=2, seed_crossings=seeds)
    ev = evaluate_tv(segs, ex.weights, delta, spacing=segment_spacing(K), hessian=False)
    return ev.acceptance, ex.weights, max(ev.tv - ex.lower_bound, 0.0), ev.tv, ev.crossings


def optimal_two_level_policy(K, delta, *, n_grid: int = 6) -> TwoLevelPolicyResult:
    """Two-level threshold policy: block cell LP in ``(w1, w2)``, grid + Nelder-Mead in ``(t1, t2)``.

    Notes
    -----
    Starts from the best one-level threshold ``t*`` (:func:`optimal_threshold_policy`):
    ``t1`` on ``t* + [-0.3, 1.2]``, ``t2`` on ``t1 - [0.1, 2.5]``, then Nelder-Mead on the best
    grid point.  The returned acceptance is exact for the returned policy; the result is never
    worse than the one-level optimum (returned as a degenerate two-level policy with ``t2`` far
    below).  proofs/P8-value-aware-policies.md, P8.4.
    """
    from scipy.optimize import minimize

    K = check_K(K)
    delta = check_delta(delta)
    one = optimal_threshold_policy(K, delta)
    t0 = one.t if np.isfinite(one.t) else delta + 3.0
    cache = {}

    def value(t1, t2):
        key = (round(float(t1), 12), round(float(t2), 12))
        if key not in cache:
            if not t2 < t1 - 1e-6:
                return -1.0
            cache[key] = _two_level_inner(K, delta, float(t1), float(t2))
        return cache[key][0]

    best = None
    for t1 in t0 + np.linspace(-0.3, 1.2, n_grid):
        for t2 in t1 - np.linspace(0.1, 2.5, n_grid):
            v = value(t1, t2)
            if best is None or v > best[0]:
                best = (v, t1, t2)
    minimize(lambda x: -value(x[0], x[1]), x0=[best[1], best[2]], method="Nelder-Mead",
                   options={"xatol": 1e-4, "fatol": 1e-12, "maxfev": 60,
                            "initial_simplex": [[best[1], best[2]], [best[1] + 0.1, best[2]],
                                                [best[1], best[2] - 0.1]]})
    key = max(cache, key=lambda k: cache[k][0])
    acc, w, gap, tv, _ = cache[key]
    t1, t2 = key
    if acc < one.acceptance:
        # degenerate two-level policy equal to the one-level optimum: same weights below t2
        t1 = t0
        t2 = t0 - 40.0
        w = np.concatenate([one.weights, one.weights])
        acc, gap, tv = one.acceptance, one.gap, one.tv
    policy = TwoLevelThresholdPolicy(K, t1, t2, w[:K], w[K:])
    return TwoLevelPolicyResult(policy, acc, t1, t2, w[:K], w[K:], gap, tv, one.acceptance)
