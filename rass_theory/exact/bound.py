"""The list-coupling bound ``alpha*(K, delta) = min_t [Phi(t - delta) + 1 - Phi(t)^K]``.

No verifier that outputs one of ``K`` iid drafts (or a correction) with the exact target law can
accept more often than ``alpha*`` (``proofs/P5-list-coupling-bound.md``).  The objective

    J(t) = Phi(t - delta) + 1 - Phi(t)^K,
    J'(t) = K phi(t) Phi(t)^(K-1) (exp(h(t)) - 1),
    h(t) = delta t - delta^2 / 2 - log K - (K - 1) log Phi(t),

has ``h`` convex (``-log Phi`` is convex) with ``h -> +inf`` at both ends when ``K > 1``, so ``J``
rises from ``J(-inf) = 1``, falls, and rises back to ``J(+inf) = 1``: the global minimum is
``J(t_2)`` at the larger root ``t_2`` of ``h`` (and ``t_2 = delta / 2`` when ``K = 1``).  Newton's
method started at ``t_0 = delta / 2 + log(K) / delta >= t_2`` (where ``h(t_0) >= 0``) decreases
monotonically to ``t_2`` because ``h`` is convex and increasing there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import special

from rass_theory._validation import check_delta, check_K
from rass_theory.exact.dgrs import norm_sf

__all__ = ["BoundResult", "list_coupling_bound", "acceptance_bound", "bound_threshold", "bound_rejection_probability"]

_SQRT1_2 = 0.70710678118654752440
_LOG_SQRT_2PI = 0.91893853320467274178


@dataclass(frozen=True)
class BoundResult:
    """The list-coupling bound for one ``(K, delta)``.

    Attributes
    ----------
    acceptance : float
        ``alpha*(K, delta)``, evaluated as ``Phi(t - delta) + (1 - Phi(t)^K)`` (two positive
        terms), so it keeps relative accuracy also when it is tiny (large ``delta``).
    rejection_probability : float
        ``1 - alpha*``, computed directly (relative accuracy down to the underflow threshold).
    t : float
        The minimising threshold ``t_2`` (the Neyman–Pearson half-line is ``{s <= t_2}``).
    """

    acceptance: float
    rejection_probability: float
    t: float


def _log_Phi(t: float) -> float:
    return float(special.log_ndtr(t))


def _one_minus_J(t: float, K: int, delta: float) -> float:
    """``rho(t) = Phi(t)^K - Phi(t - delta)``, arranged to avoid cancellation in each tail."""
    if t >= 0.0:
        # Q(t - delta) - (1 - Phi(t)^K), with 1 - Phi^K = -expm1(K log Phi)
        return norm_sf(t - delta) + math.expm1(K * math.log1p(-norm_sf(t)))
    return math.exp(K * _log_Phi(t)) - math.exp(_log_Phi(t - delta))


def _J(t: float, K: int, delta: float) -> float:
    """``J(t) = Phi(t - delta) + (1 - Phi(t)^K)``: two positive terms, relatively accurate."""
    return math.exp(_log_Phi(t - delta)) - math.expm1(K * _log_Phi(t))


def _h_and_slope(t: float, K: int, delta: float, log_K: float) -> tuple[float, float]:
    log_Phi = _log_Phi(t)
    inv_mills = math.exp(-0.5 * t * t - _LOG_SQRT_2PI - log_Phi)  # phi(t) / Phi(t)
    h = delta * t - 0.5 * delta * delta - log_K - (K - 1) * log_Phi
    return h, delta + (K - 1) * -inv_mills


def _larger_root(K: int, delta: float) -> float:
    """Larger root ``t_2`` of the convex function ``h`` by monotone Newton from the right."""
    log_K = math.log(K)
    t = 0.5 * delta + log_K / delta
    if t > 1e150:  # rho(t_2) <= Q(t_2 - delta) underflows long before this
        return t
    for _ in range(200):
        h, slope = _h_and_slope(t, K, delta, log_K)
        if h <= 0.0 or slope <= 0.0:
            break
        step = h / slope
        t_new = t - step
        if step <= 4e-16 * max(1.0, abs(t)):
            t = t_new
            break
        t = t_new
    return t


def list_coupling_bound(K, delta) -> BoundResult:
    """Compute ``alpha*(K, delta)``, ``1 - alpha*`` and the minimising threshold.

    Parameters
    ----------
    K : int
        Number of iid drafts (``>= 1``); tested up to 1024.
    delta : float
        Standardised displacement (``>= 0``); tested up to 40.

    Returns
    -------
    BoundResult

    Notes
    -----
    ``alpha* = min_t J(t)``, ``J(t) = Phi(t - delta) + 1 - Phi(t)^K``.  For ``K = 1`` this is
    ``2 Phi(-delta / 2)`` (RMC attains it).  For ``K > 1`` the minimiser is the larger root of
    ``h(t) = delta t - delta^2/2 - log K - (K-1) log Phi(t)`` and ``1 - alpha* =
    Q(t - delta) + expm1(K log Phi(t))`` is evaluated in that form (``t >= 0``) so that it keeps
    relative accuracy when it is small.  ``proofs/P5-list-coupling-bound.md``.
    """
    K = check_K(K)
    delta = check_delta(delta)
    if K == 1:
        half = 0.5 * delta
        return BoundResult(math.erfc(half * _SQRT1_2), math.erf(half * _SQRT1_2), half)
    if delta == 0.0:
        return BoundResult(1.0, 0.0, math.inf)
    t = _larger_root(K, delta)
    rho = min(max(_one_minus_J(t, K, delta), 0.0), 1.0)
    alpha = min(max(_J(t, K, delta), 0.0), 1.0)
    return BoundResult(alpha, rho, t)


def acceptance_bound(K, delta) -> float:
    """List-coupling bound ``alpha*(K, delta) = min_t [Phi(t - delta) + 1 - Phi(t)^K]``.

    Parameters
    ----------
    K : int
        Number of iid drafts (``>= 1``).
    delta : float
        Standardised displacement (``>= 0``).

    Returns
    -------
    float
        Upper bound on the acceptance probability of any exact single-output list coupling.

    Notes
    -----
    Global minimum over ``t`` (not a grid search); see :func:`list_coupling_bound` and
    ``proofs/P5-list-coupling-bound.md``.

    Examples
    --------
    >>> round(acceptance_bound(4, 1.0), 6)
    0.924197
    """
    return list_coupling_bound(K, delta).acceptance


def bound_rejection_probability(K, delta) -> float:
    """``1 - alpha*(K, delta)``, computed directly (relative accuracy while representable)."""
    return list_coupling_bound(K, delta).rejection_probability


def bound_threshold(K, delta) -> float:
    """The minimising ``t`` of the list-coupling objective (``+inf`` when ``delta = 0``, ``K > 1``)."""
    return list_coupling_bound(K, delta).t
