"""RankLaw above LINEAR_K_MAX: the Bernstein sums in log space (C(K, i) overflows float64 from K = 1030).

Before this test the linear coefficients overflowed to inf and every mass at K > 1029 was NaN
(``rt.acceptance("rass", 1500, 0.5, weights=w)`` returned nan)."""
import numpy as np
import pytest
from scipy.special import gammaln, log_ndtr, logsumexp
from scipy.stats import norm

import rass_theory as rt
from rass_theory.exact import laws


def _quadrature_tv(w, delta, n=20001):
    """TV(f, g) by the trapezoid rule on [-12, 14], g formed directly in log space."""
    K = w.size
    s = np.linspace(-12.0, 14.0, n)
    j = np.arange(K)
    lc = np.log(K) + gammaln(K) - gammaln(j + 1) - gammaln(K - j)
    lg = np.concatenate([logsumexp(np.log(w) + lc + j * log_ndtr(b)[:, None] + (K - 1 - j) * log_ndtr(-b)[:, None],
                                   axis=1) for b in np.array_split(s, 20)]) + norm.logpdf(s)
    return np.trapezoid(np.maximum(norm.pdf(s - delta) - np.exp(lg), 0.0), s)


@pytest.mark.parametrize("K", [1100])
def test_rank_law_mass_is_finite_and_matches_quadrature_beyond_the_binomial_range(K):
    w = np.random.default_rng(0).dirichlet(np.ones(K))
    law = laws.rank_law(w)
    delta = np.array([0.5, 2.0])
    tv = laws.residual_mass(law, delta)
    assert np.all(np.isfinite(tv))
    for d, m in zip(delta, tv):
        assert abs(m - _quadrature_tv(w, d)) < 1e-5          # trapezoid error ~1e-6 at h = 1.3e-3
        assert abs(1.0 - rt.acceptance("rass", K, d, weights=w) - m) < 1e-12
    s = laws.sample(law, delta, np.array([0.3, 0.7]))
    assert np.all(np.isfinite(s))


def test_log_terms_agree_with_the_linear_sum_below_the_switch():
    K = 400
    w = np.random.default_rng(2).dirichlet(np.ones(K))
    law = laws.rank_law(w)
    x = np.linspace(-3.0, 3.0, 7)[None, :]
    np.testing.assert_allclose(law._cdf_excess_log_terms(x), law.cdf_excess(x), rtol=1e-11)


def test_threshold_law_beyond_the_switch_is_finite():
    K = laws.LINEAR_K_MAX + 88
    law = laws.threshold_law(np.full(K, 1.0 / K), np.array([0.3, 1.0]))
    tv = laws.residual_mass(law, np.array([0.5, 2.0]))
    assert np.all(np.isfinite(tv)) and np.all((tv > 0) & (tv < 1))
