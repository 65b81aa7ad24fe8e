"""Selected law of the threshold-rank policy and its optimisation.

Policy (K iid ``N(0, 1)`` children, projections ``s``): select the top child if its ``s >= t``;
otherwise draw a rank ``j ~ w'`` and select the ``j``-th smallest child.  Its selected density
(proofs/P8-value-aware-policies.md, P8.1) is

    g(s) = K phi(s) Phi(s)^(K-1)                                             for s >= t,
    g(s) = sum_j w'_j K C(K-1, j) phi(s) Phi(s)^j (Phi(t) - Phi(s))^(K-1-j)  for s <  t,

and its CDF is ``Phi(s)^K`` for ``s >= t`` and
``Phi(t)^K sum_j w'_j I_{Phi(s)/Phi(t)}(j + 1, K - j)`` for ``s < t``.  For fixed ``t`` it is
linear in ``w'`` (two segments of a mixture family), so the weight program of P4 applies
unchanged; ``t`` is found by a bracketed 1-D search.
"""
from __future__ import annotations

import numpy as np
from scipy.special import betainc, gammaln, log_ndtr, ndtr

from rass_theory.exact.normal import interval_mass, log_phi

__all__ = ["ThresholdLowerSegment", "ThresholdUpperSegment", "threshold_segments", "two_level_segments",
           "ThresholdRowLaw", "sample_threshold_residual",
           "normal_interval_mass", "log_normal_interval_mass"]


#: ``Phi(t) - Phi(s)`` for ``s <= t`` with relative accuracy: the one interval normal mass,
#: :func:`rass_theory.exact.normal.interval_mass` (this name is kept as an alias)
normal_interval_mass = interval_mass


def log_normal_interval_mass(s, t):
    """``log(Phi(t) - Phi(s))`` (``-inf`` at ``s = t``)."""
    with np.errstate(divide="ignore"):
        return np.log(np.clip(normal_interval_mass(s, t), 0.0, None))


class ThresholdLowerSegment:
    """``s < t``: components ``b^t_j(s) = K C(K-1, j) phi Phi^j (Phi(t) - Phi)^(K-1-j)``."""

    def __init__(self, K: int, t: float):
        self.K, self.t = K, float(t)
        self.lo, self.hi = -np.inf, float(t)
        self.n_components = K
        j = np.arange(K, dtype=np.float64)
        self._j = j
        self._log_coef = np.log(K) + gammaln(K) - gammaln(j + 1) - gammaln(K - j)
        self._Pt = float(ndtr(self.t))
        self._logPt = float(log_ndtr(self.t))

    def log_components(self, s):
        s = np.asarray(s, dtype=np.float64)
        lu = log_ndtr(s)[:, None]
        lv = log_normal_interval_mass(s, self.t)[:, None]
        with np.errstate(invalid="ignore"):
            rest = (self.K - 1 - self._j) * lv
        rest = np.where((self.K - 1 - self._j) == 0, 0.0, rest)
        return log_phi(s)[:, None] + self._log_coef + self._j * lu + rest

    def log_fixed(self, s):
        return None

    def component_masses(self, a, b):
        a = np.asarray(a, dtype=np.float64)[:, None]
        b = np.minimum(np.asarray(b, dtype=np.float64), self.t)[:, None]
        j, K, Pt = self._j, self.K, self._Pt
        xa = np.clip(ndtr(a) / Pt, 0.0, 1.0)
        xb = np.clip(ndtr(b) / Pt, 0.0, 1.0)
        ya = np.clip(normal_interval_mass(a, self.t) / Pt, 0.0, 1.0)   # 1 - xa, accurately
        yb = np.clip(normal_interval_mass(b, self.t) / Pt, 0.0, 1.0)
        Fa = betainc(j + 1, K - j, xa)
        low = betainc(j + 1, K - j, xb) - Fa
        up = betainc(K - j, j + 1, ya) - betainc(K - j, j + 1, yb)
        return np.exp(K * self._logPt) * np.where(Fa > 0.5, up, low)

    def fixed_masses(self, a, b):
        return np.zeros(np.asarray(a).shape)


class ThresholdUpperSegment:
    """``s >= t``: the fixed density of the maximum, ``K phi Phi^(K-1)``; no free weights."""

    def __init__(self, K: int, t: float):
        self.K, self.t = K, float(t)
        self.lo, self.hi = float(t), np.inf
        self.n_components = K

    def log_components(self, s):
        return np.full((np.asarray(s).size, self.K), -np.inf)

    def log_fixed(self, s):
        s = np.asarray(s, dtype=np.float64)
        return np.log(self.K) + log_phi(s) + (self.K - 1) * log_ndtr(s)

    def component_masses(self, a, b):
        return np.zeros((np.asarray(a).size, self.K))

    def fixed_masses(self, a, b):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        # 1 - Phi(x)^K = -expm1(K log Phi(x)), accurate in the upper tail
        sa = -np.expm1(self.K * log_ndtr(a))
        sb = -np.expm1(self.K * log_ndtr(b))
        low = np.exp(self.K * log_ndtr(b)) - np.exp(self.K * log_ndtr(a))
        return np.where(sa < 0.5, sa - sb, low)


def threshold_segments(K: int, t: float):
    """The two segments of the threshold-rank family (``t = inf``: RASS itself)."""
    if not np.isfinite(t):
        from rass_theory.exact.segments import RankSegment

        return [RankSegment(K)]
    return [ThresholdLowerSegment(K, t), ThresholdUpperSegment(K, t)]


# ----------------------------------------------------------------------------------------
# Two-level threshold family (P8.4): top child if max >= t1; else, if max >= t2, rank ~ w1;
# else rank ~ w2.  Components: block 1 (K densities D1_j), block 2 (K densities D2_j).
# ----------------------------------------------------------------------------------------


def _log_diff_pow(log_a, log_b, n):
    """``log(a^n - b^n)`` for ``a >= b >= 0`` (``-inf`` when ``n = 0`` or ``a = b``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = n * log_a + np.log(-np.expm1(n * (log_b - log_a)))
    return np.where(n == 0, -np.inf, out)


class TwoLevelBelowSegment:
    """``s < t2``: ``D1_j = C phi Phi^j [(Phi(t1)-Phi)^n - (Phi(t2)-Phi)^n]``, ``D2_j = C phi Phi^j (Phi(t2)-Phi)^n``."""

    def __init__(self, K: int, t1: float, t2: float):
        self.K, self.t1, self.t2 = K, float(t1), float(t2)
        self.lo, self.hi = -np.inf, float(t2)
        self.n_components = 2 * K
        self._l1, self._l2 = ThresholdLowerSegment(K, t1), ThresholdLowerSegment(K, t2)

    def log_components(self, s):
        s = np.asarray(s, dtype=np.float64)
        K, j = self.K, self._l1._j
        n = K - 1 - j
        base = log_phi(s)[:, None] + self._l1._log_coef + j * log_ndtr(s)[:, None]
        la = log_normal_interval_mass(s, self.t1)[:, None]
        lb = log_normal_interval_mass(s, self.t2)[:, None]
        d1 = base + _log_diff_pow(la, lb, n)
        with np.errstate(invalid="ignore"):
            d2 = base + np.where(n == 0, 0.0, n * lb)
        return np.concatenate([d1, d2], axis=1)

    def log_fixed(self, s):
        return None

    def component_masses(self, a, b):
        m1 = self._l1.component_masses(a, b)
        m2 = self._l2.component_masses(a, b)
        return np.concatenate([np.clip(m1 - m2, 0.0, None), m2], axis=1)

    def fixed_masses(self, a, b):
        return np.zeros(np.asarray(a).shape)


class TwoLevelMiddleSegment:
    """``t2 <= s < t1``: ``D1_j = C phi Phi^j (Phi(t1)-Phi)^n`` (block 1 only)."""

    def __init__(self, K: int, t1: float, t2: float):
        self.K, self.t1, self.t2 = K, float(t1), float(t2)
        self.lo, self.hi = float(t2), float(t1)
        self.n_components = 2 * K
        self._l1 = ThresholdLowerSegment(K, t1)

    def log_components(self, s):
        d1 = self._l1.log_components(s)
        return np.concatenate([d1, np.full(d1.shape, -np.inf)], axis=1)

    def log_fixed(self, s):
        return None

    def component_masses(self, a, b):
        m1 = self._l1.component_masses(a, b)
        return np.concatenate([m1, np.zeros(m1.shape)], axis=1)

    def fixed_masses(self, a, b):
        return np.zeros(np.asarray(a).shape)


class _WideUpper(ThresholdUpperSegment):
    def __init__(self, K, t):
        super().__init__(K, t)
        self.n_components = 2 * K

    def log_components(self, s):
        return np.full((np.asarray(s).size, 2 * self.K), -np.inf)

    def component_masses(self, a, b):
        return np.zeros((np.asarray(a).size, 2 * self.K))


def two_level_segments(K: int, t1: float, t2: float):
    """Segments of the two-level family (``t2 < t1``); weights ``(w1, w2)``, each on a simplex."""
    if not t2 < t1:
        raise ValueError(f"two-level thresholds need t2 < t1, got t1={t1}, t2={t2}")
    return [TwoLevelBelowSegment(K, t1, t2), TwoLevelMiddleSegment(K, t1, t2), _WideUpper(K, t1)]


# ----------------------------------------------------------------------------------------
# Per-row threshold laws (P8.5): rows with their own (t, w'), e.g. interpolated in delta
# ----------------------------------------------------------------------------------------

#: half-width of the finely gridded core of the crossing search (tails: 4x coarser)
_CORE = 6.5


def _log_binom_row(K: int) -> np.ndarray:
    j = np.arange(K, dtype=np.float64)
    return np.log(K) + gammaln(K) - gammaln(j + 1) - gammaln(K - j)


class ThresholdRowLaw:
    """Selected law of the threshold-rank policy with its own ``(t_i, w'_i)`` in every row.

    Parameters
    ----------
    t : ndarray (n,)
        Thresholds (``+inf``: plain RASS with ``w'_i``).
    weights : ndarray (n, K)
        Fallback rank weights per row (on the simplex).

    Notes
    -----
    With ``p = Phi(s)``, ``P = Phi(t)``, ``q = P - p`` (P8.1):
    ``g/phi = sum_j w'_j K C(K-1, j) p^j q^(K-1-j)`` and
    ``G = sum_{i=1}^K W_i C(K, i) p^i q^(K-i)`` (``W_i = sum_{j<i} w'_j``, integration of the
    Bernstein basis) for ``s < t``; ``g/phi = K p^(K-1)``, ``G = p^K`` for ``s >= t``.
    Evaluated in linear space from upper-tail differences (``q`` has relative accuracy), which is
    the speed path of the per-row residual sampler :func:`sample_threshold_residual`; the
    density ratio is returned as a log (``-inf`` where it underflows, which only happens where
    the law's mass is below ``1e-300``).
    """

    def __init__(self, t, weights):
        self.t = np.asarray(t, dtype=np.float64).reshape(-1)
        self.weights = np.asarray(weights, dtype=np.float64)
        if self.weights.ndim != 2 or self.weights.shape[0] != self.t.size:
            raise ValueError(f"weights must have shape (n, K) with n = {self.t.size}, got {self.weights.shape}")
        self.K = self.weights.shape[1]
        K = self.K
        self._coef_pdf = self.weights * np.exp(_log_binom_row(K))[None, :]
        W = np.concatenate([np.zeros((self.t.size, 1)), np.cumsum(self.weights, axis=1)], axis=1)
        W[:, -1] = 1.0
        binom_K = np.exp(gammaln(K + 1) - gammaln(np.arange(K + 1) + 1) - gammaln(K - np.arange(K + 1) + 1))
        self._coef_cdf = W * binom_K[None, :]
        self._finite = np.isfinite(self.t)
        self._tt = np.where(self._finite, self.t, 1e300)
        self._P = np.where(self._finite, ndtr(self._tt), 1.0)
        self._Q = np.where(self._finite, ndtr(-self._tt), 0.0)

    def restrict(self, idx) -> "ThresholdRowLaw":
        """The law of the rows ``idx`` (``None``: this law)."""
        return self if idx is None else ThresholdRowLaw(self.t[idx], self.weights[idx])

    def _pq(self, s):
        # p = Phi(s); q = Phi(t) - Phi(s) for s < t as a difference of upper tails right of 0 and
        # of lower tails left of it (relative accuracy); q is unused (masked) for s >= t
        tail = ndtr(-np.abs(s))                      # the smaller of Phi(s) and 1 - Phi(s), accurately
        right = s > 0
        p = np.where(right, 1.0 - tail, tail)
        q = np.where(right, tail - self._Q[:, None], self._P[:, None] - p)
        return p, np.maximum(q, 0.0), s < self._tt[:, None]

    def ratio_and_cdf(self, s, need_cdf: bool = True):
        """``(g(s)/phi(s), G(s))`` for ``s (n, m)`` (row ``i`` with row ``i``'s law)."""
        s = np.asarray(s, dtype=np.float64)
        K = self.K
        p, q, below = self._pq(s)
        # homogeneous Horner: B = c_0 q^(K-1) + p (c_1 q^(K-2) + p (... + p c_(K-1)))
        qp = [None, q]
        for _ in range(2, K + 1 if need_cdf else K):
            qp.append(qp[-1] * q)
        c = self._coef_pdf
        B = np.broadcast_to(c[:, K - 1:K], p.shape).copy()
        for j in range(K - 2, -1, -1):
            B *= p
            B += c[:, j:j + 1] * qp[K - 1 - j]
        top = p ** (K - 1) if K > 1 else np.ones_like(p)
        B = np.where(below, B, K * top)
        if not need_cdf:
            return B, None
        # G = sum_{i>=1} W_i C(K, i) p^i q^(K-i), the same way
        c = self._coef_cdf
        G = np.broadcast_to(c[:, K:K + 1], p.shape).copy()
        for i in range(K - 1, 0, -1):
            G *= p
            G += c[:, i:i + 1] * qp[K - i]
        G *= p
        return B, np.where(below, G, top * p)

    def log_ratio(self, s):
        """``log(g(s)/phi(s))`` for ``s (n, m)``."""
        with np.errstate(divide="ignore"):
            return np.log(self.ratio_and_cdf(s, need_cdf=False)[0])

    def cdf_excess(self, s):
        """``G(s) - Phi(s)`` for ``s (n, m)``."""
        s = np.asarray(s, dtype=np.float64)
        return self.ratio_and_cdf(s)[1] - ndtr(s)

    def logpdf(self, s):
        """``log g(s)`` for ``s (n,)`` or ``(n, m)``."""
        s = np.asarray(s, dtype=np.float64)
        flat = s.ndim == 1
        s2 = s[:, None] if flat else s
        out = self.log_ratio(s2) + log_phi(s2)
        return out[:, 0] if flat else out

    def cdf(self, s):
        """``G(s)`` for ``s (n,)`` or ``(n, m)``."""
        s = np.asarray(s, dtype=np.float64)
        flat = s.ndim == 1
        s2 = s[:, None] if flat else s
        out = np.clip(self.ratio_and_cdf(s2)[1], 0.0, 1.0)
        return out[:, 0] if flat else out


def sample_threshold_residual(law: ThresholdRowLaw, delta, u, *, spacing: float | None = None) -> np.ndarray:
    """Inverse-CDF draws from ``(f - g_i)_+ / TV(f, g_i)``, one per row, for per-row threshold laws.

    Parameters
    ----------
    law : ThresholdRowLaw
        ``n`` rows.
    delta, u : ndarray (n,)
        Target means of ``s`` and uniforms.
    spacing : float, optional
        Crossing-search grid spacing; default :func:`rass_theory.exact.batch.grid_spacing` of ``K``.

    Notes
    -----
    The crossings of ``f`` and ``g`` are searched on a per-row grid over the engine's window
    ``[-L, max(delta, 0) + L]`` (:mod:`rass_theory.exact._window`: a crossing missed outside costs at
    most ``(K + 1) Phi(-L)`` in total variation), with ``t`` and its left neighbour as grid nodes so
    that no cell straddles the jump of ``g`` at ``t``; sign changes are refined, hidden pairs
    split, the closed-form masses of ``(f - g)_+`` summed, and the residual CDF inverted by the
    exact engine's routines (:func:`rass_theory.exact.batch.sample_residual_generic` with row
    restriction, proof ``P7-selected-law``).  Rows without residual mass return
    ``delta + Phi^{-1}(u)``.
    """
    from rass_theory.exact import batch as eb
    from rass_theory.exact._window import half_width

    delta = np.asarray(delta, dtype=np.float64).reshape(-1)
    u = np.asarray(u, dtype=np.float64).reshape(-1)
    n = delta.size
    if law.t.size != n or u.size != n:
        raise ValueError(f"law, delta and u must have the same number of rows, got {law.t.size}, {n}, {u.size}")
    if n == 0:
        return np.zeros(0)
    K = law.K
    L = half_width(K)
    h = eb.grid_spacing(K) if spacing is None else float(spacing)
    lo = -L + np.minimum(delta, 0.0)
    hi = np.maximum(delta, 0.0) + L
    # spacing h on the core [-CORE, delta + CORE], 4 h in the tails, where both laws carry at most
    # (K + 1) Phi(-CORE) and h is dominated by its smooth quadratic part
    core_lo, core_hi = np.maximum(lo, -_CORE + np.minimum(delta, 0.0)), np.minimum(hi, np.maximum(delta, 0.0) + _CORE)
    m = int(np.ceil(float(np.max(core_hi - core_lo)) / h)) + 1
    mt = int(np.ceil((L - _CORE) / (4.0 * h))) + 1
    lin = np.linspace(0.0, 1.0, m)[None, :]
    tail = np.linspace(0.0, 1.0, mt)[None, :-1]
    base = np.concatenate([lo[:, None] + (core_lo - lo)[:, None] * tail,
                           core_lo[:, None] + (core_hi - core_lo)[:, None] * lin,
                           hi[:, None] - (hi - core_hi)[:, None] * tail], axis=1)
    # insert t's left neighbour and t itself as nodes (rows of base are sorted: shift, no sort)
    tt = np.clip(law.t, lo, hi)
    at = (base < tt[:, None]).sum(axis=1)[:, None]
    cols = np.arange(base.shape[1] + 2)[None, :]
    src = np.clip(np.where(cols < at, cols, cols - 2), 0, base.shape[1] - 1)
    grid = np.take_along_axis(base, src, axis=1)
    grid = np.where(cols == at, np.nextafter(tt, -np.inf)[:, None], np.where(cols == at + 1, tt[:, None], grid))

    def restrict(idx):
        sub = law.restrict(idx)
        return sub.log_ratio, sub.cdf_excess

    hg = eb._h_function(law.log_ratio, delta)(grid)
    hg = np.where(np.isnan(hg), 0.0, hg)
    pos = hg > 0
    rows, cols = np.nonzero(pos[:, 1:] != pos[:, :-1])
    changes = (rows, grid[rows, cols], grid[rows, cols + 1], hg[rows, cols], hg[rows, cols + 1])
    dr, dk = eb._dip_candidates(hg)
    dips = (dr, grid[dr, dk - 1], grid[dr, dk + 1], hg[dr, dk - 1], hg[dr, dk + 1])
    ri = eb._assemble_intervals(restrict, delta, changes, dips, pos[:, 0], grid[:, 0], grid[:, -1])
    return eb._invert_residual(ri, restrict, delta, u)
