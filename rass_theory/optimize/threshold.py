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

from rass_theory.exact.laws import RankLaw, sample
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

class ThresholdRowLaw(RankLaw):
    """Selected law of the threshold-rank policy with its own ``(t_i, w'_i)`` in every row.

    The one law engine's :class:`rass_theory.exact.laws.RankLaw` with a threshold, with the
    argument order ``(t, weights)`` of this module and NumPy ``logpdf``/``cdf`` helpers.

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
    ``G = sum_{i=1}^K W_i C(K, i) p^i q^(K-i)`` (``W_i = sum_{j<i} w'_j``) for ``s < t``;
    ``g/phi = K p^(K-1)``, ``G = p^K`` for ``s >= t``.  ``G - Phi`` is taken in the excess form
    of :class:`~rass_theory.exact.laws.RankLaw` (no cancellation in either tail).
    """

    def __init__(self, t, weights):
        t = np.asarray(t, dtype=np.float64).reshape(-1)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 2 or weights.shape[0] != t.size:
            raise ValueError(f"weights must have shape (n, K) with n = {t.size}, got {weights.shape}")
        super().__init__(weights, t)

    def restrict(self, idx) -> "ThresholdRowLaw":
        """The law of the rows ``idx`` (``None``: this law)."""
        return self if idx is None else ThresholdRowLaw(self.t[idx], self.weights[idx])

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
        out = np.clip(self.cdf_excess(s2) + ndtr(s2), 0.0, 1.0)
        return out[:, 0] if flat else out


def sample_threshold_residual(law: ThresholdRowLaw, delta, u) -> np.ndarray:
    """Inverse-CDF draws from ``(f - g_i)_+ / TV(f, g_i)``, one per row, for per-row threshold laws.

    Parameters
    ----------
    law : ThresholdRowLaw
        ``n`` rows.
    delta, u : ndarray (n,)
        Target means of ``s`` and uniforms.

    Notes
    -----
    The one residual sampler of the engine, :func:`rass_theory.exact.laws.sample` (crossings on
    the truncation window, hidden pairs split, the jump of ``g`` at ``t`` treated as a crossing
    candidate, closed-form masses, inverse CDF; proof ``P7-selected-law``).
    """
    delta = np.asarray(delta, dtype=np.float64).reshape(-1)
    u = np.asarray(u, dtype=np.float64).reshape(-1)
    n = delta.size
    if law.t.size != n or u.size != n:
        raise ValueError(f"law, delta and u must have the same number of rows, got {law.t.size}, {n}, {u.size}")
    if n == 0:
        return np.zeros(0)
    return np.asarray(sample(law, delta, u), dtype=np.float64)
