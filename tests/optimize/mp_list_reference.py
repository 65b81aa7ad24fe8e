"""Independent mpmath reference for the optimal list rule at any ``K >= 2``, ``delta > 0``.

Nothing here shares code or formulas with :mod:`rass_theory.optimize.list_rule`: 30-digit
arithmetic (unbounded exponent range, so ``Phi(t)^K ~ 1e-4000`` and ``Q(t) ~ 1e-10^7`` are
represented), plain bisection on signs, and ``D(t) = Phi(t)^K - Phi(t - delta)`` evaluated directly or, where
``Phi(t)^K >= 1/2``, in the complement form ``Q(t - delta) + expm1(K log1p(-Q(t)))``.

* ``t_a``: the sign change of ``D`` (``D < 0`` on ``(-inf, t_a)``, ``D > 0`` on ``(t_a, inf)``,
  ``proofs/P5-list-coupling-bound.md``), bracketed by ``(L, 2 t0 + 1)`` with
  ``L = -delta - sqrt(2 delta^2 + 2 log K) - 1``, ``t0 = delta/2 + log(K)/delta``.
* ``t2``: the root of ``h(t) = delta t - delta^2/2 - log K - (K-1) log Phi(t)`` in
  ``(t_a, 2 t0 + 1)``, where ``h(t_a) < 0 < h(2 t0 + 1)``.
* ``alpha* = J(t2) = Phi(t2 - delta) + 1 - Phi(t2)^K`` and ``1 - alpha* = D(t2)``; the
  minimum property is checked at ``t2 +- 1e-3`` on ``J`` or ``D = 1 - J``, whichever is
  below 1/2 (each is relatively accurate).
"""
from __future__ import annotations

import functools

import mpmath as mp

_DPS = 30


def _Q(x):
    return mp.ncdf(-x)


def _log_Phi(x):
    return mp.log1p(-_Q(x)) if x > 0 else mp.log(mp.ncdf(x))


def D(t, K, delta):
    """``Phi(t)^K - Phi(t - delta)``: the direct difference while ``Phi(t)^K < 1/2``, else the
    complement form ``Q(t - delta) + expm1(K log1p(-Q(t)))`` (two terms below 1/2 or near it)."""
    top = mp.ncdf(t) ** K
    if top < mp.mpf(1) / 2:
        return top - mp.ncdf(t - delta)
    return _Q(t - delta) + mp.expm1(K * mp.log1p(-_Q(t)))


def J(t, K, delta):
    """``Phi(t - delta) + 1 - Phi(t)^K`` (two non-negative terms)."""
    return mp.ncdf(t - delta) - mp.expm1(K * _log_Phi(t))


def _h(t, K, delta):
    return delta * t - delta ** 2 / 2 - mp.log(K) - (K - 1) * _log_Phi(t)


def _bisect_sign(fun, lo, hi, iters=200):
    """Sign change of ``fun`` in ``(lo, hi)`` (``fun(lo) < 0 < fun(hi)``) to a relative width 1e-25."""
    f_lo, f_hi = fun(lo), fun(hi)
    assert f_lo < 0 < f_hi, (lo, hi, f_lo, f_hi)
    for _ in range(iters):
        mid = (lo + hi) / 2
        if fun(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo <= mp.mpf(10) ** -25 * max(1, abs(lo)):
            break
    return (lo + hi) / 2


@functools.lru_cache(maxsize=None)
def reference(K: int, delta: float):
    """``(alpha*, 1 - alpha*, t_a, t2)`` as mpf numbers (30 digits)."""
    with mp.workdps(_DPS):
        Km, d = mp.mpf(K), mp.mpf(delta)
        t0 = d / 2 + mp.log(Km) / d
        lo = -d - mp.sqrt(2 * d * d + 2 * mp.log(Km)) - 1
        t_a = _bisect_sign(lambda t: D(t, Km, d), lo, 2 * t0 + 1)
        t2 = _bisect_sign(lambda t: _h(t, Km, d), t_a, 2 * t0 + 1)
        alpha, rej = J(t2, Km, d), D(t2, Km, d)
        slack = 1 + mp.mpf(10) ** -20
        for eps in (mp.mpf("1e-3"), mp.mpf("-1e-3")):  # minimum of J = maximum of D = 1 - J,
            if alpha < 0.5:                              # checked on the smaller of the two
                assert J(t2 + eps, Km, d) * slack >= alpha
            else:
                assert D(t2 + eps, Km, d) <= rej * slack
        return alpha, rej, t_a, t2


def defect(t, K: int, delta: float):
    """``|D(t)|`` at a float ``t`` (the TV bound of a rule built with ``t_a = t``, P10.6)."""
    with mp.workdps(_DPS):
        return abs(D(mp.mpf(t), mp.mpf(K), mp.mpf(delta)))
