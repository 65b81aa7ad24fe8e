"""A small independent mpmath oracle for TV(g_w, f), used by tests/exact/test_rass_exact.py.

Independent of the float code paths: crossings are refined by ``mpmath.findroot`` from
starting points, and interval masses are CDF differences ``[F(b) - F(a)] - [G(b) - G(a)]``
evaluated at 60 significant digits (``F = ncdf(. - delta)``, ``G`` the order-statistic mixture
``sum_j w_j P(Bin(K, Phi) >= j + 1)``), so the O(delta) cancellation costs nothing.
"""
from __future__ import annotations

import mpmath as mp


def _weights(weights):
    w = [mp.mpf(float(x)) for x in weights]
    total = mp.fsum(w)
    return [x / total for x in w]


def _ratio(w, s):
    """g_w(s) / phi(s) in mpmath."""
    K = len(w)
    p, q = mp.ncdf(s), mp.ncdf(-s)
    return mp.fsum(w[j] * K * mp.binomial(K - 1, j) * p**j * q ** (K - 1 - j) for j in range(K))


def _G(w, s):
    K = len(w)
    if s == mp.inf:
        return mp.mpf(1)
    if s == -mp.inf:
        return mp.mpf(0)
    p, q = mp.ncdf(s), mp.ncdf(-s)
    total = mp.mpf(0)
    cum = mp.mpf(0)
    for k in range(K + 1):
        total += cum * mp.binomial(K, k) * p**k * q ** (K - k)
        if k < K:
            cum += w[k]
    return total


def tv_oracle(weights, delta, starts, dps: int = 60):
    """TV(g_w, f) at ``dps`` digits; ``starts`` are float approximations of the crossings."""
    with mp.workdps(dps):
        w = _weights(weights)
        d = mp.mpf(float(delta))

        def h(s):
            return d * s - d * d / 2 - mp.log(_ratio(w, s))

        roots = sorted(mp.findroot(h, mp.mpf(float(c))) for c in starts)
        bounds = [-mp.inf] + roots + [mp.inf]
        tv = mp.mpf(0)
        for a, b in zip(bounds[:-1], bounds[1:]):
            mid = (a + b) / 2 if (a != -mp.inf and b != mp.inf) else (b - 1 if a == -mp.inf else a + 1)
            if h(mid) <= 0:
                continue
            Fa = mp.ncdf(a - d) if a != -mp.inf else mp.mpf(0)
            Fb = mp.ncdf(b - d) if b != mp.inf else mp.mpf(1)
            tv += (Fb - Fa) - (_G(w, b) - _G(w, a))
        return tv
