"""GaussianMixture: validation, analytic denoiser/velocity against independent oracles."""
import numpy as np
import pytest
from scipy.special import logsumexp

from rass_theory.diffusion import GaussianMixture


def _log_marginal(gm, x, s):
    """log p_s(x) from the component laws directly (independent of the posterior code)."""
    var = (1 - s) ** 2 * gm.sds ** 2 + s ** 2
    d = gm.dim
    sq = ((x[None, :] - (1 - s) * gm.means) ** 2).sum(axis=1)
    return logsumexp(np.log(gm.weights) - 0.5 * d * np.log(2 * np.pi * var) - 0.5 * sq / var)


class TestValidation:
    def test_bad_means(self):
        with pytest.raises(ValueError, match="means"):
            GaussianMixture(np.zeros(3), np.ones(1))

    def test_bad_sds(self):
        with pytest.raises(ValueError, match="sds"):
            GaussianMixture(np.zeros((2, 3)), np.array([0.1, -0.1]))
        with pytest.raises(ValueError, match="sds"):
            GaussianMixture(np.zeros((2, 3)), np.array([0.1]))

    def test_bad_weights(self):
        with pytest.raises(ValueError, match="weights"):
            GaussianMixture(np.zeros((2, 3)), np.ones(2), np.array([0.7, 0.7]))

    def test_bad_x_dim(self):
        gm = GaussianMixture.random(dim=4, n_components=2, seed=0)
        with pytest.raises(ValueError, match="x must have shape"):
            gm.velocity(np.zeros((3, 5)), 0.5)

    def test_velocity_needs_positive_s(self):
        gm = GaussianMixture.random(dim=4, n_components=2, seed=0)
        with pytest.raises(ValueError, match="s must be > 0"):
            gm.velocity(np.zeros((3, 4)), 0.0)

    def test_random_dim_checked(self):
        with pytest.raises(ValueError, match="dim"):
            GaussianMixture.random(dim=0)


class TestRandom:
    def test_ranges_and_weights(self):
        gm = GaussianMixture.random(dim=512, n_components=5, seed=0)
        assert gm.means.shape == (5, 512) and gm.sds.shape == (5,)
        assert np.all(np.abs(gm.means) <= 2) and np.all((gm.sds >= 0.10) & (gm.sds <= 0.25))
        np.testing.assert_allclose(gm.weights, 0.2)
        gm2 = GaussianMixture.random(dim=8, n_components=2, seed=0, weights=[0.9, 0.1])
        np.testing.assert_allclose(gm2.weights, [0.9, 0.1])

    def test_reproducible(self):
        a = GaussianMixture.random(dim=6, n_components=3, seed=7)
        b = GaussianMixture.random(dim=6, n_components=3, seed=7)
        np.testing.assert_array_equal(a.means, b.means)


class TestPosterior:
    @pytest.mark.parametrize("s", [0.05, 0.3, 0.7, 0.99])
    def test_tweedie_oracle(self, s, rng):
        """E[x0|x] = (x + s^2 grad log p_s(x)) / (1 - s), gradient by central differences."""
        gm = GaussianMixture.random(dim=3, n_components=4, seed=1, weights=[0.1, 0.2, 0.3, 0.4])
        x = (1 - s) * gm.means[rng.integers(4)] + s * rng.standard_normal(3)
        h = 1e-5
        grad = np.array([(_log_marginal(gm, x + h * e, s) - _log_marginal(gm, x - h * e, s)) / (2 * h)
                         for e in np.eye(3)])
        expected = (x + s ** 2 * grad) / (1 - s)
        np.testing.assert_allclose(gm.denoise(x[None], s)[0], expected, rtol=1e-6, atol=1e-6)

    def test_single_gaussian_velocity_closed_form(self, rng):
        """One component: x_s = (1-s) m + sigma_s eta, so u = -m + sigma_s'/sigma_s (x - (1-s) m)."""
        m = rng.uniform(-2, 2, 5)
        tau = 0.2
        gm = GaussianMixture(m[None], np.array([tau]))
        x = rng.standard_normal((7, 5))
        s = rng.uniform(0.05, 0.95, 7)
        sig2 = (1 - s) ** 2 * tau ** 2 + s ** 2
        dsig2 = -2 * (1 - s) * tau ** 2 + 2 * s
        expected = -m[None] + (0.5 * dsig2 / sig2)[:, None] * (x - (1 - s)[:, None] * m[None])
        np.testing.assert_allclose(gm.velocity(x, s), expected, rtol=1e-10, atol=1e-12)

    def test_responsibilities_normalised(self, rng):
        gm = GaussianMixture.random(dim=512, n_components=5, seed=0)
        lr = gm.log_responsibilities(rng.standard_normal((4, 512)), 0.5)
        np.testing.assert_allclose(np.exp(lr).sum(axis=1), 1.0)


class TestSampling:
    def test_sample_mean(self, rng):
        gm = GaussianMixture.random(dim=3, n_components=2, seed=2, weights=[0.25, 0.75])
        x = gm.sample(20000, rng)
        truth = gm.weights @ gm.means
        sd = np.sqrt((gm.weights @ (gm.means ** 2)) - truth ** 2 + gm.weights @ gm.sds ** 2)
        assert np.all(np.abs(x.mean(0) - truth) / (sd / np.sqrt(20000)) < 4.5)

    def test_nearest_component(self):
        gm = GaussianMixture.random(dim=16, n_components=5, seed=0)
        np.testing.assert_array_equal(gm.nearest_component(gm.means), np.arange(5))

    def test_perturbed_is_close(self):
        gm = GaussianMixture.random(dim=16, n_components=5, seed=0)
        same = gm.perturbed(0.0)
        np.testing.assert_array_equal(same.means, gm.means)
        other = gm.perturbed(0.05, seed=1)
        assert 0 < np.abs(other.means - gm.means).max() < 0.5
