"""The optimal list rule: an exact selection rule whose acceptance is the list-coupling bound.

A node has ``K`` iid children with rank-1 coordinates ``s_1..s_K ~ N(0, 1)`` and target
``f = N(delta, 1)``.  No exact list coupling accepts more often than
``alpha*(K, delta) = min_t J(t)``, ``J(t) = Phi(t - delta) + 1 - Phi(t)^K``
(``proofs/P5-list-coupling-bound.md``); this module builds the rule that attains it
(``proofs/P10-optimal-list-rule.md``):

* ``t_a`` solves ``Phi(t)^K = Phi(t - delta)``; the selected law is ``g* = f`` on
  ``(-inf, t_a)`` and ``K phi Phi^(K-1)`` (law of the maximum) on ``[t_a, inf)``, and
  ``int min(f, g*) = J(t*)``, with ``t_lo < t*`` the roots of
  ``h(t) = delta t - delta^2/2 - log K - (K-1) log Phi(t)``.
* **Private priorities** (P10.5): a child with ``s >= t_a`` keeps ``s`` as its key; a child with
  ``s < t_a`` gets, with probability ``q(s) = (m - a) / (M - a)``, a fake key drawn from
  ``nu ~ phi q`` on ``(-inf, t_a)``; the largest key is selected.
* **Numerics** (P10.6): every root is found per row by vectorised safeguarded iterations (no
  Python loop over rows); ``t_a`` is the sign change of the log-space form
  ``S(t) = log(-log Phi(t - delta)) - log K - log(-log Phi(t))``, well conditioned at every
  ``K >= 2`` and ``delta > 0``.
* **Certificate** (P10.6, on every path): ``t_lo < t_a <= t*``; mass defect ``|D(t_a)| <= 1e-12``,
  ``D = Phi^K - Phi(. - delta)``, which is the total variation between the verifier's output and
  the target (P10.7); and the acceptance against an independently solved bound.  A failure
  raises :class:`ListRuleCertificateError`, a ``ValueError`` naming ``K``, ``delta`` and the check.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import erf, erfc, log_ndtr, ndtr, ndtri_exp

from .._validation import check_delta, check_K
from ..backend import chandrupatla, get_backend

__all__ = ["CERTIFICATE_TOL", "ListRuleCertificateError", "ListRuleParams", "OptimalListRule",
           "optimal_list_rule", "solve_list_rule", "rule_params",
           "OptimalListLaw"]

_LOG_SQRT_2PI = 0.91893853320467274178
_EPS = np.finfo(np.float64).eps
_LOG2 = 0.69314718055994530942
_SQRT1_2 = 0.70710678118654752440


# ---------------------------------------------------------------------------------------------
# vectorised root finding
# ---------------------------------------------------------------------------------------------


def _nan_to(nx, x, value):
    """``x`` with NaN replaced by ``value`` (either back end)."""
    return nx.where(x != x, value, x)


def _by_branch(cond, f_yes, f_no, *args):
    """``f_yes(*args)`` where ``cond``, ``f_no(*args)`` elsewhere, for elementwise ``f_yes, f_no``.

    NumPy: each function on its own elements only (the values of ``where`` over both, half the
    work); torch: ``where`` over both (no host synchronisation).
    """
    nx = get_backend(cond)
    if nx.name != "numpy" or np.ndim(cond) == 0:
        yes, no = f_yes(*args), f_no(*args)
        if isinstance(yes, tuple):
            return tuple(nx.where(cond, a, b) for a, b in zip(yes, no))
        return nx.where(cond, yes, no)
    args = np.broadcast_arrays(cond, *(np.asarray(a, dtype=np.float64) for a in args))[1:]
    n_yes = np.count_nonzero(cond)
    if n_yes in (0, cond.size):                        # one branch everywhere: no gathers
        out = (f_yes if n_yes else f_no)(*args)
        return tuple(np.array(a) for a in out) if isinstance(out, tuple) else np.array(out)
    yes = f_yes(*(a[cond] for a in args))
    no = f_no(*(a[~cond] for a in args))
    if not isinstance(yes, tuple):
        yes, no = (yes,), (no,)
    outs = []
    for a, b in zip(yes, no):
        out = np.empty(np.shape(cond))
        out[cond], out[~cond] = a, b
        outs.append(out)
    return tuple(outs) if len(outs) > 1 else outs[0]


def _log_Phi(x):
    """``log Phi(x)`` with relative accuracy everywhere: ``log1p(-Q(x))`` for ``x > 0``.

    (``scipy.special.log_ndtr`` evaluates ``log(ndtr(x))`` on ``(0, 6]``, whose relative error
    ``eps / Q(x)`` is ``1e-7`` at ``x = 6``.)  Torch's ``log_ndtr`` is already
    ``log1p(-erfc(x/sqrt 2)/2)`` right of ``-1`` (relatively accurate where ``Phi`` is near 1, and
    more accurate there than ``log1p`` of torch's ``ndtr``), so torch uses it directly.
    """
    nx = get_backend(x)
    if nx.name == "torch":
        return nx.log_ndtr(x)
    with np.errstate(divide="ignore"):
        return _by_branch(x > 0, lambda x: np.log1p(-ndtr(-np.abs(x))), lambda x: log_ndtr(np.minimum(x, 0.0)), x)


def ndtri_exp_nx(lp):
    """``Phi^{-1}(exp(lp))`` for ``lp <= 0`` on either back end.

    NumPy: :func:`scipy.special.ndtri_exp`.  Torch: ``ndtri(exp(lp))`` where ``exp(lp) > 1e-300``,
    else 8 Newton steps on ``log Phi(x) = lp`` from ``-sqrt(-2 lp - log(-2 lp) - log 2 pi)``
    (quadratic convergence in the far tail), merged with ``where`` (no host synchronisation).
    """
    nx = get_backend(lp)
    if nx.name == "numpy":
        return ndtri_exp(lp)
    direct = nx.ndtri(nx.clip(nx.exp(lp), 1e-300, None))
    far = lp < math.log(1e-300)
    idx = nx.rows_where(far.reshape(-1))
    if idx is None:                                    # accelerator: every element, merged
        return nx.where(far, _ndtri_exp_tail(nx, lp), direct)
    if idx.shape[0] == 0:                              # the CPU: the tail elements only
        return direct
    out = nx.copy(direct).reshape(-1)
    out[idx] = _ndtri_exp_tail(nx, lp.reshape(-1)[idx])
    return out.reshape(direct.shape)


def _ndtri_exp_tail(nx, lp):
    """:func:`ndtri_exp_nx` where ``exp(lp) <= 1e-300``: 8 Newton steps on ``log Phi(x) = lp``."""
    y = -2.0 * nx.clip(lp, None, -690.0)
    x = -nx.sqrt(y - nx.log(y) - 2 * _LOG_SQRT_2PI)
    for _ in range(8):
        lpx = nx.log_ndtr(x)
        x = x - (lpx - lp) * nx.exp(lpx + 0.5 * x * x + _LOG_SQRT_2PI)
    return x


def _psi(x):
    """``psi(x) = log(-log Phi(x))``, finite and relatively accurate for every finite ``x``.

    Right of 0, ``-log Phi = -log1p(-Q) = Q r`` with ``r = -log1p(-Q)/Q`` in ``[1, 1.39]``
    (``r = 1`` once ``Q < 1e-300``), so ``psi = log Q + log r`` with ``log Q = log_ndtr(-x)``
    (asymptotic series in the far tail): no underflow where ``Phi`` rounds to 1.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _by_branch(x > 0, _psi_right, _psi_left, x)


def _psi_right(x):
    """:func:`_psi` right of 0: ``log Q + log r``."""
    nx = get_backend(x)
    lq = nx.log_ndtr(-nx.abs(x))
    return lq + _log_r_of(nx, nx.exp(lq))


def _psi_left(x):
    """:func:`_psi` at ``x <= 0``: ``log(-log Phi(x))``."""
    nx = get_backend(x)
    return nx.log(-nx.log_ndtr(nx.minimum(x, 0.0)))


def _h(t, K, delta):
    """``h(t) = delta t - delta^2/2 - log K - (K-1) log Phi(t)`` and ``h'(t)``."""
    lp = _log_Phi(t)
    with np.errstate(over="ignore", under="ignore"):
        mills = np.exp(-0.5 * t * t - _LOG_SQRT_2PI - lp)  # phi / Phi
    return delta * t - 0.5 * delta * delta - np.log(K) - (K - 1) * lp, delta - (K - 1) * mills


def _h_value(t, K, delta):
    """``h(t)`` alone (the bracketing solve of the certificate)."""
    return _h(t, K, delta)[0]


def _newton_convex(t, K, delta, *, from_right: bool, max_iter: int = 200):
    """Monotone Newton on the convex ``h`` from a start where ``h >= 0`` (outer side of a root)."""
    t = t.copy()
    active = np.isfinite(t)
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


def _log_r(x):
    """``log(-log1p(-Q(x)) / Q(x))`` for ``x > 0`` (in ``[0, 0.33]``; ``0`` once ``Q < 1e-300``)."""
    nx = get_backend(x)
    return _log_r_of(nx, nx.ndtr(-nx.abs(x)))


def _log_r_of(nx, q):
    """``log(-log1p(-q) / q)``, ``0`` once ``q < 1e-300`` (:func:`_log_r`, :func:`_psi_right`)."""
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        tiny = q < 1e-300
        return nx.where(tiny, 0.0, nx.log(-nx.log1p(-q) / nx.where(tiny, 1.0, q)))


def _S_tail(t, K, delta):
    """``psi(t - delta) - log K - psi(t)`` for ``t - delta > 0``, the two ``psi`` differenced analytically.

    ``log Q(x) = -x^2/2 + log(erfcx(x/sqrt 2)/2)`` and ``psi = log Q + log r``, so
    ``S = delta t - delta^2/2 - log K + log(erfcx((t-delta)/sqrt 2)/erfcx(t/sqrt 2))
    + log r(t - delta) - log r(t)`` with no term of size ``t^2``.
    """
    nx = get_backend(t)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        x, y = nx.maximum(t - delta, 0.0), nx.maximum(t, 0.0)
        return (delta * t - 0.5 * delta * delta - nx.log(K)
                + nx.log(nx.erfcx(x * _SQRT1_2) / nx.erfcx(y * _SQRT1_2)) + _log_r(x) - _log_r(y))


def _sign_D(t, K, delta):
    """``S(t) = psi(t - delta) - log K - psi(t)``: the sign of ``D(t) = Phi(t)^K - Phi(t - delta)``.

    ``D > 0`` iff ``log K + psi(t) < psi(t - delta)``; both ``psi`` have relative accuracy
    (:func:`_psi`), so ``S`` is well conditioned where ``Phi(t)^K`` and ``Phi(t - delta)`` are both
    below ``1e-16`` or both round to 1; right of ``delta`` the two ``psi`` are differenced
    analytically (:func:`_S_tail`; ``proofs/P10-optimal-list-rule.md``, P10.6).
    """
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        v = _by_branch(t - delta > 0, _S_tail, _S_body, t, K, delta)
    return np.clip(np.nan_to_num(v, nan=0.0), -1e3, 1e3)


def _S_body(t, K, delta):
    """``psi(t - delta) - log K - psi(t)`` (:func:`_sign_D` where ``t - delta <= 0``)."""
    return _psi(t - delta) - np.log(K) - _psi(t)


def _log_E_parts(t, K, delta):
    """``(L1, Delta)`` with ``D(t) = Phi(t)^K - Phi(t - delta) = exp(L1) (1 - exp(Delta))``.

    The form is chosen by the size of ``Phi(t)^K`` (not the sign of ``t``): below 1/2,
    ``L1 = K log Phi(t)``; otherwise ``L1 = log Q(t - delta)`` and ``Delta = log(1 - Phi(t)^K) - L1``
    with ``log(1 - Phi^K)`` from ``psi`` (right of ``delta`` through :func:`_S_tail`, free of the
    cancellation of two logs of size ``t^2/2``).  Every term has relative accuracy, so ``D``
    inherits only the conditioning of the difference (``proofs/P10-optimal-list-rule.md``, P10.6).
    """
    L1a = K * _log_Phi(t)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        return _by_branch(L1a < -_LOG2, _E_small, _E_large, t, K, delta, L1a)


def _E_small(t, K, delta, L1a):
    """:func:`_log_E_parts` where ``Phi(t)^K < 1/2``."""
    return L1a, _log_Phi(t - delta) - L1a


def _E_large(t, K, delta, L1a):
    """:func:`_log_E_parts` where ``Phi(t)^K >= 1/2``: ``L1 = log Q(t - delta)``."""
    nx = get_backend(t)
    LQ = nx.log_ndtr(delta - t)
    y_log = nx.log(K) + _psi(t)
    y = -nx.exp(y_log)
    tiny = nx.abs(y) < 1e-300
    l_ratio = nx.log(nx.where(tiny, 1.0, nx.expm1(y) / nx.where(tiny, -1.0, y)))
    tail = lambda t, K, delta, l_ratio, y_log, LQ: -_S_tail(t, K, delta) + _log_r(t - delta) + l_ratio  # noqa: E731
    body = lambda t, K, delta, l_ratio, y_log, LQ: y_log + l_ratio - LQ                               # noqa: E731
    return LQ, _by_branch(t - delta > 0, tail, body, t, K, delta, l_ratio, y_log, LQ)


def _D(t, K, delta):
    """``D(t) = Phi(t)^K - Phi(t - delta)`` (signed, absolute error a few ulp of the larger term)."""
    L1, delta_ = _log_E_parts(t, K, delta)
    with np.errstate(under="ignore", over="ignore"):
        return -np.exp(L1) * np.expm1(delta_)


def _roots(fun, lo, hi, args):
    """Bracketed roots by Chandrupatla's method (:func:`rass_theory.backend.chandrupatla`,
    the iteration of :func:`scipy.optimize.elementwise.find_root`, with its statuses).

    Returns ``(x, ok)``; the final bracket is ``<= 8 eps (1 + |x|)`` wide where ``ok``.
    """
    res = chandrupatla(fun, lo, np.maximum(hi, lo), args=args, xatol=4 * _EPS, xrtol=4 * _EPS, maxiter=300)
    x = res.x
    ok = res.success & np.isfinite(x)
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
        ``log(1 - alpha*) = log D(t*)`` with ``D(t) = Phi(t)^K - Phi(t - delta)``.
    converged : ndarray of bool
        Root finding converged and ``t_lo < t_a <= t*``.
    mass_defect : ndarray
        ``|D(t_a)| = |1 - int g*|``; the output law of the verifier built on these constants is
        within total variation ``mass_defect`` of the target (``proofs/P10-optimal-list-rule.md``,
        P10.7).
    gap : ndarray
        ``J(t*) - J(t_B)``: acceptance minus the bound at ``t_B``, the larger root of ``h`` found
        independently (Chandrupatla's bracketing method instead of Newton).
    acceptance : ndarray
        ``J(t*) = Phi(t* - delta) + 1 - Phi(t*)^K`` (two positive terms).
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
    mass_defect: np.ndarray
    gap: np.ndarray
    acceptance: np.ndarray

    def take(self, rows) -> ListRuleParams:
        """The parameters of the given rows (index array or boolean mask)."""
        return ListRuleParams(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))

    def column(self) -> ListRuleParams:
        """The parameters as ``(n, 1)`` columns, to broadcast against ``(n, K)`` scores."""
        return ListRuleParams(*(getattr(self, f)[:, None] for f in self.__dataclass_fields__))

    def on(self, like) -> ListRuleParams:
        """The parameters as float64 arrays of ``like``'s back end and device (``self`` for NumPy)."""
        nx = get_backend(like)
        if nx.name == "numpy":
            return self
        return ListRuleParams(*(nx.constant(np.asarray(getattr(self, f), dtype=np.float64), like)
                                for f in self.__dataclass_fields__))

    def failed_checks(self) -> list[tuple[int, str]]:
        """``(row, reason)`` for every row that fails a check of P10.6 (empty when all pass)."""
        masks = _check_masks(self)
        bad = np.flatnonzero(masks[0] | masks[1] | masks[2])
        return [(int(i), _row_reason(self, int(i), masks)) for i in bad]

    def certify(self) -> ListRuleParams:
        """Raise :class:`ListRuleCertificateError` at the first row that fails a check; else ``self``.

        The checks of P10.6, vectorised over rows: root finding converged with
        ``t_lo < t_a <= t*``; ``mass_defect <= CERTIFICATE_TOL``; ``|gap| <= CERTIFICATE_TOL``.
        """
        failed = self.failed_checks()
        if failed:
            i, reason = failed[0]
            raise ListRuleCertificateError(int(self.K.reshape(-1)[i]), float(self.delta.reshape(-1)[i]), reason)
        return self


#: P10.6 tolerance of the mass defect ``|D(t_a)|`` and of ``|gap|``; by P10.7 the verifier's
#: output is within total variation ``|D(t_a)|`` (+ second-order terms below 1e-28) of the target
CERTIFICATE_TOL = 1e-12


class ListRuleCertificateError(ValueError, RuntimeError):
    """The rule's constants at ``(K, delta)`` could not be certified (P10.6).

    A ``ValueError`` naming ``K``, ``delta`` and the failed check; also a ``RuntimeError`` for
    callers written against earlier releases.
    """

    def __init__(self, K: int, delta: float, reason: str):
        self.K, self.delta, self.reason = K, delta, reason
        super().__init__(f"optimal list rule cannot certify its parameters at K={K}, delta={delta!r}: {reason}")


def _check_masks(p: ListRuleParams):
    """Per-row failure masks of the three checks of P10.6 (vectorised)."""
    flat = [np.asarray(getattr(p, f)).reshape(-1) for f in ("converged", "mass_defect", "gap")]
    conv, defect, gap = flat
    return ~conv, ~(defect <= CERTIFICATE_TOL), ~(np.abs(gap) <= CERTIFICATE_TOL)


def _row_reason(p: ListRuleParams, i: int, masks=None) -> str:
    """The failed checks of row ``i`` in words (``""`` when it passes)."""
    conv, defect, gap = _check_masks(p) if masks is None else masks
    reasons = []
    if conv[i]:
        reasons.append("root finding did not converge or t_lo < t_a <= t* failed")
    if defect[i]:
        reasons.append(f"selected law mass defect |D(t_a)| = {float(p.mass_defect.reshape(-1)[i]):.3g} "
                       f"> {CERTIFICATE_TOL:g}")
    if gap[i]:
        reasons.append(f"acceptance differs from the independently solved bound by "
                       f"{float(p.gap.reshape(-1)[i]):.3g}")
    return "; ".join(reasons)


def _log_E(t, K, delta):
    """``log D(t)``, ``D(t) = Phi(t)^K - Phi(t - delta) > 0`` for ``t`` in ``(t_a, inf)`` (:func:`_log_E_parts`)."""
    nx = get_backend(t)
    L1, delta_ = _log_E_parts(t, K, delta)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return L1 + nx.log(-nx.expm1(delta_))


def _J(t, K, delta):
    """``J(t) = Phi(t - delta) + (1 - Phi(t)^K)``: two positive terms, relatively accurate."""
    with np.errstate(under="ignore"):
        return np.exp(_log_Phi(t - delta)) - np.expm1(K * _log_Phi(t))


def _outer_start(cand, default, have, K, delta, *, from_right: bool):
    """``cand`` where it lies on the outer side of its root of ``h`` (``h > 0``, ``h'`` of the side's sign), else ``default``.

    A start there keeps :func:`_newton_convex` monotone (it stops at once from the inner side).
    """
    x = np.where(have, cand, default)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        h, slope = _h(x, K, delta)
        ok = have & np.isfinite(x) & (h > 0) & ((slope > 0) if from_right else (slope < 0))
    return np.where(ok, x, default)


def _narrow_roots(fun, lo, hi, lo_wide, hi_wide, have, args):
    """Roots of ``fun``: the regula-falsi point of the narrow bracket ``(lo, hi)`` where ``have`` and
    ``fun`` changes sign across it, else :func:`_roots` on the wide bracket ``(lo_wide, hi_wide)``.

    A narrow bracket with a sign change holds the wide bracket's only root; its regula-falsi point
    is within ``|fun''| w^2 / (8 |fun'|)`` of it (``w`` the bracket's width, ``~1e-9`` for the
    table's: ``~1e-18``, below the rounding of ``fun``), from two evaluations instead of about ten
    (``proofs/P10-optimal-list-rule.md``, P10.6).  Returns ``(x, ok)``.
    """
    x = np.full(np.shape(lo_wide), np.nan)
    ok = np.zeros(np.shape(lo_wide), dtype=bool)
    idx = np.flatnonzero(have)
    if idx.size:
        a, b = lo[idx], np.maximum(hi[idx], lo[idx])
        sub = tuple(v[idx] for v in args)
        fa, fb = fun(a, *sub), fun(b, *sub)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            x1 = a - fa * (b - a) / (fb - fa)
        valid = (np.sign(fa) != np.sign(fb)) & np.isfinite(x1)
        x[idx[valid]], ok[idx[valid]] = np.clip(x1, a, b)[valid], True
    todo = np.flatnonzero(~ok)
    if todo.size:
        x[todo], ok[todo] = _roots(fun, lo_wide[todo], hi_wide[todo], tuple(v[todo] for v in args))
    return x, ok


def _solve_general(Kg, dg, guess=None):
    """Constants and P10.6 checks for rows with ``K >= 2``, ``delta > 0`` (:func:`solve_list_rule`, Notes).

    ``guess`` (from :func:`_table_guess`) narrows the starts and brackets where it holds; every
    root is still found by the same solver, and a narrowed start or bracket that does not hold
    (wrong side of the root, no sign change) falls back to the wide one.  ``None``: the wide
    starts and brackets everywhere.
    """
    with np.errstate(over="ignore", divide="ignore"):
        t0 = 0.5 * dg + np.log(Kg) / dg
    tl0 = -dg - np.sqrt(2 * dg * dg + 2 * np.log(Kg)) - 1.0
    if guess is None:
        have = np.zeros(dg.shape, dtype=bool)
        nan = np.full(dg.shape, np.nan)
        (ts_lo, ts_hi), (ta_lo, ta_hi), (tl_lo, tl_hi) = (nan, nan), (nan, nan), (nan, nan)
    else:
        have, (ts_lo, ts_hi), (ta_lo, ta_hi), (tl_lo, tl_hi) = guess
    ts = _newton_convex(_outer_start(ts_hi, t0, have, Kg, dg, from_right=True), Kg, dg, from_right=True)
    tl = _newton_convex(_outer_start(tl_lo, tl0, have, Kg, dg, from_right=False), Kg, dg, from_right=False)
    fin = np.isfinite(ts)
    hi_a = np.where(fin, ts, tl)
    with np.errstate(invalid="ignore"):
        ta, ok = _narrow_roots(_sign_D, np.clip(ta_lo, tl, hi_a), np.clip(ta_hi, tl, hi_a), tl, hi_a,
                               have & fin, (Kg, dg))
    # far right tail (Q(t* - delta) < 1e-300, tiny delta, or t* beyond float range): the sign
    # of D near t* is below rounding, and every law puts mass < 1e-300 on [t_a, inf): t_a = t*
    with np.errstate(invalid="ignore"):
        far = (~ok | ~fin) & ((log_ndtr(dg - ts) < -690.0) | ~fin)
    ta = np.where(far, ts, ta)
    ok = ok | far
    lc = _log_Phi(ta)
    log_M = (Kg - 1) * (_log_Phi(tl) - lc)
    with np.errstate(invalid="ignore"):
        lr = _log_E(ts, Kg, dg)
    # D(t*) <= Q(t* - delta) < 1e-300 where log D(t*) is not representable (t* ~ log(K)/delta)
    log_rej = np.where((np.isnan(lr) & (log_ndtr(dg - ts) < -690.0)) | ~fin, -np.inf, lr)
    converged = ok & (tl < ta) & (ta <= ts) & np.isfinite(tl)
    with np.errstate(invalid="ignore"):
        defect = np.where(fin, np.abs(_D(np.where(fin, ta, 0.0), Kg, dg)), 0.0)
    # the independent bound: Chandrupatla on h over ((t_lo + t*)/2, 2 t0 + 1), where
    # h < 0 < h(2 t0 + 1) (h(2 t0) >= delta^2/2 + log K - (K-1) log Phi(2 t0) > 0); narrowed to
    # the table's bracket (which does not use this row's Newton solve) where that holds
    lo_b, hi_b = np.where(fin, 0.5 * (tl + ts), 0.0), np.where(fin, 2 * t0 + 1, 1.0)
    with np.errstate(invalid="ignore"):
        tb, okb = _narrow_roots(_h_value, np.clip(ts_lo, lo_b, hi_b), np.clip(ts_hi, lo_b, hi_b), lo_b, hi_b,
                                have & fin, (Kg, dg))
    a_rule = np.where(fin, _J(np.where(fin, ts, 0.0), Kg, dg), 1.0)
    a_bound = np.where(fin, _J(tb, Kg, dg), 1.0)
    gap = np.where(fin & ~okb, np.nan, a_rule - a_bound)
    return ts, tl, ta, lc, log_M, log_rej, converged, defect, gap, a_rule


#: the start table: ``log2(delta)`` from ``_TABLE_LOG2[0]`` to ``_TABLE_LOG2[1]`` in ``_TABLE_SIZE`` nodes
_TABLE_LOG2 = (-7.0, 5.0)
_TABLE_SIZE = 1537
#: a ``K`` shared by fewer rows than this is solved from the wide starts (building its table costs more)
_TABLE_MIN_ROWS = 512


def _catmull_rom(y0, y1, y2, y3, w):
    """Cubic (Catmull-Rom) interpolation between ``y1`` (``w = 0``) and ``y2`` (``w = 1``) on equal spacing."""
    return y1 + 0.5 * w * (y2 - y0 + w * (2.0 * y0 - 5.0 * y1 + 4.0 * y2 - y3 + w * (3.0 * (y1 - y2) + y3 - y0)))


@functools.lru_cache(maxsize=64)
def _start_table(K: int):
    """Per-``K`` table of ``t*``, ``t_a``, ``t_lo`` over ``u = log delta`` (a pure function of ``K``; cached).

    Returns ``(u, values (3, n), widths (3, n - 1))``: the roots at the nodes (wide solve) and per
    interval a half-width ``4 |cubic interpolation error at the quarter point| + 1e-9 (1 + |t|)`` for the
    brackets of :func:`_table_guess`.  Nodes or intervals whose solve did not pass P10.6 get NaN
    (no guess there).
    """
    u = np.linspace(_TABLE_LOG2[0] * _LOG2, _TABLE_LOG2[1] * _LOG2, _TABLE_SIZE)
    quarter = 0.75 * u[:-1] + 0.25 * u[1:]  # the cubic's h^3 error term vanishes at midpoints

    def roots(uu):
        d = np.exp(uu)
        ts, tl, ta, _, _, _, conv, defect, gap, _ = _solve_general(np.full(d.shape, float(K)), d)
        good = conv & (defect <= CERTIFICATE_TOL) & (np.abs(gap) <= CERTIFICATE_TOL) & np.isfinite(ts)
        return np.where(good, np.stack([ts, ta, tl]), np.nan)

    at, am = roots(u), roots(quarter)
    err = np.full(am.shape, np.nan)
    err[:, 1:-1] = np.abs(am[:, 1:-1] - _catmull_rom(at[:, :-3], at[:, 1:-2], at[:, 2:-1], at[:, 3:], 0.25))
    width = 4.0 * err + 1e-9 * (1.0 + np.abs(am))
    return u, at, width


def _table_guess(K, delta):
    """Narrow starts and brackets of ``t*``, ``t_a``, ``t_lo`` per row from :func:`_start_table`.

    Returns ``(have, (lo, hi) of t*, (lo, hi) of t_a, (lo, hi) of t_lo)``, ``have`` False (no guess)
    outside the table, where a ``K`` has fewer than ``_TABLE_MIN_ROWS`` rows, or where the table
    has no value.  Cubic (Catmull-Rom) interpolation in ``log delta`` plus/minus the interval's width.
    """
    n = delta.shape[0]
    have = np.zeros(n, dtype=bool)
    lo = np.full((3, n), np.nan)
    hi = np.full((3, n), np.nan)
    values, counts = np.unique(K, return_counts=True)
    with np.errstate(divide="ignore"):
        ud = np.log(delta)
    for k, c in zip(values, counts):
        if c < _TABLE_MIN_ROWS or k != int(k):
            continue
        u, at, width = _start_table(int(k))
        rows = np.flatnonzero((K == k) & (ud >= u[0]) & (ud < u[-1]))
        x = (ud[rows] - u[0]) / (u[1] - u[0])
        i = np.clip(x.astype(np.int64), 1, u.size - 3)
        w = x - i
        est = _catmull_rom(at[:, i - 1], at[:, i], at[:, i + 1], at[:, i + 2], w)
        half = width[:, i]
        lo[:, rows], hi[:, rows] = est - half, est + half
        have[rows] = np.isfinite(lo[:, rows]).all(0) & np.isfinite(hi[:, rows]).all(0)
    return have, (lo[0], hi[0]), (lo[1], hi[1]), (lo[2], hi[2])


#: ``log`` of a bound that rounds to 0 in float64 (``exp(-746) = 0``)
_LOG_ZERO = -746.0


def far_rows(K, delta):
    """Rows where ``alpha*(K, delta) < exp(-746)``, so every acceptance rounds to 0 (either back end).

    ``alpha* <= J(t_0) <= (K + 1) Phi(-(delta/2 - log(K)/delta))`` at ``t_0 = delta/2 + log(K)/delta``
    (``proofs/P10-optimal-list-rule.md``, P10.8).  There the rule selects the largest child
    (``t_a = -inf``: no fake scores), is always rejected (``f/g* = 0`` in float64) and draws the
    residual from ``f`` itself: its output is within ``alpha* < 1e-323`` of the target in total
    variation, and its constants need no root (the general solve loses its brackets from
    ``delta ~ 1e4`` on).  ``delta >= 2 * 38.6`` or so, depending on ``K``.
    """
    nx = get_backend(delta)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = 0.5 * delta - nx.log(K) / delta
        return (delta > 0) & (nx.log(K + 1.0) + nx.log_ndtr(-z) < _LOG_ZERO)


def solve_list_rule(K, delta) -> ListRuleParams:
    """Solve and check the optimal list rule's constants for every row.

    Parameters
    ----------
    K : int or int array
        Children per node (``>= 1``).
    delta : float or array
        Standardised displacement per row (finite, ``>= 0``).

    Returns
    -------
    ListRuleParams
        With the per-row results of the checks of P10.6 (``converged``, ``mass_defect``,
        ``gap``); :meth:`ListRuleParams.certify` raises where one fails.

    Notes
    -----
    ``t*`` and ``t_lo`` by monotone Newton on the convex
    ``h(t) = delta t - delta^2/2 - log K - (K-1) log Phi(t)`` from outer starts; ``t_a`` by
    Chandrupatla's method on ``(t_lo, t*)`` applied to
    ``S(t) = log(-log Phi(t - delta)) - log K - log(-log Phi(t))``, which has the sign of
    ``D = Phi^K - Phi(. - delta)``; ``mass_defect = |D(t_a)|``; ``gap = J(t*) - J(t_B)`` with ``t_B``
    an independent bracketing solve of ``h``.  Where one ``K`` has at least ``_TABLE_MIN_ROWS`` rows
    the starts and brackets are narrowed by a cached per-``K`` table (:func:`_table_guess`), with
    the wide ones wherever a narrow one does not hold.  Rows where ``alpha*`` rounds to 0
    (:func:`far_rows`, P10.8) are not solved: ``t_a = -inf`` (the law of the maximum),
    ``t* = delta/2 + log(K)/delta``, acceptance 0, rejection probability 1, mass defect 0.
    Starts, brackets and proofs:
    ``proofs/P10-optimal-list-rule.md``, P10.4 and P10.6.
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
    defect = np.zeros(n)
    gap = np.zeros(n)
    acc = np.ones(n)
    one = K == 1
    zero = (delta == 0) & ~one
    far = far_rows(K, delta) & ~one & ~zero
    gen = ~one & ~zero & ~far
    # K = 1: the only child is selected, g = phi; residual (f - phi)_+ on [delta/2, inf)
    if one.any():
        d1 = delta[one]
        t_keep[one] = -np.inf
        t_star[one] = 0.5 * d1
        log_c[one] = -np.inf
        with np.errstate(divide="ignore"):
            log_rej[one] = np.log(erf(0.5 * d1 / math.sqrt(2.0)))
        acc[one] = erfc(0.5 * d1 / math.sqrt(2.0))
    if zero.any():
        t_keep[zero] = np.inf
        log_M[zero] = -np.log(K[zero])
    if far.any():
        # alpha* < exp(-746) (far_rows): the law of the maximum, always rejected, residual f
        d = delta[far]
        t_keep[far] = -np.inf
        t_star[far] = 0.5 * d + np.log(K[far]) / d
        log_c[far] = -np.inf
        log_rej[far] = 0.0
        acc[far] = 0.0
    if gen.any():
        Kg, dg = K[gen], delta[gen]
        cols = _solve_general(Kg, dg, _table_guess(Kg, dg))
        (t_star[gen], t_low[gen], t_keep[gen], log_c[gen], log_M[gen], log_rej[gen],
         converged[gen], defect[gen], gap[gen], acc[gen]) = cols
    return ListRuleParams(K, delta, t_keep, t_low, t_star, log_c, log_M, log_rej, converged, defect, gap, acc)


# ---------------------------------------------------------------------------------------------
# the rule: selected law, keep probability, selection, residual
# ---------------------------------------------------------------------------------------------


def log_selected_ratio(p: ListRuleParams, s):
    """``log(g*(s) / phi(s))`` per row: ``delta s - delta^2/2`` below ``t_a``, else ``log K + (K-1) log Phi(s)``."""
    nx = get_backend(s)
    below = s < p.t_keep
    with np.errstate(over="ignore"):                    # delta^2 = inf: only where s >= t_a = -inf
        return nx.where(below, p.delta * s - 0.5 * p.delta ** 2, nx.log(p.K) + (p.K - 1) * nx.log_ndtr(s))


def selected_cdf(p: ListRuleParams, s):
    """``G*(s)``: ``Phi(s - delta)`` below ``t_a``, ``Phi(s)^K`` from ``t_a`` on."""
    nx = get_backend(s)
    below = s < p.t_keep
    return nx.where(below, nx.ndtr(s - p.delta), nx.exp(p.K * nx.log_ndtr(s)))


class OptimalListLaw:
    """The rule's selected law ``g*`` per row, as the :class:`rass_theory.exact.laws.SelectedLaw` protocol.

    ``g* = f`` below ``t_a`` and ``K phi Phi^(K-1)`` from ``t_a`` on, so ``f - g*`` is ``0`` below
    ``t_a``, negative on ``(t_a, t*)`` and positive beyond: its one crossing with a positive side
    is ``t*``, supplied in closed form (:meth:`crossings`), and the grid scan of
    :func:`rass_theory.exact.laws.sample` is skipped.

    Parameters
    ----------
    K : int
    params : ListRuleParams
        One row (shared) or one per row, arrays of one back end (:meth:`ListRuleParams.on`).
    """

    def __init__(self, K: int, params: ListRuleParams):
        self.K = int(K)
        self.params = params
        self.nx = get_backend(params.delta)

    def _col(self, s):
        p = self.params
        return p if p.delta.shape[0] == 1 else p.column()

    def take(self, rows) -> "OptimalListLaw":
        p = self.params
        return self if p.delta.shape[0] == 1 else OptimalListLaw(self.K, p.take(rows))

    def keys(self):
        p = self.params
        return None if p.delta.shape[0] == 1 else p.delta[:, None]

    def log_ratio(self, s):
        """``log(g*(s) / phi(s))`` for ``s (r, m)``."""
        return log_selected_ratio(self._col(s), s)

    def cdf_excess(self, s):
        """``G*(s) - Phi(s)``: ``Phi(s - delta) - Phi(s)`` below ``t_a``, ``Phi (Phi^(K-1) - 1)`` above."""
        from ..exact.laws import shift_difference

        nx, p = self.nx, self._col(s)
        lp = nx.log_ndtr(s)
        above = nx.exp(lp) * nx.expm1((p.K - 1) * lp)
        return nx.where(s < p.t_keep, shift_difference(nx, s, p.delta), above)

    def crossings(self, delta):
        """``([t*] per row, False)``: ``f - g* <= 0`` left of ``t*``, ``> 0`` right of it."""
        nx = self.nx
        t_star = nx.zeros_like(delta) + self.params.t_star
        return t_star[:, None], nx.zeros_like(delta) > 1.0


def fake_probability(p: ListRuleParams, s):
    """``q(s)``: probability that a child at ``s`` is given a fake score (``0`` for ``s >= t_a``).

    ``p``'s fields broadcast against ``s`` (one row of parameters, or a column per row).

    Notes
    -----
    ``q = (m - a) / (M - a)`` with ``m = exp(delta s - delta^2/2 - log K - (K-1) log c)``,
    ``a = exp((K-1)(log Phi(s) - log c))``, ``M = exp(log_M)`` (each one exponential of a log, so
    finite where ``Phi(s)^(K-1)`` underflows and ``c^(1-K)`` overflows, e.g. ``K = 128``,
    ``delta = 40``).  Where ``|M - a| < 1e-7 M`` (``0/0`` at
    ``t_lo``) the limit ``1 - delta Phi(s) / ((K-1) phi(s))`` is used; the result is clipped to
    ``[0, 1]`` (round-off only; ``proofs/P10-optimal-list-rule.md``, Lemma 3).
    """
    return _fake_q(p.K, p.delta, p.log_c, p.log_M, p.t_keep, s)


def _fake_q(K, delta, lc, log_M, t_keep, s):
    """:func:`fake_probability` on bare arrays (the hot loop of :func:`draw_fake_scores`)."""
    nx = get_backend(s)
    below = s < t_keep
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        big_M = nx.exp(log_M)
        m = nx.exp(delta * s - (0.5 * delta * delta + nx.log(K) + (K - 1) * lc))
        lcdf = nx.log_ndtr(s)
        a = nx.exp((K - 1) * (lcdf - lc))  # one exp: Phi(s)^(K-1) and c^(1-K) may under/overflow
        den = big_M - a
        q = (m - a) / den
        limit = 1.0 - delta * nx.exp(lcdf + 0.5 * s * s + _LOG_SQRT_2PI) / nx.maximum(K - 1, 1.0)
        q = nx.where(nx.abs(den) < 1e-7 * big_M, limit, q)
        q = nx.where(delta == 0, 1.0, q)
    return nx.where(below, nx.clip(_nan_to(nx, q, 0.0), 0.0, 1.0), 0.0)


def _proposal(p: ListRuleParams):
    """Per-row constants of the fake-score proposal (see :func:`draw_fake_scores`).

    Returns ``(b, log_m0, log Phi(b), log Phi(b - delta), P(low part), log(c - Phi(b)))`` with
    ``log_m0 = log 2 - log K - (K-1) log c - log M`` (so ``2 m(x)/M = exp(log_m0 + delta x - delta^2/2)``).
    """
    K, delta, lc, lM = p.K, p.delta, p.log_c, p.log_M
    nx = get_backend(delta)
    pos = delta > 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        log_m0 = _LOG2 - nx.log(K) - (K - 1) * lc - lM
        b = nx.where(pos, (0.5 * delta * delta - log_m0) / nx.where(pos, delta, 1.0), -math.inf)
        b = nx.minimum(b, p.t_keep)
        lpb, lpbd = nx.log_ndtr(b), nx.log_ndtr(b - delta)
        log_w_low = nx.where(pos, log_m0 + lpbd, -math.inf)
        log_w_mid = lc + nx.log(-nx.expm1(lpb - lc))
        logit = log_w_low - log_w_mid
        logit = nx.where((logit != logit) | (logit == -math.inf), -math.inf, logit)
        p_low = 1.0 / (1.0 + nx.exp(-logit))
    return b, log_m0, lpb, lpbd, p_low, log_w_mid


def _uniform_source(rng, like):
    """``draw(shape) -> float64 uniforms`` of ``like``'s back end from ``rng`` (or ``rng`` itself if callable)."""
    if callable(rng):
        return rng
    nx = get_backend(like)
    return lambda shape: nx.uniform(rng, shape, like)


def _nonzero(nx, mask):
    """``(rows, cols)`` of the True entries of a 2-d mask (a host synchronisation on an accelerator)."""
    if nx.name == "numpy":
        return np.nonzero(mask)
    idx = mask.reshape(-1).nonzero()[:, 0]
    return idx // mask.shape[1], idx % mask.shape[1]


def draw_fake_scores(p: ListRuleParams, rng, size: int, max_rounds: int = 100_000, index=None):
    """``size`` draws from ``nu(x) ~ phi(x) q(x)`` on ``(-inf, t_a)`` by rejection (either back end).

    ``p`` holds one row of parameters (shared), ``size`` rows, or any rows with ``index`` (``size``
    row numbers into ``p``, one per draw).  ``rng``: a numpy Generator, a torch.Generator on
    ``p``'s device, or a callable ``draw(shape) -> uniforms``.

    Notes
    -----
    Envelope ``q <= env``: ``env = 2 m/M`` below ``b`` (where ``2 m(b) = M``), ``1`` on ``[b, t_a)``
    (``proofs/P10-optimal-list-rule.md``, P10.6 and Lemma 3).  ``phi env`` is a mixture of
    ``phi(. - delta)`` on ``(-inf, b)`` (mass ``exp(log_m0) Phi(b - delta)``) and ``phi`` on
    ``[b, t_a)`` (mass ``c - Phi(b)``), both drawn by inverse CDF in log space
    (:func:`ndtri_exp_nx`); a proposal is accepted with probability ``q(x)/env(x)`` (near ``1/2``
    or above, also at ``K = 1024``, ``delta = 37`` where the plain proposal ``Phi^{-1}(c U)`` had
    2%).  Each round draws ``(3, pending, 1)`` uniforms, one proposal per pending key, the same
    layout on both back ends (torch checks on the host once per round whether every key is done;
    about ``log2(size)`` rounds); 4 proposals per round made the NumPy verifier 36% slower.
    """
    nx = get_backend(p.delta)
    draw = _uniform_source(rng, p.delta)
    shared = p.delta.shape[0] == 1
    b, m0, lpb, lpbd, p_low, log_w_mid = _proposal(p)
    rows = (p.K, p.delta, p.log_c, p.log_M, p.t_keep, b, m0, lpb, lpbd, p_low, log_w_mid)
    out = nx.full((size,), math.nan, p.delta)
    pending = nx.arange(size, p.delta)
    for _ in range(max_rounds):
        m = pending.shape[0]
        if m == 0:
            return out
        at = pending if index is None else index[pending]
        cur = rows if shared else tuple(v[at][:, None] for v in rows)
        K, delta, lc, lM, t_keep, b_, m0_, lpb_, lpbd_, p_low_, lwm_ = cur
        u = draw((3, m, 1))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            lu = nx.log1p(-u[0])                                   # log(1 - U)
            low = u[2] < p_low_
            # low part: delta + Phi^{-1}(U Phi(b - delta)); mid part: Phi^{-1}(Phi(b) + U (c - Phi(b)))
            x = ndtri_exp_nx(nx.where(low, lpbd_ + lu, nx.logaddexp(lpb_ + 0.0 * lu, lu + lwm_)))
            x = x + nx.where(low, delta + 0.0 * lu, 0.0)
            env = nx.where(x < b_, nx.exp(m0_ + delta * x - 0.5 * delta * delta), 1.0)
            ratio = _fake_q(K, delta, lc, lM, t_keep, x) / env
        got = ((u[1] < ratio) & (x < t_keep))[:, 0]
        done = _nonzero(nx, got[:, None])[0]
        out[pending[done]] = x[:, 0][done]
        pending = pending[~got]
    raise RuntimeError(f"fake-score rejection sampler did not finish in {max_rounds} rounds")


def select(p: ListRuleParams, s, u_keep, rng):
    """Child selected per row by the private-priority rule (either back end).

    Parameters
    ----------
    p : ListRuleParams
        One row of parameters (shared by every row) or one per row of ``s`` (arrays of ``s``'s kind).
    s : array (n, K)
    u_keep : array (n, K)
        Uniforms deciding which children below ``t_a`` get a fake score.
    rng : numpy.random.Generator, torch.Generator or callable ``draw(shape)``
        Source of the fake scores (rejection sampling).

    Returns
    -------
    int array (n,)
    """
    nx = get_backend(s)
    shared = p.delta.shape[0] == 1
    col = p if shared else p.column()
    fake = u_keep < fake_probability(col, s)
    keys = nx.copy(s)
    r, c = _nonzero(nx, fake)
    if r.shape[0]:
        keys[r, c] = draw_fake_scores(p, rng, r.shape[0], index=None if shared else r)
    return keys.argmax(1)


def sample_residual(p: ListRuleParams, u):
    """Inverse-CDF draw from ``(f - g*)_+ / (1 - alpha*)``, supported on ``[t*, inf)`` (either back end).

    Notes
    -----
    On ``[t*, inf)`` the residual CDF is ``J(x) - alpha* = E(t*) - E(x)``; the draw solves
    ``log E(x) = log(1 - u) + log E(t*)`` by the namespace's bracketed root finder
    (``nx.find_root``: NumPy Chandrupatla's method to ``8 eps``, torch fixed iterations)
    inside ``[t*, delta - Phi^{-1}_exp(log(1 - u) + log E(t*))]`` (valid because
    ``E(x) <= Q(x - delta)``).  ``p`` holds one row (shared) or one row per ``u``.
    """
    nx = get_backend(u)
    if u.shape[0] == 0:
        return nx.cast(u, nx.float64)
    zero = nx.zeros_like(u)
    K, delta, t_star, log_rej = (zero + v for v in (p.K, p.delta, p.t_star, p.log_rejection))
    far = (p.t_keep + zero == -math.inf) & (K > 1)     # far_rows (solve_list_rule's t_a = -inf)
    if not nx.maybe_any(far):
        return _residual_rows(nx, K, delta, t_star, log_rej, u)
    from_f = delta + nx.ndtri(nx.clip(u, 1e-300, 1.0 - 2.0 ** -53))   # the residual is f (far_rows)
    near = nx.rows_where(~far)
    if near is None:                                 # accelerator: every row, merged
        return nx.where(far, from_f, _residual_rows(nx, K, delta, t_star, log_rej, u))
    out = nx.copy(from_f)
    if near.shape[0]:
        out[near] = _residual_rows(nx, K[near], delta[near], t_star[near], log_rej[near], u[near])
    return out


def _residual_rows(nx, K, delta, t_star, log_rej, u):
    """:func:`sample_residual` on rows of the general solve (per-row arrays of ``u``'s shape)."""
    with np.errstate(divide="ignore"):
        target = nx.log1p(-nx.minimum(u, 1.0 - _EPS)) + log_rej
    lo = t_star
    hi = nx.maximum(delta - ndtri_exp_nx(target), lo)
    args = (K, delta, target)
    if nx.name != "numpy":
        return nx.find_root(_residual_excess, lo, hi, args=args)
    # E(hi) <= Q(hi - delta) = exp(target) holds exactly, but when 1 - Phi(hi)^K is below the
    # rounding of Q(hi - delta) the computed excess at hi is +-1 ulp and the bracket looks
    # invalid: the root is then the bracket end whose excess is zero to rounding (find_root
    # returns it); anything else breaks the certificate
    ends = _residual_excess(lo, *args), _residual_excess(hi, *args)
    bad = ((ends[0] > 0) == (ends[1] > 0)) & (ends[0] != 0) & (ends[1] != 0)
    worst = np.where(bad, np.minimum(np.abs(ends[0]), np.abs(ends[1])), 0.0)
    if np.max(worst) > 1e-12:
        i = int(np.argmax(worst))
        raise ListRuleCertificateError(int(K[i]), float(delta[i]),
                                       "residual draw: root bracketing failed (excess at both ends > 1e-12)")
    return nx.find_root(_residual_excess, lo, hi, args=args, values=ends)


def _residual_excess(x, K, delta, target):
    """``log E(x) - target``: decreasing in ``x`` on ``[t*, inf)``."""
    nx = get_backend(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = _log_E(x, K, delta) - target
    return nx.clip(_nan_to(nx, v, -1e3), -1e3, 1e3)


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
        ``"optimal"`` (:func:`optimal_list_rule` raises rather than return anything else; an
        object whose status was replaced refuses to select or sample with
        :class:`ListRuleCertificateError`).
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
            raise ListRuleCertificateError(self.K, self.delta, self.status)

    def _rows(self, n: int) -> ListRuleParams:
        return self.params.take(np.zeros(n, dtype=np.int64))

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
        Frozen, ``status == "optimal"``: every check of P10.6 held (``t_lo < t_a <= t*``, mass
        defect ``|D(t_a)| <= 1e-12``, acceptance within ``1e-12`` of ``acceptance_bound`` and of an
        independently solved bound).  By P10.7 the verifier built on it outputs a law within
        total variation ``params.mass_defect`` of the target.

    Raises
    ------
    ValueError
        ``K`` not a positive integer, ``delta`` negative or not finite (message names the argument).
    ListRuleCertificateError
        (a ``ValueError``) a check of P10.6 failed; the message names ``K``, ``delta`` and the
        check.  No uncertified rule is returned.

    Notes
    -----
    Selected law ``g* = f 1{s < t_a} + K phi Phi^(K-1) 1{s >= t_a}`` with
    ``Phi(t_a)^K = Phi(t_a - delta)``; realised exactly by private priorities (module docstring);
    ``int min(f, g*) = Phi(t* - delta) + 1 - Phi(t*)^K = alpha*``.  The certificate of optimality
    is the bound itself: any exact list coupling accepts at most ``J(t)`` for every ``t``
    (``proofs/P5-list-coupling-bound.md``), and this rule accepts ``J(t*)``.  The certificate of
    exactness is the TV bound ``|D(t_a)|`` of ``proofs/P10-optimal-list-rule.md``, P10.7 (the
    constant actually used need not be the exact root).  Proofs in
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
    acc = float(p.acceptance[0])
    rej = float(np.exp(p.log_rejection[0]))
    if K == 1:
        acc, rej = math.erfc(0.5 * delta / math.sqrt(2.0)), math.erf(0.5 * delta / math.sqrt(2.0))
    gap = acc - bound.acceptance
    reasons = [r for r in (_row_reason(p, 0),) if r]
    if not abs(gap) <= CERTIFICATE_TOL:
        reasons.append(f"acceptance differs from acceptance_bound(K, delta) by {gap:.3g}")
    if reasons:
        raise ListRuleCertificateError(K, delta, "; ".join(reasons))
    return OptimalListRule(K, delta, p, acc, rej, bound.acceptance, gap, "optimal")


def rule_params(K: int, delta: np.ndarray) -> ListRuleParams:
    """Certified rule constants for ``K`` children at every ``delta`` of a batch (one row when shared).

    Every check of ``proofs/P10-optimal-list-rule.md`` (P10.6) runs on every path: one distinct
    delta reuses the cached scalar rule (which also compares with
    :func:`rass_theory.acceptance_bound`); several are solved and checked in one vectorised pass
    over the distinct values (:meth:`ListRuleParams.certify`).

    Raises
    ------
    ListRuleCertificateError
        A ``ValueError`` naming ``K``, the first ``delta`` that failed and the failed check
        (never a silently wrong rule).
    """
    values, inverse = np.unique(delta, return_inverse=True)
    if values.size == 1:
        return optimal_list_rule(K, float(values[0])).params  # raises if not certified
    return solve_list_rule(K, values).certify().take(inverse.reshape(-1))
