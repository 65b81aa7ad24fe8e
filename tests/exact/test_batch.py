"""Tests for rass_theory.exact.batch: per-row laws and residual samplers used by the verifiers."""
import numpy as np
import pytest
from scipy import stats

from rass_theory.exact import batch
from rass_theory.exact import normal as nm
from rass_theory.exact import order_stats as ost
from rass_theory.exact.selected import residual_law, selected_law


def _rows(rng, n, K):
    return rng.dirichlet(np.ones(K), size=n), rng.uniform(0.05, 3.0, n)


class TestValidation:
    @pytest.mark.parametrize(
        "weights, delta, s, match",
        [
            ([0.5, 0.6], [1.0], [0.0], "weights must sum to 1"),
            ([[0.5, 0.5], [0.2, 0.9]], [1.0, 1.0], [0.0, 0.0], "weights must sum to 1"),
            ([1.5, -0.5], [1.0], [0.0], "weights must be non-negative"),
            ([0.5, 0.5], [np.nan], [0.0], "delta must not contain NaN"),
            ([0.5, 0.5], [-1.0], [0.0], "delta must be >= 0"),
            ([0.5, 0.5], [1.0, 2.0], [0.0], "delta must have length n = 1"),
            ([[0.5, 0.5]] * 3, [1.0, 2.0], [0.0, 1.0], "weights must have n = 2 rows"),
            ([0.5, 0.5], [1.0], [np.nan], "s must not contain NaN"),
        ],
    )
    def test_bad_input(self, weights, delta, s, match):
        with pytest.raises(ValueError, match=match):
            batch.selected_logpdf(weights, delta, s)
        with pytest.raises(ValueError, match=match):
            batch.selected_cdf(weights, delta, s)

    def test_bad_uniforms(self):
        with pytest.raises(ValueError, match="u must lie in"):
            batch.sample_residual([0.5, 0.5], [1.0], [1.5])
        with pytest.raises(ValueError, match="u must not contain NaN"):
            batch.sample_residual([0.5, 0.5], [1.0], [np.nan])
        with pytest.raises(ValueError, match="delta must be > 0"):
            batch.sample_residual_rejection([0.5, 0.5], [0.0], 0)
        with pytest.raises(TypeError, match="callables"):
            batch.sample_residual_generic(None, None, [1.0], [0.5])


class TestLawsRowByRow:
    def test_selected_and_target_match_scalar_objects(self, rng):
        W, d = _rows(rng, 30, 5)
        s = rng.normal(size=30) * 3
        lp = batch.selected_logpdf(W, d, s)
        cdf = batch.selected_cdf(W, d, s)
        for i in range(30):
            law = selected_law(W[i], d[i])
            assert lp[i] == pytest.approx(float(law.logpdf(s[i])), abs=1e-13)
            assert cdf[i] == pytest.approx(float(law.cdf(s[i])), rel=1e-13)
        assert np.allclose(batch.target_logpdf(d, s), nm.log_phi(s - d))
        # one shared weight vector
        assert np.allclose(batch.selected_logpdf(W[0], d, s), [selected_law(W[0], 1).logpdf(x) for x in s])

    def test_residual_intervals_match_scalar(self, rng):
        W, d = _rows(rng, 20, 4)
        ri = batch.residual_intervals(W, d)
        for i in range(20):
            res = residual_law(W[i], d[i])
            assert ri.total[i] == pytest.approx(res.mass, rel=1e-12)
            c = ri.crossings[i]
            assert np.allclose(c[np.isfinite(c)], res.crossings, atol=1e-12)

    def test_sample_residual_matches_scalar_ppf(self, rng):
        W, d = _rows(rng, 15, 3)
        u = rng.random(15)
        s = batch.sample_residual(W, d, u)
        ref = np.array([residual_law(W[i], d[i]).ppf(u[i]) for i in range(15)])
        assert np.allclose(s, ref, atol=1e-10)
        # the shared-weights path gives the same as explicit per-row copies
        s1 = batch.sample_residual(W[0], d, u)
        s2 = batch.sample_residual(np.tile(W[0], (15, 1)), d, u)
        assert np.allclose(s1, s2, atol=1e-12)

    def test_generic_equals_rass_wrapper(self, rng):
        W, d = _rows(rng, 25, 4)
        u = rng.random(25)

        def log_g(x):
            return nm.log_phi(x) + ost.mixture_log_density_ratio(W, x)

        def cdf_g(x):
            return np.exp(ost.mixture_log_cdf(W, x))

        s_gen = batch.sample_residual_generic(log_g, cdf_g, d, u)
        s_rass = batch.sample_residual(W, d, u)
        assert np.allclose(s_gen, s_rass, atol=1e-9)

    def test_residual_cdf_of_draw_is_u(self, rng):
        w = np.array([0.1, 0.2, 0.3, 0.4])
        d = np.full(200, 0.9)
        u = rng.random(200)
        s = batch.sample_residual(w, d, u)
        assert np.allclose(residual_law(w, 0.9).cdf(s), u, atol=1e-12)
        assert np.all(np.diff(s[np.argsort(u)]) >= 0)  # monotone in u


class TestSamplersAgree:
    def test_inverse_and_rejection_two_sample(self):
        # rows with different delta and weights: compare the two samplers row-set-wise
        rng = np.random.default_rng(5)
        n = 8_000
        W = np.tile([[0.0, 0.1, 0.2, 0.7], [0.4, 0.3, 0.2, 0.1]], (n // 2, 1))
        d = np.tile([1.2, 0.5], n // 2)
        s_inv = batch.sample_residual(W, d, rng.random(n))
        s_rej = batch.sample_residual_rejection(W, d, rng)
        for k in range(2):
            # two-sample KS at n = 4000 each, alpha = 1e-3
            assert stats.ks_2samp(s_inv[k::2], s_rej[k::2]).pvalue > 1e-3
            assert stats.kstest(s_rej[k::2], residual_law(W[k], d[k]).cdf).pvalue > 1e-3


class TestDegenerate:
    def test_delta_zero_uniform_weights_returns_target_draw(self):
        u = np.array([0.1, 0.5, 0.9])
        s = batch.sample_residual([0.25] * 4, np.zeros(3), u)
        assert np.allclose(s, nm.quantile_from_tails(u, 1 - u))
        ri = batch.residual_intervals([0.25] * 4, np.zeros(3))
        assert np.all(ri.total == 0) and np.all(ri.n_crossings == 0)

    def test_tiny_and_huge_delta_finite(self):
        d = np.array([0.0, 1e-12, 1e-8, 1.0, 40.0])
        s = batch.sample_residual([0.3, 0.7], d, np.full(5, 0.5))
        assert np.all(np.isfinite(s))
        assert s[-1] == pytest.approx(40.0, abs=1e-6)  # at delta = 40 the residual is f


class TestCrossingGrid:
    """The default grid finds every crossing a twenty times finer grid finds."""

    @pytest.mark.parametrize("K", [2, 5, 16])
    def test_default_spacing_against_finer_grid(self, K):
        rng = np.random.default_rng(100 + K)
        W = np.concatenate([rng.dirichlet(np.full(K, a), size=20) for a in (0.1, 1.0, 10.0)])
        d = np.exp(rng.uniform(np.log(1e-3), np.log(20), W.shape[0]))
        coarse = batch.residual_intervals(W, d)
        fine = batch.residual_intervals(W, d, spacing=batch.grid_spacing(K) / 20)
        assert np.array_equal(coarse.n_crossings, fine.n_crossings)
        assert np.allclose(coarse.total, fine.total, rtol=1e-12, atol=1e-15)

    def test_pair_inside_one_cell_is_found(self):
        # h(s) = (s - 0.3)^2 - 1e-6 near 0.3: two crossings 2e-3 apart, grid spacing 0.05
        delta = np.array([0.8])

        def log_ratio(x):
            return 0.8 * x - 0.32 - ((x - 0.3) ** 2 - 1e-6)

        ri = batch.residual_intervals_generic(log_ratio, lambda x: np.zeros_like(x), delta)
        c = ri.crossings[0]
        assert ri.n_crossings[0] == 2
        assert np.allclose(c, [0.299, 0.301], atol=1e-12)
        assert list(ri.positive[0]) == [True, False, True]
