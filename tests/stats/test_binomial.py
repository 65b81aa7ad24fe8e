"""``binomial_pvalue`` is ``scipy.stats.binomtest(k, n, p).pvalue``, float for float."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rass_theory.stats.binomial import binomial_pvalue, binomial_sf


def _cases():
    g = np.random.default_rng(20261202)
    out = [(0, 1, 0.5), (1, 1, 0.5), (0, 10, 1e-9), (10, 10, 1 - 1e-9), (5, 10, 0.5), (0, 400_000, 3e-5),
           (12, 400_000, 3e-5), (40, 400_000, 3e-5), (3, 7, 0.0), (7, 7, 1.0), (0, 7, 0.0), (6, 7, 1.0),
           (0, 1, 0.0), (1, 1, 1.0), (0, 5, 1.0), (5, 5, 0.0), (0, 400_000, 0.0)]
    for i in range(400):
        n = int(g.integers(1, 10 ** int(g.integers(1, 7))))
        p = float(10 ** g.uniform(-7, -1e-4)) if i % 2 else float(g.uniform(1e-3, 0.999))
        sd = np.sqrt(n * p * (1 - p))
        k = int(np.clip(np.rint(g.normal(n * p, 3 * sd + 1)), 0, n)) if i % 3 else int(g.integers(0, n + 1))
        out.append((k, n, p))
    return out


def test_equals_scipy_binomtest_bit_for_bit():
    for k, n, p in _cases():
        assert binomial_pvalue(k, n, p) == float(stats.binomtest(k, n, p).pvalue), (k, n, p)


def test_sf_equals_scipy_binom_sf_bit_for_bit():
    """``binomial_sf(x, n, p)`` is ``stats.binom.sf(x, n, p)`` (the bound test's tail), boundaries included."""
    for k, n, p in _cases() + [(0, 5, 1.0), (4, 5, 1.0), (0, 5, 0.0), (6, 5, 0.3)]:
        for x in (k - 1, k, -1, n):
            assert binomial_sf(x, n, p) == float(stats.binom.sf(x, n, p)), (x, n, p)


def test_bad_input_raises_like_scipy():
    with pytest.raises(ValueError):
        binomial_pvalue(5, 3, 0.5)
    with pytest.raises(ValueError):
        binomial_pvalue(1, 3, 1.5)


def test_chi2_and_kolmogorov_tails_equal_scipy_bit_for_bit():
    """``tests.chi2_sf`` is ``stats.chi2.sf`` and the large-n KS tail is ``stats.kstwobign.sf``, float for float."""
    from rass_theory.stats.tests import chi2_sf, kolmogorov_sf

    g = np.random.default_rng(20261203)
    for _ in range(300):
        df = int(g.integers(1, 5000))
        for x in (float(g.uniform(0, 3 * df)), float(10 ** g.uniform(-8, 4)), 0.0, -1.0, float("inf")):
            assert chi2_sf(x, df) == float(stats.chi2.sf(x, df)), (x, df)
        n, D = int(g.integers(10_001, 10**7)), float(10 ** g.uniform(-4, -1))
        assert kolmogorov_sf(D, n) == min(max(float(stats.kstwobign.sf(D * np.sqrt(n))), 0.0), 1.0)
