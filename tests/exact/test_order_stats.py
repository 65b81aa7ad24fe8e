"""Tests for rass_theory.exact.order_stats (Bernstein mixtures of order statistics) and the
order-statistic densities and CDFs of exact.segments.RankSegment."""
import numpy as np
import pytest
from scipy.integrate import quad

from scipy.special import log_ndtr, ndtr

from rass_theory.exact import normal as nm
from rass_theory.exact import order_stats as ost
from rass_theory.exact.segments import rank_segment


def rank_basis(K, s):
    """``B_j(s)``, shape ``(m, K)``: the rank basis of :class:`RankSegment`."""
    return np.exp(rank_segment(K).log_components(np.atleast_1d(s)))


def order_stat_cdf(K, s):
    """``F_j(s)``, shape ``(m, K)``: :meth:`RankSegment.component_masses` on ``(-inf, s]``."""
    s = np.atleast_1d(np.asarray(s, dtype=np.float64))
    return rank_segment(K).component_masses(np.full(s.shape, -np.inf), s)


def order_stat_sf(K, s):
    """``1 - F_j(s)``, shape ``(m, K)``: :meth:`RankSegment.component_masses` on ``[s, inf)``."""
    s = np.atleast_1d(np.asarray(s, dtype=np.float64))
    return rank_segment(K).component_masses(s, np.full(s.shape, np.inf))


def phi(s):
    return np.exp(nm.log_phi(s))


@pytest.mark.parametrize("K", [1, 2, 5, 16])
def test_basis_integrates_to_one_and_sums_to_K_phi(K):
    for j in range(K):
        val, err = quad(lambda x: rank_basis(K, x)[0, j], -np.inf, np.inf, epsabs=1e-13)
        assert val == pytest.approx(1.0, abs=1e-10)
    s = np.linspace(-9, 9, 37)
    assert np.allclose(rank_basis(K, s).sum(-1), K * phi(s), rtol=1e-13, atol=0)


def test_K1_basis_is_phi():
    s = np.linspace(-30, 30, 13)
    assert np.allclose(np.log(rank_basis(1, s))[:, 0], nm.log_phi(s), rtol=0, atol=1e-13)


@pytest.mark.parametrize("K", [1, 3, 8])
def test_order_stat_cdf_is_integral_of_density(K):
    for x in (-2.5, 0.3, 1.7):
        F = order_stat_cdf(K, x)[0]
        for j in range(K):
            ref = quad(lambda t: rank_basis(K, t)[0, j], -np.inf, x, epsabs=1e-14)[0]
            assert F[j] == pytest.approx(ref, abs=1e-11)
        assert np.allclose(F + order_stat_sf(K, x)[0], 1.0, atol=1e-15)


def test_order_stat_sf_relative_accuracy_upper_tail():
    # P(max of K normals > s) = 1 - Phi(s)^K ~ K (1 - Phi(s)) for large s
    K, s = 4, 12.0
    sf_top = order_stat_sf(K, s)[0, K - 1]
    q = ndtr(-s)
    exact = -np.expm1(K * np.log1p(-q))
    assert sf_top == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("K", [1, 2, 7, 32])
def test_bernstein_cdf_matches_order_stat_mixture(K, rng):
    w = rng.dirichlet(np.ones(K))
    s = np.linspace(-9, 9, 41)
    ref_cdf = order_stat_cdf(K, s) @ w
    ref_sf = order_stat_sf(K, s) @ w
    cdf = np.exp(ost.mixture_log_cdf(w, s))
    sf = np.exp(ost.mixture_log_sf(w, s))
    assert np.allclose(cdf, ref_cdf, rtol=1e-11, atol=0)
    assert np.allclose(sf, ref_sf, rtol=1e-11, atol=0)
    assert np.allclose(ost.mixture_cdf_excess(w, s), ref_cdf - ndtr(s), atol=1e-15)
    dens = np.exp(ost.mixture_log_density_ratio(w, s)) * phi(s)
    assert np.allclose(dens, rank_basis(K, s) @ w, rtol=1e-12, atol=0)
    assert np.allclose(ost.mixture_density_excess(w, s), dens / phi(s) - 1.0, atol=1e-13)


def test_uniform_weights_give_phi_exactly():
    for K in (1, 3, 10):
        w = np.full(K, 1.0 / K)
        s = np.linspace(-8, 8, 17)
        assert np.all(ost.mixture_density_excess(w, s) == 0.0)
        assert np.all(ost.mixture_cdf_excess(w, s) == 0.0)
        assert np.allclose(np.exp(ost.mixture_log_cdf(w, s)), ndtr(s), rtol=1e-13)


def test_weight_parts_relative_accuracy():
    K = 5
    v = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]) * 1e-10
    w = 1.0 / K + v
    _, got = ost.weight_parts(w)
    # float weights carry their own rounding; v is recovered to that level, not to absolute eps
    assert np.allclose(got, w - 0.2, rtol=0, atol=1e-26)
    assert abs(got.sum()) < 1e-25


def test_tails_are_finite_and_exact_limits():
    w = np.array([0.2, 0.0, 0.8])
    s = np.array([-np.inf, -1e5, -40.0, 40.0, 1e5, np.inf])
    lc = ost.mixture_log_cdf(w, s)
    ls = ost.mixture_log_sf(w, s)
    assert not np.any(np.isnan(lc)) and not np.any(np.isnan(ls))
    assert lc[-1] == 0.0 and ls[0] == 0.0
    # lower tail: G ~ w_0 K Phi(s) when w_0 > 0
    assert lc[2] == pytest.approx(np.log(0.2 * 3) + log_ndtr(-40.0), rel=1e-10)


def test_per_row_weights_shape_checks():
    W = np.array([[0.5, 0.5], [0.1, 0.9]])
    s = np.array([[0.0, 1.0], [0.0, 1.0]])
    out = ost.mixture_log_density_ratio(W, s)
    assert out.shape == (2, 2)
    assert np.allclose(out[1], ost.mixture_log_density_ratio(W[1], s[1]))
    with pytest.raises(ValueError, match="s must have shape"):
        ost.mixture_log_cdf(W, np.zeros((3, 2)))
