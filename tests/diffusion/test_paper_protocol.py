"""protocol='paper': grid, noise law, start step, the papers' mixture, and exactness of runs."""
import numpy as np
import pytest

from rass_theory.diffusion import (
    ChurnSchedule,
    GaussianMixture,
    plain_sample,
    speculative_sample,
)
from rass_theory.diffusion.exactness import compare_to_plain


class TestSchedule:
    def test_grid_and_noise_law(self):
        eps = 0.06
        sch = ChurnSchedule(30, eps, protocol="paper")
        np.testing.assert_allclose(sch.s[:30], np.linspace(1000, 1, 30) / 1000)
        assert sch.s[30] == 0.0
        h = sch.s[:-1] - sch.s[1:]
        inner = np.arange(1, 29)
        np.testing.assert_allclose(sch.sigma[inner] ** 2, eps ** 2 * 2 * sch.s[inner] / (1 - sch.s[inner]) * h[inner])
        assert sch.sigma[0] == 0 and sch.sigma[29] == 0
        assert sch.n_stochastic == 28 and sch.first_stochastic == 1 and sch.stop == 29

    def test_kernel_is_reverse_sde_euler_maruyama(self):
        sch = ChurnSchedule(30, 0.06, protocol="paper")
        s, s1, sig = sch.s[:-1], sch.s[1:], sch.sigma
        k = np.arange(1, 29)
        np.testing.assert_allclose(sch.a[k], 1 - sig[k] ** 2 / (2 * s[k]))
        np.testing.assert_allclose(sch.b[k], (s1[k] - s[k]) - sig[k] ** 2 * (1 - s[k]) / (2 * s[k]))
        for j in (0, 29):                                   # deterministic: plain Euler steps
            assert sch.a[j] == 1.0 and sch.b[j] == pytest.approx(s1[j] - s[j])

    def test_eps_scales_the_diffusion_coefficient(self):
        a, b = ChurnSchedule(30, 0.06, protocol="paper"), ChurnSchedule(30, 0.12, protocol="paper")
        np.testing.assert_allclose(b.sigma, 2 * a.sigma)

    def test_too_few_steps(self):
        with pytest.raises(ValueError, match="n_steps"):
            ChurnSchedule(2, 0.06, protocol="paper")


class TestPlainChainLaw:
    """One isotropic component: the velocity is affine, the chain Gaussian, its moments exact."""

    def test_moments_match_the_exact_recursion(self):
        gm = GaussianMixture(np.array([[0.7, -1.2, 0.3]]), np.array([0.2]))
        sch = ChurnSchedule(30, 0.06, protocol="paper")
        m, v = np.zeros(3), 1.0                             # N(0, I) at the first stochastic step
        for k in range(sch.first_stochastic, sch.n_steps):
            u0 = gm.velocity(np.zeros((1, 3)), sch.s[k])[0]
            c = gm.velocity(np.eye(3)[:1], sch.s[k])[0, 0] - u0[0]      # u(x) = u0 + c x
            alpha = sch.a[k] + sch.b[k] * c
            m = alpha * m + sch.b[k] * u0
            v = alpha ** 2 * v + sch.sigma[k] ** 2
        x = plain_sample(gm, 40000, 30, 0.06, rng=0, protocol="paper")
        se_m = np.sqrt(v / 40000)
        assert np.all(np.abs(x.mean(0) - m) < 4.5 * se_m)
        se_v = v * np.sqrt(2 / 40000)
        assert np.all(np.abs(x.var(0) - v) < 4.5 * se_v)


class TestPapersMixture:
    def test_draw_order(self):
        """Means U(-2, 2)^(C x d) first, then sds U(0.10, 0.25), from default_rng(seed)."""
        gm = GaussianMixture.random(dim=512, n_components=5, seed=20260714)
        rng = np.random.default_rng(20260714)
        np.testing.assert_array_equal(gm.means, rng.uniform(-2, 2, size=(5, 512)))
        np.testing.assert_array_equal(gm.sds, rng.uniform(0.10, 0.25, size=5))
        np.testing.assert_array_equal(gm.weights, np.full(5, 0.2))


class TestRuns:
    def test_first_round_starts_at_step_one(self):
        gm = GaussianMixture.random(dim=8, n_components=3, seed=0)
        run = speculative_sample(gm, "dgrs", K=2, L=3, n_samples=10, rng=0, protocol="paper")
        assert run.first_step == 1 and run.n_standard_steps == 28
        assert run.rounds.start_step.min() == 1 and (run.rounds.start_step + run.rounds.committed).max() == 29
        assert np.all(np.bincount(run.rounds.trajectory, weights=run.rounds.committed) == 28)

    @pytest.mark.parametrize("prefetch", ["nearest", "parent", "none"])
    def test_exact_each_prefetch(self, prefetch):
        gm = GaussianMixture.random(dim=16, n_components=5, seed=0)
        run = speculative_sample(gm, "dgrs", K=2, L=3, n_samples=1500, rng=5, protocol="paper", prefetch=prefetch)
        ref = plain_sample(gm, 1500, rng=6, protocol="paper")
        assert compare_to_plain(run.samples, ref, gm.means, alpha=1e-3, n_permutations=199, rng=7,
                                detectable=False).passed
