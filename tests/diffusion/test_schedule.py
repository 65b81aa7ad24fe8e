"""ChurnSchedule: validation, Euler reduction, deterministic tail, convergence of the plain chain."""
import numpy as np
import pytest

from rass_theory.diffusion import ChurnSchedule, GaussianMixture, plain_sample


class TestValidation:
    @pytest.mark.parametrize("churn", [0.0, -0.1, float("inf"), float("nan")])
    def test_churn_range(self, churn):
        with pytest.raises(ValueError, match="churn"):
            ChurnSchedule(30, churn)

    def test_churn_type(self):
        with pytest.raises(TypeError, match="churn"):
            ChurnSchedule(30, True)

    def test_no_stochastic_step(self):
        with pytest.raises(ValueError, match="no stochastic step"):
            ChurnSchedule(30, 2.0)

    @pytest.mark.parametrize("n", [0, -3])
    def test_n_steps(self, n):
        with pytest.raises(ValueError, match="n_steps"):
            ChurnSchedule(n, 0.06)

    def test_kind(self):
        with pytest.raises(ValueError, match="kind"):
            ChurnSchedule(30, 0.06, kind="ode")


class TestCoefficients:
    @pytest.mark.parametrize("kind", ["sde", "ddim"])
    def test_paper_setting(self, kind):
        sch = ChurnSchedule(30, 0.06, kind=kind)
        assert sch.n_stochastic == 28 and sch.n_deterministic == 2
        np.testing.assert_array_equal(sch.sigma[:28], 0.06)
        np.testing.assert_array_equal(sch.sigma[28:], 0.0)
        # deterministic steps are exact Euler steps x + (s_{k+1} - s_k) u
        np.testing.assert_allclose(sch.a[28:], 1.0)
        np.testing.assert_allclose(sch.b[28:], np.diff(sch.s)[28:])

    def test_sde_formula(self):
        sch = ChurnSchedule(10, 0.05)
        s, s1, sig = sch.s[:-1], sch.s[1:], sch.sigma
        np.testing.assert_allclose(sch.a, 1 - sig ** 2 / (2 * s))
        np.testing.assert_allclose(sch.b, (s1 - s) - sig ** 2 * (1 - s) / (2 * s))

    def test_ddim_reproduces_state_at_zero_noise_velocity(self):
        """ddim: with u such that x0_hat = xi_hat = x the mean is (1 - s' + r) x."""
        sch = ChurnSchedule(10, 0.05, kind="ddim")
        r = np.sqrt(np.maximum(sch.s[1:] ** 2 - sch.sigma ** 2, 0))
        np.testing.assert_allclose(sch.a, 1 - sch.s[1:] + r)


class TestPlainChain:
    def test_converges_to_gaussian_target(self, rng):
        """One Gaussian N(1, 0.3^2 I): a fine grid with small churn reaches its sd (SE-based).

        At (30 steps, churn 0.06) the chain's sd is ~5% low (the discretised chain is not the
        mixture); at 400 steps and churn 0.01 the bias is below 0.5%, hence the allowance.
        """
        gm = GaussianMixture(np.ones((1, 4)), np.array([0.3]))
        n = 4000
        x = plain_sample(gm, n, n_steps=400, churn=0.01, rng=rng)
        ratio = x.std(axis=0, ddof=1).mean() / 0.3
        se = 1 / np.sqrt(2 * n * 4)
        assert abs(ratio - 1) < 4.5 * se + 0.005
        assert np.all(np.abs(x.mean(0) - 1) < 4.5 * 0.3 / np.sqrt(n))

    def test_reproducible_and_shapes(self):
        gm = GaussianMixture.random(dim=8, n_components=3, seed=0)
        a = plain_sample(gm, 10, rng=3)
        b = plain_sample(gm, 10, rng=3)
        assert a.shape == (10, 8)
        np.testing.assert_array_equal(a, b)
        assert plain_sample(gm, 10, rng=3, chunk_size=3).shape == (10, 8)

    def test_bad_target(self):
        with pytest.raises(TypeError, match="target"):
            plain_sample(object(), 10)

    def test_bad_n_samples(self):
        gm = GaussianMixture.random(dim=8, n_components=3, seed=0)
        with pytest.raises(ValueError, match="n_samples"):
            plain_sample(gm, 0)
