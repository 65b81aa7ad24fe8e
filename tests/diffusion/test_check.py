"""check_trajectories / check_sampler: input validation, nulls, teeth, the sampler mutants."""
import numpy as np
import pytest
from scipy import stats

from rass_theory import diffusion
from rass_theory.diffusion import (
    GaussianMixture,
    check_sampler,
    check_trajectories,
    plain_kernel,
    plain_sample,
    speculative_sample,
)
from rass_theory.diffusion.residual_tests import (
    cross_correlation_test,
    detectable_correlation,
    detectable_ks,
    lag_correlation_test,
)
from rass_theory.diffusion.sampler_mutants import BUGS, frozen_generator, sampler_mutant, tree_sampler


@pytest.fixture(scope="module")
def gm8():
    return GaussianMixture.random(dim=8, n_components=3, seed=0)


@pytest.fixture(scope="module")
def gm16():
    return GaussianMixture.random(dim=16, n_components=5, seed=0)


@pytest.fixture(scope="module")
def plain_run(gm8):
    return plain_sample(gm8, 200, rng=11, protocol="paper", return_trajectories=True)


class TestValidation:
    def test_bad_input(self, gm8, plain_run):
        kernel = plain_kernel(gm8, protocol="paper")
        X, dm, dep = plain_run.trajectories, plain_run.draft_means, plain_run.depths
        with pytest.raises(ValueError, match="trajectories must have shape"):
            check_trajectories(X[:, :, 0], kernel)
        with pytest.raises(ValueError, match=r"trajectories must hold 29 states"):
            check_trajectories(X[:, 1:], kernel)
        with pytest.raises(ValueError, match="kernel does not match.*kernel.dim = 16"):
            check_trajectories(X, plain_kernel(GaussianMixture.random(dim=16, n_components=2, seed=1)))
        with pytest.raises(ValueError, match="at least 20 trajectories"):
            check_trajectories(X[:5], kernel)
        bad = X.copy()
        bad[7, 12, 3] = np.nan
        with pytest.raises(ValueError, match=r"trajectories must be finite: NaN in row 7 at step 13"):
            check_trajectories(bad, kernel)
        bad[7, 12, 3] = np.inf
        with pytest.raises(ValueError, match=r"infinite value in row 7 at step 13"):
            check_trajectories(bad, kernel)
        with pytest.raises(ValueError, match="draft_means must have the shape"):
            check_trajectories(X, kernel, draft_means=dm[:, 1:])
        bad_dm = dm.copy()
        bad_dm[3, 4, 0] = np.nan
        with pytest.raises(ValueError, match=r"draft_means must be finite: NaN in row 3 at step 5"):
            check_trajectories(X, kernel, draft_means=bad_dm)
        with pytest.raises(ValueError, match="depths must have shape"):
            check_trajectories(X, kernel, depths=dep[:, 1:])
        with pytest.raises(ValueError, match="depths must hold integers"):
            check_trajectories(X, kernel, depths=dep + 0.5)
        neg = dep.copy()
        neg[2, 5] = -1
        with pytest.raises(ValueError, match=r"depths must be >= 0.*depths\[2, 5\]"):
            check_trajectories(X, kernel, depths=neg)
        with pytest.raises(ValueError, match="alpha"):
            check_trajectories(X, kernel, alpha=1.5)
        with pytest.raises(TypeError, match="kernel must be a PlainKernel"):
            check_trajectories(X, gm8)
        with pytest.raises(TypeError, match="trajectories must hold real numbers"):
            check_trajectories(X.astype(str), kernel)

    def test_check_sampler_input(self, gm8):
        kernel = plain_kernel(gm8, protocol="paper")
        with pytest.raises(TypeError, match="sampler must be callable"):
            check_sampler(3, kernel)
        with pytest.raises(ValueError, match="n_trajectories must be >= 20"):
            check_sampler(tree_sampler("dgrs", 2, 2), kernel, n_trajectories=5)

        def shifted_start(kernel, x0, rng):
            traj, dm, dep = tree_sampler("dgrs", 2, 2)(kernel, x0 + 1.0, rng)
            return traj, dm, dep
        with pytest.raises(ValueError, match="start at x0"):
            check_sampler(shifted_start, kernel, n_trajectories=30)
        with pytest.raises(ValueError, match="sampler must return"):
            check_sampler(lambda kernel, x0, rng: (1, 2, 3, 4), kernel, n_trajectories=30)
        with pytest.raises(ValueError, match="bug must be None or one of"):
            tree_sampler(bug="typo")


class TestResult:
    def test_plain_chain_passes_and_reports(self, gm8, plain_run):
        kernel = plain_kernel(gm8, protocol="paper")
        rep = check_trajectories(plain_run.trajectories, kernel, plain_run.draft_means, plain_run.depths, rng=0)
        assert rep.passed and rep.alpha == 1e-3
        S = kernel.n_states
        assert rep.target_calls == 2 * (S - 1) and rep.target_evaluations == 2 * (S - 1) * 200
        names = [t.name for t in rep.tests]
        assert len(names) == len(set(names))
        for prefix in ("norm[step", "projection[velocity]", "projection[increment]", "projection[random 0]",
                       "lag1[", "lag2[", "cross[trajectories]", "final["):
            assert any(n.startswith(prefix) for n in names), prefix
        assert set(rep.detectable) == set(diffusion.check.FAMILIES)
        assert all(0 < t.pvalue <= 1 and t.pvalue <= t.pvalue_adjusted for t in rep.tests)
        assert "PASSED" in str(rep) and rep.failed == ()
        # plain sampling has no draft displacement: the draft direction is undefined and left out
        assert not any("draft" in n for n in names)

    def test_reproducible(self, gm8, plain_run):
        kernel = plain_kernel(gm8, protocol="paper")
        a = check_trajectories(plain_run.trajectories, kernel, rng=4)
        b = check_trajectories(plain_run.trajectories, kernel, rng=4)
        assert [t.pvalue for t in a.tests] == [t.pvalue for t in b.tests]

    def test_torch_trajectories_give_the_numpy_verdict(self, gm8, plain_run):
        torch = pytest.importorskip("torch")
        kernel = plain_kernel(gm8, protocol="paper")
        a = check_trajectories(plain_run.trajectories, kernel, rng=4)
        b = check_trajectories(torch.as_tensor(plain_run.trajectories), kernel, rng=4)
        pa = {t.name: t.pvalue for t in a.tests if not t.name.startswith("final")}
        pb = {t.name: t.pvalue for t in b.tests if not t.name.startswith("final")}
        assert pa.keys() == pb.keys()
        np.testing.assert_allclose(list(pa.values()), list(pb.values()), rtol=1e-8)

    def test_digits_flow_tensors_stay_on_their_device(self):
        """A torch model and torch trajectories: the check calls the model on the tensors' device
        and dtype (float32 here) and passes the model's own plain chain."""
        torch = pytest.importorskip("torch")
        from rass_theory import models

        m = models.digits_flow(device="cpu")
        run = plain_sample(m, 40, rng=3, protocol="paper", backend="torch", return_trajectories=True)
        kernel = plain_kernel(m, protocol="paper")
        seen = []
        fn = m.fn
        m.fn = lambda x, s: (seen.append((x.dtype, x.device.type)), fn(x, s))[1]
        try:
            rep = check_trajectories(torch.as_tensor(run.trajectories, dtype=torch.float32), kernel, run.draft_means,
                                     run.depths, rng=0)
        finally:
            m.fn = fn
        assert rep.passed, rep.summary()
        assert seen and set(seen) == {(torch.float32, "cpu")}
        assert rep.target_calls == 2 * (kernel.n_states - 1)

    def test_inflated_noise_is_rejected(self, gm8, plain_run):
        """Every committed step with 10% too much noise (``||r||^2 ~ 1.21 chi2(8)``, each projection
        N(0, 1.21)): a scale bug is seen by the norm tests and by the pooled projection tests."""
        kernel = plain_kernel(gm8, protocol="paper")
        X = plain_run.trajectories.copy()
        for t in range(1, X.shape[1]):
            m = kernel.mean(kernel.first_stochastic + t - 1, plain_run.trajectories[:, t - 1])
            X[:, t] = m + 1.1 * (plain_run.trajectories[:, t] - m)
        rep = check_trajectories(X, kernel, depths=plain_run.depths, rng=0)
        assert not rep.passed
        assert {"norm", "projection"} <= {t.family for t in rep.failed}
        assert "FAILED" in rep.summary()


class TestResidualTests:
    def test_lag_and_cross_nulls_are_calibrated(self, rng):
        """Under iid N(0, 1) the p-values are uniform: KS over 300 replicates (p > 1e-3)."""
        p_lag, p_cross = [], []
        for _ in range(300):
            r = rng.standard_normal((40, 6, 3))
            p_lag.append(lag_correlation_test(r[:, :, 0], 1)[1])
            p_cross.append(cross_correlation_test(r)[1])
        assert stats.kstest(p_lag, "uniform").pvalue > 1e-3
        assert stats.kstest(p_cross, "uniform").pvalue > 1e-3

    def test_lag_sees_correlation_at_its_detectable_size(self, rng):
        """A lag-1 correlation equal to the stated detectable one is found in >= 80% of 200 runs
        minus 3 standard errors of the rejection rate."""
        n, T, level = 200, 10, 0.01
        rho = detectable_correlation(n * (T - 1), level)
        hits = 0
        for _ in range(200):
            e = rng.standard_normal((n, T + 1))
            p = np.sqrt(1 - rho) * e[:, 1:] + np.sqrt(rho) * e[:, :-1]     # corr(p_t, p_{t+1}) = rho
            hits += lag_correlation_test(p, 1)[1] <= level
        assert hits / 200 >= 0.8 - 3 * np.sqrt(0.16 / 200)

    def test_cross_is_exact_scale_free_and_sees_its_detectable_correlation(self, rng):
        """F(dT, dT(n-1)) is exact: scaling the residuals leaves the p-value unchanged; a shared
        component of correlation equal to the stated detectable one is found in >= 80% of 200 runs
        minus 3 standard errors."""
        from rass_theory.diffusion.residual_tests import detectable_cross_correlation

        r = rng.standard_normal((30, 5, 4))
        assert cross_correlation_test(r)[1] == pytest.approx(cross_correlation_test(3.0 * r)[1], rel=1e-12)
        n, T, d, level = 50, 6, 4, 0.01
        rho = detectable_cross_correlation(n, T, d, level)
        hits = 0
        for _ in range(200):
            shared = rng.standard_normal((1, T, d))
            r = np.sqrt(1 - rho) * rng.standard_normal((n, T, d)) + np.sqrt(rho) * shared
            hits += cross_correlation_test(r)[1] <= level
        assert hits / 200 >= 0.8 - 3 * np.sqrt(0.16 / 200)

    def test_detectable_ks_shrinks_with_n(self):
        assert detectable_ks(100, 1e-3) > detectable_ks(10_000, 1e-3) > detectable_ks(100_000, 1e-3) > 0


class TestSamplers:
    def test_exact_tree_sampler_passes(self, gm8):
        kernel = plain_kernel(gm8, protocol="paper")
        rep = check_sampler(tree_sampler("dgrs", K=3, L=3), kernel, n_trajectories=400, rng=1)
        assert rep.passed, rep.summary()
        assert any(t.name == "projection[draft, depth 1]" for t in rep.tests)
        assert rep.extra["sampler_wall_time_s"] > 0

    def test_project_sampler_passes(self, gm8):
        run = speculative_sample(gm8, "dgrs", K=3, L=3, n_samples=400, rng=8, protocol="paper",
                                 return_trajectories=True)
        rep = check_trajectories(run.trajectories, plain_kernel(gm8, protocol="paper"), run.draft_means, run.depths,
                                 rng=2)
        assert rep.passed, rep.summary()

    @pytest.mark.parametrize("bug", ["depth_sigma", "peeking_prefetch", "stale_leaf_velocity"])
    def test_strong_mutants_rejected_quickly(self, gm8, bug):
        """d = 8, 400 trajectories already reject these three (measured p < 1e-20)."""
        kernel = plain_kernel(gm8, protocol="paper")
        rep = check_sampler(sampler_mutant(bug, "dgrs", K=3, L=3), kernel, n_trajectories=400, rng=1)
        assert not rep.passed

    def test_frozen_generator_wrapper_repeats_draws(self, gm8, rng):
        from rass_theory.verifiers import get_verifier

        v = frozen_generator(get_verifier("rass", 2))
        children = rng.standard_normal((5, 2, 8))
        mu_d, mu_t = np.zeros((5, 8)), np.full((5, 8), 0.3)
        a = v(children, mu_d, mu_t, 1.0, rng)
        b = v(children, mu_d, mu_t, 1.0, rng)
        np.testing.assert_array_equal(a.states, b.states)


@pytest.mark.slow
class TestSamplerMutantsAtDefaults:
    """Issue 20's catalogue at the defaults: d = 16, 2,000 trajectories, alpha = 1e-3, RASS K = 4, L = 3,
    paper protocol (its sigma changes with the step, which the depth_sigma bug needs).  Measured
    (bench/results/sampler_mutants.md): every mutant's smallest p-value is below 1e-20."""

    @pytest.mark.parametrize("bug", sorted(BUGS))
    def test_rejected(self, gm16, bug):
        kernel = plain_kernel(gm16, protocol="paper")
        rep = check_sampler(sampler_mutant(bug), kernel, n_trajectories=2000, rng=0)
        assert not rep.passed

    def test_exact_passes(self, gm16):
        kernel = plain_kernel(gm16, protocol="paper")
        assert check_sampler(tree_sampler(), kernel, n_trajectories=2000, rng=0).passed


@pytest.mark.slow
class TestProjectSamplersStepByStep:
    """Whole-run exactness of the project's samplers, step by step (alongside the final-sample tests
    of test_speculative.py / test_prefetch.py): d = 16, 2,000 trajectories, alpha = 1e-3."""

    @pytest.mark.parametrize("expansion,prefetch,leaves", [("lazy", "nearest", False), ("full", "nearest", False),
                                                           ("lazy", "parent", True), ("full", "none", True)])
    def test_numpy(self, gm16, expansion, prefetch, leaves):
        run = speculative_sample(gm16, "rass", K=4, L=3, n_samples=2000, rng=21, protocol="paper",
                                 expansion=expansion, prefetch=prefetch, evaluate_leaves=leaves,
                                 return_trajectories=True)
        rep = check_trajectories(run.trajectories, plain_kernel(gm16, protocol="paper"), run.draft_means,
                                 run.depths, rng=3)
        assert rep.passed, rep.summary()

    @pytest.mark.parametrize("verifier", ["dgrs", "optimal_list"])
    def test_torch(self, gm16, verifier):
        pytest.importorskip("torch")
        run = speculative_sample(gm16, verifier, K=4, L=3, n_samples=2000, rng=22, protocol="paper",
                                 backend="torch", dtype=None, return_trajectories=True)
        rep = check_trajectories(run.trajectories, plain_kernel(gm16, protocol="paper"), run.draft_means,
                                 run.depths, rng=4)
        assert rep.passed, rep.summary()

    def test_digits_flow_torch(self):
        torch = pytest.importorskip("torch")
        from rass_theory import models

        m = models.digits_flow(device="cpu", dtype=torch.float64)
        run = speculative_sample(m, "rass", K=4, L=3, n_samples=300, rng=5, protocol="paper", backend="torch",
                                 return_trajectories=True)
        rep = check_trajectories(run.trajectories, plain_kernel(m, protocol="paper"), run.draft_means, run.depths,
                                 rng=6)
        assert rep.passed, rep.summary()
