"""Tests for rass_theory.exact.selected: the selected law g_w and the residual law."""
import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad
from scipy.special import ndtr

from rass_theory.exact import normal as nm
from rass_theory.exact.selected import residual_law, selected_law


class TestSelectedLawValidation:
    @pytest.mark.parametrize(
        "weights, delta, match",
        [
            ([0.5, 0.6], 1.0, "weights must sum to 1"),
            ([1.2, -0.2], 1.0, "weights must be non-negative"),
            ([np.nan, 1.0], 1.0, "weights must be finite"),
            ([[0.5, 0.5]], 1.0, "weights must be one-dimensional"),
            ([0.5, 0.5], np.nan, "delta must be finite"),
            ([0.5, 0.5], -1.0, "delta must be >= 0"),
        ],
    )
    def test_bad_input(self, weights, delta, match):
        with pytest.raises(ValueError, match=match):
            selected_law(weights, delta)
        with pytest.raises(ValueError, match=match):
            residual_law(weights, delta)

    def test_bad_points(self):
        law = selected_law([0.5, 0.5], 1.0)
        with pytest.raises(ValueError, match="s must not contain NaN"):
            law.pdf(np.nan)
        with pytest.raises(ValueError, match="q must lie in"):
            law.ppf(1.5)
        with pytest.raises(ValueError, match="method must be"):
            residual_law([0.5, 0.5], 1.0).rvs(3, 0, method="nope")


class TestSelectedLaw:
    @pytest.mark.parametrize("K", [1, 2, 4, 9])
    def test_pdf_integrates_to_one_and_cdf_is_its_integral(self, K, rng):
        law = selected_law(rng.dirichlet(np.ones(K)), 0.7)
        assert quad(law.pdf, -np.inf, np.inf, epsabs=1e-13)[0] == pytest.approx(1.0, abs=1e-10)
        for x in (-1.3, 0.2, 2.1):
            assert law.cdf(x) == pytest.approx(quad(law.pdf, -np.inf, x, epsabs=1e-14)[0], abs=1e-11)
            assert law.cdf(x) + law.sf(x) == pytest.approx(1.0, abs=2e-15)

    def test_K1_and_uniform_weights_give_phi(self):
        s = np.linspace(-12, 12, 25)
        for w in ([1.0], [1 / 3] * 3, [0.125] * 8):
            law = selected_law(w, 0.4)
            assert np.allclose(law.logpdf(s), nm.log_phi(s), rtol=0, atol=1e-13)
            assert np.allclose(law.cdf(s), ndtr(s), rtol=1e-13, atol=0)
            assert np.allclose(law.sf(s), ndtr(-s), rtol=1e-13, atol=0)

    def test_top_rank_is_maximum(self):
        K = 5
        law = selected_law(np.eye(K)[K - 1], 1.0)
        s = np.linspace(-4, 12, 9)
        assert np.allclose(law.cdf(s), ndtr(s) ** K, rtol=1e-13)
        assert np.allclose(law.sf(s), -np.expm1(K * np.log1p(-ndtr(-s))), rtol=1e-12)

    @pytest.mark.parametrize("K", [1, 3, 64])
    def test_ppf_inverts_cdf_in_both_tails(self, K, rng):
        law = selected_law(rng.dirichlet(np.ones(K)), 1.0)
        q = np.array([1e-250, 1e-12, 0.1, 0.5, 0.9, 1 - 1e-12])
        x = law.ppf(q)
        assert np.allclose(law.cdf(x[:4]), q[:4], rtol=1e-12, atol=0)
        assert np.allclose(law.sf(x[3:]), 1 - q[3:], rtol=1e-10, atol=0)
        assert law.ppf(0.0) == -np.inf and law.ppf(1.0) == np.inf

    def test_rvs_matches_cdf_ks(self):
        law = selected_law([0.1, 0.2, 0.0, 0.7], 1.0)
        draws = law.rvs(20_000, rng=np.random.default_rng(11))
        assert stats.kstest(draws, law.cdf).pvalue > 1e-3
        assert law.rvs(rng=1) == law.rvs(rng=1)  # reproducible scalar draw

    def test_rvs_upper_tail_keeps_digits(self):
        # top of K = 500 normals: s around 3, where Phi(s) is within 2e-3 of 1
        law = selected_law(np.eye(500)[-1], 1.0)
        draws = law.rvs(5_000, rng=np.random.default_rng(12))
        assert stats.kstest(draws, law.cdf).pvalue > 1e-3


class TestResidualLaw:
    def test_ppf_ends_and_empty_draws(self):
        """ppf(1) is the support's upper end, +inf (it was the engine's window top, 12.7 at K = 2);
        a residual with no mass (delta = 0) is f itself, ppf(0) = -inf (it was -37); rvs(0) is
        empty (it raised on a zero-size reduction)."""
        res = residual_law([0.5, 0.5], 1.0)
        lo, mid, hi = res.ppf(np.array([0.0, 0.5, 1.0]))
        assert lo == pytest.approx(res.crossings[0]) and hi == np.inf and res.cdf(np.array([mid]))[0] == pytest.approx(0.5)
        assert res.rvs(0, 0).shape == (0,) and res.rvs((2, 0), 0).shape == (2, 0)
        flat = residual_law([0.5, 0.5], 0.0)
        assert flat.mass == 0.0
        assert list(flat.ppf(np.array([0.0, 1.0]))) == [-np.inf, np.inf]
        assert flat.ppf(np.array([0.3]))[0] == pytest.approx(stats.norm.ppf(0.3), abs=1e-15)

    @pytest.mark.parametrize("K, delta", [(1, 0.3), (2, 1.0), (4, 0.1), (6, 2.5), (16, 1.0)])
    def test_mass_equals_quadrature(self, K, delta, rng):
        w = rng.dirichlet(np.ones(K))
        law = selected_law(w, delta)
        res = residual_law(w, delta)
        pts = [-np.inf, *res.crossings, np.inf]
        quad_mass = 0.0
        for a, b in zip(pts[:-1], pts[1:]):
            quad_mass += quad(lambda x: max(np.exp(nm.log_phi(x - delta)) - law.pdf(x), 0.0), a, b,
                              epsabs=1e-15, epsrel=1e-13, limit=200)[0]
        assert res.mass == pytest.approx(quad_mass, abs=1e-12)
        # the crossings are crossings
        if res.crossings.size:
            assert np.allclose(law.logpdf(res.crossings), nm.log_phi(res.crossings - delta), atol=1e-12)

    def test_pdf_cdf_consistency(self, rng):
        w = rng.dirichlet(np.ones(5))
        res = residual_law(w, 0.8)
        pts = [-np.inf, *res.crossings, np.inf]
        total = sum(quad(res.pdf, a, b, limit=200)[0] for a, b in zip(pts[:-1], pts[1:]))
        assert total == pytest.approx(1.0, abs=1e-9)
        for x in (-1.0, 0.5, 2.0):
            ref = quad(res.pdf, -np.inf, x, limit=200)[0]
            assert res.cdf(x) == pytest.approx(ref, abs=1e-9)
        q = np.array([1e-9, 0.2, 0.5, 0.8, 1 - 1e-9])
        assert np.allclose(res.cdf(res.ppf(q)), q, atol=1e-12)

    @pytest.mark.parametrize("method", ["inverse", "rejection"])
    def test_rvs_matches_cdf_ks(self, method):
        res = residual_law([0.05, 0.15, 0.3, 0.5], 0.6)
        draws = res.rvs(20_000, rng=np.random.default_rng(21), method=method)
        # KS at n = 2e4, alpha = 1e-3: a CDF error above ~0.018 is detected with power > 0.99
        assert stats.kstest(draws, res.cdf).pvalue > 1e-3

    @pytest.mark.slow
    @pytest.mark.parametrize("method", ["inverse", "rejection"])
    @pytest.mark.parametrize("K, delta", [(2, 0.2), (8, 1.5), (32, 3.0)])
    def test_rvs_matches_cdf_ks_large(self, method, K, delta):
        w = np.random.default_rng(K).dirichlet(np.ones(K))
        res = residual_law(w, delta)
        draws = res.rvs(100_000, rng=np.random.default_rng(22), method=method)
        # n = 1e5, alpha = 1e-3: detects a CDF error above ~0.0083 with power > 0.99
        assert stats.kstest(draws, res.cdf).pvalue > 1e-3

    def test_zero_mass_convention(self):
        res = residual_law([0.25] * 4, 0.0)
        assert res.mass == 0.0 and res.crossings.size == 0
        s = np.linspace(-3, 3, 7)
        assert np.allclose(res.pdf(s), np.exp(nm.log_phi(s))) and np.allclose(res.cdf(s), ndtr(s))
        assert np.all(np.isfinite(res.rvs(10, rng=0)))

    def test_delta_zero_nonuniform_weights(self):
        res = residual_law([0.7, 0.3], 0.0)
        assert 0 < res.mass < 1 and np.all(np.isfinite(res.rvs(100, rng=0)))
