"""Fast inverse-CDF residual draws when many rows share one selected law.

:func:`rass_theory.exact.batch.sample_residual` locates the crossings of ``f`` and ``g`` on a
per-row grid, which costs about a millisecond per rejected row.  In the exactness harness (and
whenever a batch has a single ``delta`` and one weight vector) every row has the *same* residual
law, so the crossings are found once (by the exact module, on one row), a cumulative table of
the residual CDF is built once, and each row is then solved by a few root-finder steps
refined inside the table's bracket by the engine's root finder.  The result is the same inverse CDF to ``~1e-13`` (tested against
``sample_residual``), at a cost of a few vectorised evaluations per row.
"""
from __future__ import annotations

import functools

import numpy as np
from scipy.special import ndtr

from rass_theory.exact._roots import bracketed_roots
from rass_theory.exact._window import HALF_WIDTH


__all__ = ["SharedResidual", "rass_shared_residual", "policy_shared_residual"]

# the residual is below f, whose mass beyond the engine's window is below Phi(-L) (exact._window)
_TAIL = HALF_WIDTH
_KNOTS = 1024  # table points per positive interval


def _solve_in_brackets(x, lo, hi, active, excess):
    """Solve ``excess(x, rows) = 0`` (increasing in ``x``) inside ``[lo, hi]`` for the active entries.

    ``rows`` are the integer indices of the entries being evaluated; inactive entries keep ``x``.
    The root finder is the engine's (:func:`rass_theory.exact._roots.bracketed_roots`).
    """
    idx = np.flatnonzero(active)
    if idx.size:
        x[idx] = bracketed_roots(lambda xa, j: excess(xa, idx[j.astype(np.intp)]), lo[idx], hi[idx],
                                 args=(np.arange(idx.size),))
    return x


class SharedResidual:
    """Inverse CDF of ``(f - g)_+ / TV(f, g)`` for one ``delta`` and one selected law ``g``.

    Parameters
    ----------
    delta : float
    log_ratio : callable
        ``log(g(x) / phi(x))`` for a 1-d array ``x``.
    cdf_excess : callable
        ``G(x) - Phi(x)`` for a 1-d array ``x``.
    bounds, positive : ndarray
        One row of :class:`rass_theory.exact.batch.ResidualIntervals` (``bounds (C + 2,)``,
        ``positive (C + 1,)``): the crossings of ``f`` and ``g`` and the sign of ``f - g``.

    Notes
    -----
    On a positive interval ``[a, b]`` the residual CDF is
    ``R(x) = R(a) + [D(x) - D(a)] - [E(x) - E(a)]``, ``D(x) = Phi(x - delta) - Phi(x)``,
    ``E = G - Phi`` (proof ``P7-selected-law``); a table of ``R`` at 1024 points per interval
    gives a bracket, refined by :func:`rass_theory.exact._roots.bracketed_roots` to
    ``8 eps (1 + |x|)``.
    """

    def __init__(self, delta, log_ratio, cdf_excess, bounds, positive):
        self.delta = float(delta)
        self.log_ratio = log_ratio
        self.cdf_excess = cdf_excess
        lo_clip, hi_clip = min(0.0, self.delta) - _TAIL, max(0.0, self.delta) + _TAIL
        xs, cs = [], []
        offset = 0.0
        for k in np.flatnonzero(positive):
            a = float(np.clip(bounds[k], lo_clip, hi_clip))
            b = float(np.clip(bounds[k + 1], lo_clip, hi_clip))
            if not b > a:
                continue
            x = np.linspace(a, b, _KNOTS)
            level = self._level(x)
            c = offset + (level - level[0])
            c = np.maximum.accumulate(np.maximum(c, offset))
            xs.append(x)
            cs.append(c)
            offset = c[-1]
        if not xs:
            raise ValueError(f"the residual law has no mass at delta = {delta!r} (f = g)")
        self.knots = np.concatenate(xs)
        self.cumulative = np.concatenate(cs)
        self.total = float(offset)
        # R(x) = anchor[j] + level(x) for x in segment j (anchor constant within an interval)
        self.anchor = self.cumulative - self._level(self.knots)

    def _level(self, x):
        """``D(x) - E(x)``, the residual CDF up to an additive constant.

        ``D(x) = Phi(x - delta) - Phi(x)`` comes from :func:`shift_difference` (relative
        accuracy) when ``delta < 0.01``; otherwise from a difference of lower tails left of
        ``delta/2`` and of upper tails right of it (absolute error ``~1e-17``, i.e. relative
        ``~1e-15`` of the residual mass, which is at least of order ``delta``).
        """
        if self.delta < 0.01:
            from .normal import shift_difference

            return shift_difference(x, self.delta) - self.cdf_excess(x)
        left = x <= 0.5 * self.delta
        d = np.where(left, ndtr(x - self.delta) - ndtr(x), ndtr(-x) - ndtr(self.delta - x))
        return d - self.cdf_excess(x)

    def sample(self, u) -> np.ndarray:
        """Return ``R^{-1}(u TV) `` for uniforms ``u (m,)`` (monotone in ``u``)."""
        u = np.asarray(u, dtype=np.float64)
        t = u * self.total
        C, X = self.cumulative, self.knots
        j = np.clip(np.searchsorted(C, t, side="right") - 1, 0, C.size - 2)
        lo, hi = X[j], X[j + 1]
        c_lo, c_hi = C[j], C[j + 1]
        flat = c_hi <= c_lo
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.where(flat, lo, lo + (hi - lo) * (t - c_lo) / (c_hi - c_lo))
        x = np.clip(x, lo, hi)
        anchor = self.anchor[j]

        def excess(xa, rows):
            return anchor[rows] + self._level(xa) - t[rows]

        return _solve_in_brackets(x, lo, hi, ~flat, excess)


@functools.lru_cache(maxsize=256)
def _rass_cached(weights_key: tuple, delta: float) -> SharedResidual:
    from . import batch as eb

    w = np.asarray(weights_key, dtype=np.float64)
    ri = eb.residual_intervals(w, np.array([delta]))
    log_ratio, cdf_excess = eb._rass_callables(w)
    return SharedResidual(delta, log_ratio, cdf_excess, ri.bounds[0], ri.positive[0])


def rass_shared_residual(weights: np.ndarray, delta: float) -> SharedResidual:
    """Cached :class:`SharedResidual` of the RASS residual ``(f - g_w)_+`` for one ``(w, delta)``."""
    return _rass_cached(tuple(float(v) for v in np.asarray(weights, dtype=np.float64)), float(delta))


def policy_shared_residual(policy, delta: float) -> SharedResidual:
    """:class:`SharedResidual` for a selection policy with per-row ``selected_logpdf``/``selected_cdf``."""
    from . import batch as eb
    from .normal import log_phi

    def log_ratio(x):
        x = np.asarray(x, dtype=np.float64)
        return policy.selected_logpdf(np.full(x.shape, delta), x) - log_phi(x)

    def cdf_excess(x):
        x = np.asarray(x, dtype=np.float64)
        return policy.selected_cdf(np.full(x.shape, delta), x) - ndtr(x)

    def lr2(x):
        return log_ratio(x.reshape(-1)).reshape(x.shape)

    def ce2(x):
        return cdf_excess(x.reshape(-1)).reshape(x.shape)

    ri = eb.residual_intervals_generic(lr2, ce2, np.array([float(delta)]))
    return SharedResidual(delta, log_ratio, cdf_excess, ri.bounds[0], ri.positive[0])



#: Batches with at most this many distinct laws use one cached table per law.
MAX_SHARED_LAWS = 32


def draw_rass_residual(weights: np.ndarray, delta: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF residual draws for RASS rows, grouping rows that share one law.

    ``weights`` is ``(K,)`` or ``(r, K)``.  Rows with the same ``delta`` and the same weights use
    a cached :class:`SharedResidual`; when a batch has more than :data:`MAX_SHARED_LAWS` distinct
    ``delta`` values, or a group's weights differ between rows, the per-row sampler
    :func:`rass_theory.exact.batch.sample_residual` is used for those rows.  Both compute the same
    inverse CDF (to ``~1e-13``), so the grouping never changes a row's law.
    """
    from . import batch as eb

    def group(rows, v):
        wr = weights if weights.ndim == 1 else weights[rows]
        if wr.ndim == 2 and not np.all(wr == wr[0]):
            return eb.sample_residual(wr, delta[rows], u[rows])
        return rass_shared_residual(wr if wr.ndim == 1 else wr[0], v).sample(u[rows])

    return _by_delta(delta, lambda: eb.sample_residual(weights, delta, u), group)


def _by_delta(delta, per_row, group):
    """``group(rows, value)`` for each distinct ``delta``, or ``per_row()`` for all rows when
    there are more than :data:`MAX_SHARED_LAWS` distinct values."""
    values, inverse = np.unique(delta, return_inverse=True)
    if values.size > MAX_SHARED_LAWS:
        return np.asarray(per_row(), dtype=np.float64)
    inverse = inverse.reshape(-1)
    out = np.empty(delta.shape[0])
    for j, v in enumerate(values):
        rows = np.flatnonzero(inverse == j)
        out[rows] = group(rows, float(v))
    return out


class DGRSFinalResidual:
    """Inverse CDF of the final D-GRS residual ``r_K`` for one ``(K, delta)`` shared by many rows.

    Notes
    -----
    ``r_K = a_K f - b_K phi`` on ``[c_K, inf)`` (closed-form levels from
    :func:`rass_theory.exact.dgrs.levels`, proof ``P3-dgrs-closed-form``), so its survival
    function is ``S(x) = a_K Q(x - delta) - b_K Q(x)``, ``Q = 1 - Phi``.  A table of ``S`` on
    ``[c_K, max(c_K, delta) + 12]`` (knots dense near ``c_K``, where the density vanishes) gives a
    bracket per row, refined by the engine's root finder to ``8 eps (1 + |x|)``.  Used for
    ``delta >= 0.01``; below, ``a_K`` and ``b_K`` grow like ``1/delta`` and the per-row sampler of
    :mod:`rass_theory.exact.dgrs` (which uses the small-``delta`` limit forms) is used instead.
    """

    MIN_DELTA = 0.01

    def __init__(self, K: int, delta: float):
        from .dgrs import levels

        lv = levels(K, delta)
        self.delta = float(delta)
        self.a, self.b, self.c = float(lv.a[K]), float(lv.b[K]), float(lv.c[K])
        hi = max(self.c, self.delta) + _TAIL
        t = np.linspace(0.0, 1.0, 4 * _KNOTS)
        self.knots = self.c + (hi - self.c) * t * t
        self.sf_table = np.minimum.accumulate(np.clip(self._sf(self.knots), 0.0, 1.0))
        self.sf_table[0] = 1.0

    def _sf(self, x):
        return self.a * ndtr(self.delta - x) - self.b * ndtr(-x)

    def sample(self, u) -> np.ndarray:
        """Return ``S^{-1}(1 - u)`` for uniforms ``u (m,)`` in ``[0, 1)``."""
        y = 1.0 - np.asarray(u, dtype=np.float64)
        neg = -self.sf_table  # increasing
        j = np.clip(np.searchsorted(neg, -y, side="right") - 1, 0, neg.size - 2)
        lo, hi = self.knots[j], self.knots[j + 1]
        s_lo, s_hi = self.sf_table[j], self.sf_table[j + 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.where(s_lo > s_hi, lo + (hi - lo) * (s_lo - y) / (s_lo - s_hi), lo)
        x = np.clip(x, lo, hi)

        def excess(xa, rows):  # increasing in x
            return y[rows] - self._sf(xa)

        return _solve_in_brackets(x, lo, hi, s_lo > s_hi, excess)


@functools.lru_cache(maxsize=256)
def dgrs_final_residual(K: int, delta: float) -> DGRSFinalResidual:
    """Cached :class:`DGRSFinalResidual` for ``(K, delta)``."""
    return DGRSFinalResidual(int(K), float(delta))


def draw_dgrs_final_residual(K: int, delta: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws from ``r_K`` per row, one cached table per distinct ``delta >= 0.01``.

    Rows with ``delta < 0.01``, or batches with more than :data:`MAX_SHARED_LAWS` distinct
    values, use :func:`rass_theory.exact.dgrs.batch_sample_final_residual` (same inverse CDF).
    """
    from . import dgrs as ed

    def group(rows, v):
        if v < DGRSFinalResidual.MIN_DELTA:
            return ed.batch_sample_final_residual(K, delta[rows], u[rows])
        return dgrs_final_residual(K, v).sample(u[rows])

    return _by_delta(delta, lambda: ed.batch_sample_final_residual(K, delta, u), group)


# --------------------------------------------------------------------------------------------
# The law pieces of the verifier kernels: the same names and meanings as in
# rass_theory.exact.torch_laws (the torch back end); rass_theory.verifiers.kernels picks the
# module that matches the inputs.
# --------------------------------------------------------------------------------------------

def rank_residual(weights: np.ndarray, delta: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Draws from ``(f - g_w)_+ / TV`` per row for rank weights ``(K,)`` or ``(r, K)``
    (:func:`draw_rass_residual`)."""
    return draw_rass_residual(weights, delta, u)


def dgrs_row_levels(K: int, delta: np.ndarray):
    """``None``: the NumPy D-GRS pieces compute their closed-form levels per call
    (:mod:`rass_theory.exact.dgrs`, with the small-``delta`` limit forms)."""
    return None


def take_levels(levels, rows):
    """The levels of the given rows (``None`` here)."""
    return None


def dgrs_accept(k: int, delta: np.ndarray, s: np.ndarray, levels) -> np.ndarray:
    """``min(1, r_{k-1}(s)/phi(s))`` for child ``k`` (1-based): :func:`rass_theory.exact.dgrs.batch_accept_prob`."""
    from .dgrs import batch_accept_prob

    return batch_accept_prob(k, delta, s)


def dgrs_final(K: int, delta: np.ndarray, u: np.ndarray, levels) -> np.ndarray:
    """Inverse-CDF draw from ``r_K`` per row (:func:`draw_dgrs_final_residual`)."""
    return np.asarray(draw_dgrs_final_residual(K, delta, u), dtype=np.float64)


def single_draft_residual(delta: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw from ``(f - phi)_+ / TV``: the ``K = 1`` residual."""
    return draw_rass_residual(np.ones(1), delta, u)
