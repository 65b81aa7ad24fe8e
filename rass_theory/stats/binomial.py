"""The exact two-sided binomial p-value of ``scipy.stats.binomtest``, without its per-call overhead.

``binomtest`` spends about 0.45 ms per call in the distribution objects' argument handling (a
binary search of about 20 ``binom.pmf`` calls), and a harness cell runs some 25 binomial tests at
every look.  :func:`binomial_pvalue` runs the same algorithm on the same ``binom`` kernels
(``scipy.special`` ufuncs ``_binom_pmf/_binom_cdf/_binom_sf``, which ``binom.pmf/cdf/sf`` call
inside their support), so its value is the same float as ``binomtest(k, n, p).pvalue``
(``tests/stats/test_binomial.py`` compares them); where those kernels are missing (another SciPy)
it calls ``binomtest`` itself.
"""
from __future__ import annotations

import math

from scipy import stats

try:  # the kernels of scipy.stats.binom (SciPy >= 1.9)
    from scipy.special._ufuncs import _binom_cdf, _binom_pmf, _binom_sf
except ImportError:  # pragma: no cover - older or newer SciPy: the public (slower) path
    _binom_pmf = _binom_cdf = _binom_sf = None

__all__ = ["binomial_pvalue", "binomial_sf"]

#: ``binomtest``'s relative tolerance when it compares probabilities of outcomes.
RERR = 1 + 1e-7


def _cdf(x, n, p):
    return 0.0 if x < 0 else (1.0 if x >= n else float(_binom_cdf(float(x), float(n), p)))


def _sf(x, n, p):
    return 1.0 if x < 0 else (0.0 if x >= n else float(_binom_sf(float(x), float(n), p)))


def binomial_sf(x: int, n: int, p: float) -> float:
    """``P(X > x)`` for ``X ~ Binomial(n, p)``: the float of ``scipy.stats.binom.sf(x, n, p)``.

    Notes
    -----
    Inside the support (``0 <= x < n``, ``0 < p < 1``) ``binom.sf`` evaluates the kernel
    ``_binom_sf(x, n, p)`` (the regularised incomplete beta ``I_p(x + 1, n - x)``), which this calls
    directly; at the boundaries it is ``1`` (``x < 0``) or ``0`` (``x >= n``).  Elsewhere (or on a
    SciPy without the kernel) it calls ``binom.sf`` itself.  Used by the one-sided bound test
    (``proofs/S1-harness-power.md``, S1.3).
    """
    x, n, p = int(x), int(n), float(p)
    if _binom_sf is None or not 0.0 < p < 1.0 or n < 1:
        return float(stats.binom.sf(x, n, p))
    return _sf(x, n, p)


def _search(a, d, lo, hi):
    """``binomtest``'s ``_binary_search_for_binom_tst``: ``i`` in ``[lo, hi]`` with ``a(i) <= d < a(i + 1)``."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        value = a(mid)
        if value < d:
            lo = mid + 1
        elif value > d:
            hi = mid - 1
        else:
            return mid
    return lo if a(lo) <= d else lo - 1


def binomial_pvalue(k: int, n: int, p: float) -> float:
    """Two-sided exact p-value of ``k`` successes in ``n >= 1`` trials against success probability ``p``.

    Notes
    -----
    The sum of the probabilities of the outcomes no more likely than ``k`` (up to the relative
    tolerance ``1e-7`` of SciPy): with ``d = P(X = k)``, ``X ~ Binomial(n, p)``,
    ``p_value = min(1, sum_{j : P(X = j) <= d (1 + 1e-7)} P(X = j))``, computed as one tail up to ``k``
    and the other from the first outcome beyond the mode whose probability drops below ``d``
    (found by bisection on the unimodal pmf).  Valid (super-uniform) under the null as every
    exact test (proofs/S1-harness-power.md, S1.3).
    """
    k, n, p = int(k), int(n), float(p)
    if p in (0.0, 1.0) and 0 <= k <= n and n >= 1:   # a point mass: binomtest gives 1 at its atom, else 0
        return 1.0 if k == round(p * n) else 0.0
    if _binom_pmf is None or not (0.0 < p < 1.0) or not 0 <= k <= n or n < 1:
        return float(stats.binomtest(k, n, p).pvalue)

    def pmf(x):
        return float(_binom_pmf(float(x), float(n), p))

    d = pmf(k)
    if k == p * n:
        return 1.0
    if k < p * n:
        ix = _search(lambda x: -pmf(x), -d * RERR, math.ceil(p * n), n)
        y = n - ix + int(d * RERR == pmf(ix))
        pval = _cdf(k, n, p) + _sf(n - y, n, p)
    else:
        ix = _search(pmf, d * RERR, 0, math.floor(p * n))
        y = ix + 1
        pval = _cdf(y - 1, n, p) + _sf(k - 1, n, p)
    return min(1.0, pval)
