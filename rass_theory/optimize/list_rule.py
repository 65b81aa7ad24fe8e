"""The optimal list rule: an exact selection rule whose acceptance is the list-coupling bound.

A node has ``K`` iid children with rank-1 coordinates ``s_1..s_K ~ N(0, 1)`` and target
``f = N(delta, 1)``.  Any rule that selects one child and then couples it maximally with ``f``
accepts with probability ``int min(f, g)``, ``g`` the selected law, and no exact list coupling
beats ``alpha*(K, delta) = min_t J(t)``, ``J(t) = Phi(t - delta) + 1 - Phi(t)^K``
(``proofs/P5-list-coupling-bound.md``).  This module builds a rule that attains it
(``proofs/P10-optimal-list-rule.md``):

* ``t_a`` solves ``Phi(t)^K = Phi(t - delta)``; the target selected law is
  ``g* = f`` on ``(-inf, t_a)`` and ``g* = K phi Phi^(K-1)`` (law of the maximum) on
  ``[t_a, inf)``; ``int min(f, g*) = J(t*) = alpha*`` with ``t*`` the larger root of
  ``h(t) = delta t - delta^2/2 - log K - (K-1) log Phi(t)``.
* **Private priorities.**  Every child carries a key.  A child with ``s >= t_a`` keeps its own
  ``s``.  A child with ``s < t_a`` keeps it with probability ``1 - q(s)``; otherwise its key is a
  *fake score* drawn afresh from ``nu(x) ~ phi(x) q(x)`` on ``(-inf, t_a)``.  The child with the
  largest key is selected.  With ``c = Phi(t_a)``, ``a(s) = (Phi(s)/c)^(K-1)``,
  ``m(s) = f(s) / (K phi(s) c^(K-1))`` and ``M = a(t_lo)`` (``t_lo`` the smaller root of ``h``),

      q(s) = (m(s) - a(s)) / (M - a(s))  in [0, 1],

  keys are iid and uniform in the ``Phi`` scale, and ``E[Phi(key)^(K-1) | s] = f/(K phi)`` below
  ``t_a``, so the selected law is exactly ``g*``.

All roots are found per row by vectorised safeguarded iterations, so per-row deltas cost a few
dozen array evaluations and no Python loop over rows.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize.elementwise import find_root
from scipy.special import erf, log_ndtr, ndtr, ndtri, ndtri_exp

from .._validation import check_delta, check_K

__all__ = ["ListRuleParams", "OptimalListRule", "optimal_list_acceptance", "optimal_list_rule", "solve_list_rule"]

_LOG_SQRT_2PI = 0.91893853320467274178
_EPS = np.finfo(np.float64).eps


# ---------------------------------------------------------------------------------------------
# vectorised root finding
# ---------------------------------------------------------------------------------------------


def _h(t, K, delta):
    """``h(t) = delta t - delta^2/2 - log K - (K-1) log Phi(t)`` and ``h'(t)``."""
    lp = log_ndtr(t)
    mills = np.exp(-0.5 * t * t - _LOG_SQRT_2PI - lp)  # phi / Phi
    return delta * t - 0.5 * delta * delta - np.log(K) - (K - 1) * lp, delta - (K - 1) * mills


def _newton_convex(t, K, delta, *, from_right: bool, max_iter: int = 200):
    """Monotone Newton on the convex ``h`` from a start where ``h >= 0`` (outer side of a root)."""
    t = t.copy()
    active = np.ones(t.shape, dtype=bool)
    for _ in range(max_iter):
        if not active.any():
            break
        ta, Ka, da = t[active], K[active], delta[active]
        h, slope = _h(ta, Ka, da)
        ok = (slope > 0) if from_right else (slope < 0)
        step = np.where(ok & (h > 0), h / np.where(ok, slope, 1.0), 0.0)
        new = ta - step
        done = np.abs(step) <= 4 * _EPS * np.maximum(1.0, np.abs(ta))
        t[active] = new
        idx = np.flatnonzero(active)
        active[idx[done]] = False
    return t


def _log_E_terms(t, K, delta):
    """``log`` of the two sides of ``E(t) = Phi(t)^K - Phi(t - delta)`` in tail-safe form.

    Returns ``(L1, L2)`` with ``sign E = sign(L1 - L2)``:  for ``t < 0`` ``L1 = K log Phi(t)``,
    ``L2 = log Phi(t - delta)``; for ``t >= 0`` ``E = Q(t-delta) - (1 - Phi(t)^K)`` and
    ``L1 = log Q(t - delta)``, ``L2 = log(1 - Phi(t)^K)`` (``= log Q(t) + log K`` once ``Q``
    underflows).
    """
    left = t < 0
    L1 = np.where(left, K * log_ndtr(np.minimum(t, 0.0)), log_ndtr(delta - t))
    lq = log_ndtr(-np.maximum(t, 0.0))
    q = np.exp(lq)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q > 1e-300, -np.expm1(K * np.log1p(-q)) / np.where(q > 1e-300, q, 1.0), K)
    L2 = np.where(left, log_ndtr(np.minimum(t, 0.0) - delta), lq + np.log(ratio))
    return L1, L2


def _sign_E(t, K, delta):
    """``L1 - L2`` (see :func:`_log_E_terms`): same sign as ``E(t)``, finite in both tails."""
    L1, L2 = _log_E_terms(t, K, delta)
    return np.clip(np.nan_to_num(L1 - L2, nan=0.0), -1e3, 1e3)


def _roots(fun, lo, hi, args):
    """Bracketed roots by Chandrupatla's method (:func:`scipy.optimize.elementwise.find_root`).

    Returns ``(x, ok)``; the final bracket is ``<= 8 eps (1 + |x|)`` wide where ``ok``.
    """
    tol = {"xatol": 4 * _EPS, "xrtol": 4 * _EPS, "fatol": 0.0, "frtol": 0.0}
    res = find_root(fun, (lo, np.maximum(hi, lo)), args=args, tolerances=tol, maxiter=300)
    x = np.asarray(res.x, dtype=np.float64)
    ok = np.asarray(res.success, dtype=bool) & np.isfinite(x)
    return np.where(np.isfinite(x), x, lo), ok


@dataclass(frozen=True)
class ListRuleParams:
    """Per-row constants of the optimal list rule (all arrays of one shape).

    Attributes
    ----------
    K, delta : ndarray
    t_keep : ndarray
        ``t_a``: ``Phi(t_a)^K = Phi(t_a - delta)`` (``-inf`` when ``K = 1``, ``+inf`` when
        ``delta = 0``).
    t_low : ndarray
        ``t_lo``, the smaller root of ``h`` (``-inf`` when ``K = 1`` or ``delta = 0``).
    t_star : ndarray
        ``t*``, the larger root of ``h`` (``delta / 2`` when ``K = 1``, ``+inf`` when ``delta = 0``).
    log_c, log_M : ndarray
        ``log Phi(t_a)`` and ``log M = (K-1)(log Phi(t_lo) - log Phi(t_a))``.
    log_rejection : ndarray
        ``log(1 - alpha*) = log E(t*)`` with ``E(t) = Phi(t)^K - Phi(t - delta)``.
    converged : ndarray of bool
    """

    K: np.ndarray
    delta: np.ndarray
    t_keep: np.ndarray
    t_low: np.ndarray
    t_star: np.ndarray
    log_c: np.ndarray
    log_M: np.ndarray
    log_rejection: np.ndarray
    converged: np.ndarray

    def take(self, rows) -> ListRuleParams:
        """The parameters of the given rows (index array or boolean mask)."""
        return ListRuleParams(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))

    def column(self) -> ListRuleParams:
        """The parameters as ``(n, 1)`` columns, to broadcast against ``(n, K)`` scores."""
        return ListRuleParams(*(getattr(self, f)[:, None] for f in self.__dataclass_fields__))


def _log_E(t, K, delta):
    """``log E(t)``, ``E(t) = Phi(t)^K - Phi(t - delta) > 0`` for ``t`` in ``(t_a, inf)``."""
    L1, L2 = _log_E_terms(t, K, delta)
    # E = exp(L1) - exp(L2) on both sides of 0
    with np.errstate(divide="ignore", invalid="ignore"):
        return L1 + np.log(-np.expm1(L2 - L1))


def solve_list_rule(K, delta) -> ListRuleParams:
    """Solve the optimal list rule's constants for every row.

    Parameters
    ----------
    K : int or int array
        Children per node (``>= 1``).
    delta : float or array
        Standardised displacement per row (finite, ``>= 0``).

    Returns
    -------
    ListRuleParams

    Notes
    -----
    ``t*`` by monotone Newton on the convex ``h`` from ``delta/2 + log(K)/delta`` (as in
    :mod:`rass_theory.exact.bound`); ``t_lo`` by monotone Newton from
    ``-delta - sqrt(2 delta^2 + 2 log K) - 1``, where ``h > 0`` and ``h' < 0``; ``t_a`` by
    Chandrupatla's method on ``(t_lo, t*)``, where ``E = Phi^K - Phi(. - delta)`` changes sign
    exactly once (``proofs/P10-optimal-list-rule.md``, P10.4 and P10.6).
    """
    delta = np.atleast_1d(np.asarray(delta, dtype=np.float64))
    K = np.broadcast_to(np.asarray(K, dtype=np.float64), delta.shape).copy()
    n = delta.shape
    t_keep = np.full(n, np.nan)
    t_low = np.full(n, -np.inf)
    t_star = np.full(n, np.inf)
    log_c = np.zeros(n)
    log_M = np.zeros(n)
    log_rej = np.full(n, -np.inf)
    converged = np.ones(n, dtype=bool)
    one = K == 1
    zero = (delta == 0) & ~one
    gen = ~one & ~zero
    # K = 1: the only child is selected, g = phi; residual (f - phi)_+ on [delta/2, inf)
    if one.any():
        d1 = delta[one]
        t_keep[one] = -np.inf
        t_star[one] = 0.5 * d1
        log_c[one] = -np.inf
        with np.errstate(divide="ignore"):
            log_rej[one] = np.log(erf(0.5 * d1 / math.sqrt(2.0)))
    if zero.any():
        t_keep[zero] = np.inf
        log_M[zero] = -np.log(K[zero])
    if gen.any():
        Kg, dg = K[gen], delta[gen]
        ts = _newton_convex(0.5 * dg + np.log(Kg) / dg, Kg, dg, from_right=True)
        tl = _newton_convex(-dg - np.sqrt(2 * dg * dg + 2 * np.log(Kg)) - 1.0, Kg, dg, from_right=False)
        ta, ok = _roots(_sign_E, tl, ts, (Kg, dg))
        # far right tail (Q(t* - delta) < 1e-300, tiny delta): the sign of E near t* is below
        # rounding, and every law puts mass < 1e-300 on [t_a, inf); t_a = t* is used there
        far = ~ok & (log_ndtr(dg - ts) < -690.0)
        ta = np.where(far, ts, ta)
        ok = ok | far
        lc = log_ndtr(ta)
        t_star[gen], t_low[gen], t_keep[gen], log_c[gen] = ts, tl, ta, lc
        log_M[gen] = (Kg - 1) * (log_ndtr(tl) - lc)
        with np.errstate(invalid="ignore"):
            lr = _log_E(ts, Kg, dg)
        log_rej[gen] = np.where(np.isnan(lr) & far, -np.inf, lr)
        converged[gen] = ok & (tl < ta) & (ta <= ts) & np.isfinite(ts) & np.isfinite(tl)
    return ListRuleParams(K, delta, t_keep, t_low, t_star, log_c, log_M, log_rej, converged)


# ---------------------------------------------------------------------------------------------
# the rule: selected law, keep probability, selection, residual
# ---------------------------------------------------------------------------------------------


def log_selected_ratio(p: ListRuleParams, s: np.ndarray) -> np.ndarray:
    """``log(g*(s) / phi(s))`` per row: ``delta s - delta^2/2`` below ``t_a``, else ``log K + (K-1) log Phi(s)``."""
    below = s < p.t_keep
    return np.where(below, p.delta * s - 0.5 * p.delta ** 2, np.log(p.K) + (p.K - 1) * log_ndtr(s))


def log_accept_ratio(p: ListRuleParams, s: np.ndarray) -> np.ndarray:
    """``log(f(s) / g*(s))``: ``0`` below ``t_a``, else ``delta s - delta^2/2 - log K - (K-1) log Phi(s)``."""
    below = s < p.t_keep
    return np.where(below, 0.0, p.delta * s - 0.5 * p.delta ** 2 - np.log(p.K) - (p.K - 1) * log_ndtr(s))


def selected_cdf(p: ListRuleParams, s: np.ndarray) -> np.ndarray:
    """``G*(s)``: ``Phi(s - delta)`` below ``t_a``, ``Phi(s)^K`` from ``t_a`` on."""
    below = s < p.t_keep
    return np.where(below, ndtr(s - p.delta), np.exp(p.K * log_ndtr(s)))


def fake_probability(p: ListRuleParams, s: np.ndarray) -> np.ndarray:
    """``q(s)``: probability that a child at ``s`` is given a fake score (``0`` for ``s >= t_a``).

    ``p``'s fields broadcast against ``s`` (one row of parameters, or a column per row).

    Notes
    -----
    ``q = (m - a) / (M - a)`` with ``m = exp(delta s - delta^2/2 - log K - (K-1) log c)``,
    ``a = (Phi(s)/c)^(K-1)``, ``M = exp(log_M)``.  Where ``|M - a| < 1e-7 M`` (``0/0`` at
    ``t_lo``) the limit ``1 - delta Phi(s) / ((K-1) phi(s))`` is used; the result is clipped to
    ``[0, 1]`` (round-off only; ``proofs/P10-optimal-list-rule.md``, Lemma 3).
    """
    K, delta, lc = p.K, p.delta, p.log_c
    below = s < p.t_keep
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        big_M = np.exp(p.log_M)
        m = np.exp(delta * s - (0.5 * delta * delta + np.log(K) + (K - 1) * lc))
        cdf = ndtr(s)
        a = cdf ** (K - 1) * np.exp(-(K - 1) * lc)
        den = big_M - a
        q = (m - a) / den
        near = np.abs(den) < 1e-7 * big_M
        if np.any(near):
            limit = 1.0 - delta * cdf * np.exp(0.5 * s * s + _LOG_SQRT_2PI) / np.maximum(K - 1, 1)
            q = np.where(near, limit, q)
        if np.any(delta == 0):
            q = np.where(delta == 0, 1.0, q)
    return np.where(below, np.clip(np.nan_to_num(q, nan=0.0), 0.0, 1.0), 0.0)


def draw_fake_scores(p: ListRuleParams, rng: np.random.Generator, size: int, max_rounds: int = 100_000) -> np.ndarray:
    """``size`` draws from ``nu(x) ~ phi(x) q(x)`` on ``(-inf, t_a)`` by rejection.

    ``p`` holds one row of parameters (shared) or ``size`` rows.  Proposal ``x = Phi^{-1}(c U)``
    (``ndtri_exp(log c + log U)`` when ``c < 1e-300``), accepted with probability ``q(x)``; the
    acceptance rate is ``int_{x<t_a} phi q / c`` (0.45 -- 0.93 on the tested grid).  Uses ``rng``
    for a data-dependent number of uniforms.
    """
    shared = p.delta.size == 1
    out = np.empty(size)
    pending = np.arange(size)
    for _ in range(max_rounds):
        if pending.size == 0:
            return out
        pp = p if shared else p.take(pending)
        u = rng.random((2, pending.size))
        c_u = np.exp(pp.log_c) * (1.0 - u[0])  # 1 - U in (0, 1]
        with np.errstate(divide="ignore"):
            x = np.where(c_u > 1e-300, ndtri(np.maximum(c_u, 1e-300)),
                         ndtri_exp(pp.log_c + np.log1p(-u[0])))
        ok = u[1] < fake_probability(pp, x)
        out[pending[ok]] = x[ok]
        pending = pending[~ok]
    raise RuntimeError(f"fake-score rejection sampler did not finish in {max_rounds} rounds")


def select(p: ListRuleParams, s: np.ndarray, u_keep: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Child selected per row by the private-priority rule.

    Parameters
    ----------
    p : ListRuleParams
        One row of parameters (shared by every row) or one per row of ``s``.
    s : ndarray (n, K)
    u_keep : ndarray (n, K)
        Uniforms deciding which children below ``t_a`` get a fake score.
    rng : numpy.random.Generator
        Source of the fake scores (rejection sampling).

    Returns
    -------
    int ndarray (n,)
    """
    shared = p.delta.size == 1
    col = p if shared else p.column()
    fake = u_keep < fake_probability(col, s)
    keys = s.copy()
    if fake.any():
        r, c = np.nonzero(fake)
        keys[r, c] = draw_fake_scores(p if shared else p.take(r), rng, r.size)
    return np.argmax(keys, axis=1)


def sample_residual(p: ListRuleParams, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw from ``(f - g*)_+ / (1 - alpha*)``, supported on ``[t*, inf)``.

    Notes
    -----
    On ``[t*, inf)`` the residual CDF is ``J(x) - alpha* = E(t*) - E(x)``; the draw solves
    ``log E(x) = log(1 - u) + log E(t*)`` by Chandrupatla's bracketing method (relative
    bracket width ``8 eps``) inside ``[t*, delta - Phi^{-1}_exp(log(1 - u) + log E(t*))]``
    (valid because ``E(x) <= Q(x - delta)``).
    """
    u = np.asarray(u, dtype=np.float64)
    if u.size == 0:
        return np.empty(0)
    with np.errstate(divide="ignore"):
        target = np.log1p(-np.minimum(u, 1.0 - _EPS)) + p.log_rejection
    lo = p.t_star.copy()
    hi = np.maximum(p.delta - ndtri_exp(target), lo)
    x, ok = _roots(_residual_excess, lo, hi, (p.K, p.delta, target))
    if not ok.all():
        # E(hi) <= Q(hi - delta) = exp(target) holds exactly, but when 1 - Phi(hi)^K is below the
        # rounding of Q(hi - delta) the computed excess at hi is +-1 ulp and the bracket looks
        # invalid: the root is then the bracket end (lo or hi) whose excess is zero to rounding
        bad = np.flatnonzero(~ok)
        args = (p.K[bad], p.delta[bad], target[bad])
        f_lo, f_hi = np.abs(_residual_excess(lo[bad], *args)), np.abs(_residual_excess(hi[bad], *args))
        if np.max(np.minimum(f_lo, f_hi)) > 1e-12:
            raise RuntimeError("optimal list residual: root bracketing failed (excess at both ends > 1e-12)")
        x[bad] = np.where(f_hi <= f_lo, hi[bad], lo[bad])
    return x


def _residual_excess(x, K, delta, target):
    """``log E(x) - target``: decreasing in ``x`` on ``[t*, inf)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = _log_E(x, K, delta) - target
    return np.clip(np.where(np.isnan(v), -1e3, v), -1e3, 1e3)


# ---------------------------------------------------------------------------------------------
# the public scalar object
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OptimalListRule:
    """The exact optimal list rule for ``K`` children at ``delta``.

    Attributes
    ----------
    K : int
    delta : float
    params : ListRuleParams
        One-row constants (``t_keep = t_a``, ``t_low = t_lo``, ``t_star``, ...).
    acceptance : float
        ``int min(f, g*)`` summed per piece: ``Phi(t* - delta)`` (where ``g* >= f``) plus
        ``1 - Phi(t*)^K`` (where ``g* < f``).
    rejection_probability : float
        ``1 - acceptance = E(t*)``, computed directly.
    bound : float
        :func:`rass_theory.exact.bound.acceptance_bound` (independent Newton solve).
    gap : float
        ``acceptance - bound`` (``<= 0`` up to rounding; ``0`` means the bound is attained).
    status : str
        ``"optimal"``, or ``"failed: <reason>"`` (then the rule refuses to select).
    """

    K: int
    delta: float
    params: ListRuleParams
    acceptance: float
    rejection_probability: float
    bound: float
    gap: float
    status: str

    @property
    def t_keep(self) -> float:
        return float(self.params.t_keep[0])

    @property
    def t_star(self) -> float:
        return float(self.params.t_star[0])

    def _check(self):
        if self.status != "optimal":
            raise RuntimeError(f"optimal_list_rule(K={self.K}, delta={self.delta}) is unusable: {self.status}")

    def _rows(self, n: int) -> ListRuleParams:
        return ListRuleParams(*(np.repeat(getattr(self.params, f), n) for f in self.params.__dataclass_fields__))

    def selected_logpdf(self, s) -> np.ndarray:
        """``log g*(s)``."""
        s = np.asarray(s, dtype=np.float64)
        return log_selected_ratio(self._rows(s.size), s.reshape(-1)).reshape(s.shape) - 0.5 * s * s - _LOG_SQRT_2PI

    def selected_cdf(self, s) -> np.ndarray:
        """``G*(s)``."""
        s = np.asarray(s, dtype=np.float64)
        return selected_cdf(self._rows(s.size), s.reshape(-1)).reshape(s.shape)

    def select(self, s, rng) -> np.ndarray:
        """Child index per row of ``s (n, K)`` (uses ``rng`` for keep decisions and fake scores)."""
        self._check()
        s = np.asarray(s, dtype=np.float64)
        if s.ndim != 2 or s.shape[1] != self.K:
            raise ValueError(f"s must have shape (n, {self.K}), got {s.shape}")
        if self.delta == 0.0 or self.K == 1:
            return np.zeros(s.shape[0], dtype=np.int64)
        return select(self.params, s, rng.random(s.shape), rng)

    def sample_residual(self, u) -> np.ndarray:
        """Inverse-CDF draws from ``(f - g*)_+ / (1 - alpha*)``."""
        self._check()
        u = np.asarray(u, dtype=np.float64).reshape(-1)
        return sample_residual(self._rows(u.size), u)


def optimal_list_rule(K, delta) -> OptimalListRule:
    """The exact selection rule that attains the list-coupling bound ``alpha*(K, delta)``.

    Parameters
    ----------
    K : int
        Number of iid children (positive integer).
    delta : float
        Standardised displacement ``||mu_q - mu_p|| / sigma`` (finite, ``>= 0``).

    Returns
    -------
    OptimalListRule
        Frozen; ``status == "optimal"`` when every invariant held (``t_lo < t_a < t*``, mass of
        ``g*`` equal to 1 within ``1e-12``, ``|gap| <= 1e-12``), otherwise a ``"failed: ..."``
        status naming the failed check (the rule then refuses to select or sample).

    Raises
    ------
    ValueError
        ``K`` not a positive integer, ``delta`` negative or not finite (message names the argument).

    Notes
    -----
    Selected law ``g* = f 1{s < t_a} + K phi Phi^(K-1) 1{s >= t_a}`` with
    ``Phi(t_a)^K = Phi(t_a - delta)``; realised exactly by private priorities (module docstring);
    ``int min(f, g*) = Phi(t* - delta) + 1 - Phi(t*)^K = alpha*``.  The certificate is the
    bound itself: any exact list coupling accepts at most ``J(t)`` for every ``t``
    (``proofs/P5-list-coupling-bound.md``), and this rule accepts ``J(t*)``.  Proofs in
    ``proofs/P10-optimal-list-rule.md``.  Solves are cached (``functools.lru_cache``).

    Examples
    --------
    >>> r = optimal_list_rule(4, 0.5)
    >>> r.status, abs(r.gap) < 1e-12
    ('optimal', True)
    """
    return _cached_rule(check_K(K), check_delta(delta))


@functools.lru_cache(maxsize=1024)
def _cached_rule(K: int, delta: float) -> OptimalListRule:
    from ..exact.bound import list_coupling_bound

    p = solve_list_rule(K, delta)
    bound = list_coupling_bound(K, delta)
    if delta == 0.0:
        return OptimalListRule(K, delta, p, 1.0, 0.0, bound.acceptance, 1.0 - bound.acceptance, "optimal")
    ts = float(p.t_star[0])
    rej = float(np.exp(p.log_rejection[0]))
    acc = float(np.exp(log_ndtr(ts - delta)) - np.expm1(K * log_ndtr(ts))) if np.isfinite(ts) else 1.0
    if K == 1:
        acc, rej = math.erfc(0.5 * delta / math.sqrt(2.0)), math.erf(0.5 * delta / math.sqrt(2.0))
    gap = acc - bound.acceptance
    reasons = []
    if not bool(p.converged[0]):
        reasons.append("root finding did not converge or t_lo < t_a < t* failed")
    if K > 1:
        ta = float(p.t_keep[0])
        mass_defect = abs(math.exp(float(log_ndtr(ta - delta))) - math.exp(K * float(log_ndtr(ta))))
        if not mass_defect <= 1e-12:
            reasons.append(f"selected law mass defect {mass_defect:.3g} > 1e-12")
    if not abs(gap) <= 1e-12:
        reasons.append(f"acceptance differs from the bound by {gap:.3g}")
    status = "optimal" if not reasons else "failed: " + "; ".join(reasons)
    return OptimalListRule(K, delta, p, acc, rej, bound.acceptance, gap, status)


def optimal_list_acceptance(K, delta) -> float:
    """Exact acceptance of the optimal list rule (``= acceptance_bound(K, delta)``)."""
    return optimal_list_rule(K, delta).acceptance
