"""diffusion.plain_kernel: one kernel for both samplers; return_trajectories on every sampler path."""
import numpy as np
import pytest

from rass_theory import diffusion
from rass_theory.diffusion import ChurnSchedule, GaussianMixture, plain_kernel, plain_sample, speculative_sample


@pytest.fixture(scope="module")
def gm8():
    return GaussianMixture.random(dim=8, n_components=3, seed=0)


class TestPlainKernel:
    def test_validation(self, gm8):
        with pytest.raises(TypeError, match="target"):
            plain_kernel(object())
        with pytest.raises(ValueError, match="protocol"):
            plain_kernel(gm8, protocol="papers")
        with pytest.raises(ValueError, match="churn"):
            plain_kernel(gm8, churn=-1.0)

    @pytest.mark.parametrize("protocol", ["default", "paper"])
    def test_matches_the_schedule(self, gm8, protocol, rng):
        kernel = plain_kernel(gm8, 30, 0.06, protocol=protocol)
        sch = ChurnSchedule(30, 0.06, protocol=protocol)
        assert (kernel.first_stochastic, kernel.stop, kernel.dim) == (sch.first_stochastic, sch.stop, 8)
        assert kernel.n_states == sch.stop - sch.first_stochastic + 1
        x = rng.standard_normal((5, 8))
        for k in (sch.first_stochastic, sch.stop - 1):
            u = gm8.velocity(x, sch.s[k])
            np.testing.assert_array_equal(kernel.mean(k, x), sch.mean(k, x, u))
            assert kernel.std(k) == sch.sigma[k]
        ks = np.array([sch.first_stochastic, 3, 7, 10, sch.stop - 1])
        u = gm8.velocity(x, sch.s[ks])
        np.testing.assert_allclose(kernel.mean(ks, x), sch.mean(ks, x, u), rtol=0, atol=1e-15)
        np.testing.assert_array_equal(kernel.std(ks), sch.sigma[ks])

    def test_counts_its_calls(self, gm8, rng):
        kernel = plain_kernel(gm8)
        kernel.mean(0, rng.standard_normal((7, 8)))
        kernel.velocity(np.array([0, 1]), rng.standard_normal((2, 8)))
        assert (kernel.target_calls, kernel.target_evaluations) == (2, 9)

    def test_torch_states_follow_their_type(self, gm8, rng):
        torch = pytest.importorskip("torch")
        kernel = plain_kernel(gm8, protocol="paper")
        x = rng.standard_normal((4, 8))
        out = kernel.mean(np.array([1, 2, 3, 4]), torch.as_tensor(x))
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
        np.testing.assert_allclose(out.numpy(), kernel.mean(np.array([1, 2, 3, 4]), x), rtol=0, atol=1e-13)

    def test_digits_flow_on_numpy_and_torch(self, rng):
        torch = pytest.importorskip("torch")
        from rass_theory import models

        m = models.digits_flow(device="cpu")
        kernel = plain_kernel(m, protocol="paper")
        assert kernel.backend == "torch" and kernel.dim == 64
        x = rng.standard_normal((3, 64))
        a = kernel.mean(5, x)
        b = kernel.mean(5, torch.as_tensor(x, dtype=torch.float32))
        assert isinstance(a, np.ndarray) and a.dtype == np.float64 and isinstance(b, torch.Tensor)
        np.testing.assert_allclose(a, b.double().numpy(), rtol=0, atol=1e-5)

    def test_plain_sample_is_the_kernel_chain(self, gm8):
        """plain_sample draws x0, then mean + std * z per step, from one generator (same stream)."""
        kernel = plain_kernel(gm8, protocol="paper")
        g = np.random.default_rng(5)
        x = g.standard_normal((6, 8))
        for k in range(kernel.first_stochastic, kernel.stop):
            x = kernel.mean(k, x) + kernel.std(k) * g.standard_normal(x.shape)
        np.testing.assert_array_equal(plain_sample(gm8, 6, rng=5, protocol="paper"), kernel.tail(x))


def _spec(backend, **kw):
    return dict(K=2, L=3, n_samples=25, rng=3, protocol="paper", backend=backend, **kw)


class TestReturnTrajectories:
    @pytest.mark.parametrize("expansion", ["lazy", "full"])
    @pytest.mark.parametrize("prefetch", ["nearest", "parent", "none"])
    @pytest.mark.parametrize("evaluate_leaves", [False, True])
    def test_numpy_paths(self, gm8, expansion, prefetch, evaluate_leaves):
        kw = _spec("numpy", expansion=expansion, prefetch=prefetch, evaluate_leaves=evaluate_leaves)
        off = speculative_sample(gm8, "dgrs", **kw)
        on = speculative_sample(gm8, "dgrs", **kw, return_trajectories=True)
        assert off.trajectories is None and off.draft_means is None and off.depths is None
        self._check_run(gm8, off, on, kernel=plain_kernel(gm8, protocol="paper"))

    @pytest.mark.parametrize("prefetch", ["nearest", "none"])
    @pytest.mark.parametrize("evaluate_leaves", [False, True])
    def test_torch_paths(self, gm8, prefetch, evaluate_leaves):
        pytest.importorskip("torch")
        kw = _spec("torch", prefetch=prefetch, evaluate_leaves=evaluate_leaves, dtype=None)
        off = speculative_sample(gm8, "dgrs", **kw)
        on = speculative_sample(gm8, "dgrs", **kw, return_trajectories=True)
        self._check_run(gm8, off, on, kernel=plain_kernel(gm8, protocol="paper"))

    @staticmethod
    def _check_run(gm8, off, on, kernel):
        S = kernel.n_states
        np.testing.assert_array_equal(off.samples, on.samples)           # same random stream and law
        np.testing.assert_array_equal(off.target_calls, on.target_calls)
        assert on.trajectories.shape == (25, S, 8) and on.draft_means.shape == (25, S, 8)
        assert on.depths.shape == (25, S) and np.all(on.depths[:, 0] == -1)
        assert np.all((on.depths[:, 1:] >= 0) & (on.depths[:, 1:] < 3))
        np.testing.assert_allclose(kernel.tail(on.trajectories[:, -1]), on.samples, rtol=0, atol=1e-9)
        # depths restart at 0 each round: a committed depth j >= 1 follows depth j - 1
        d = on.depths[:, 1:]
        assert np.all((d[:, 1:] == 0) | (d[:, 1:] == d[:, :-1] + 1))
        # rounds per trajectory = commits at depth 0
        rounds = np.bincount(on.rounds.trajectory, minlength=25)
        np.testing.assert_array_equal(rounds, (d == 0).sum(axis=1))

    @pytest.mark.parametrize("backend", ["numpy", "torch"])
    def test_plain_sample(self, gm8, backend):
        if backend == "torch":
            pytest.importorskip("torch")
        out = plain_sample(gm8, 30, rng=2, protocol="paper", backend=backend)
        run = plain_sample(gm8, 30, rng=2, protocol="paper", backend=backend, return_trajectories=True)
        kernel = plain_kernel(gm8, protocol="paper")
        np.testing.assert_array_equal(out, run.samples)
        assert run.trajectories.shape == (30, kernel.n_states, 8) and np.all(run.depths[:, 1:] == 0)
        # draft_means hold the kernel mean: the residual is the injected noise
        np.testing.assert_allclose(run.draft_means[:, 1:2], kernel.mean(1, run.trajectories[:, 0])[:, None],
                                   rtol=0, atol=1e-9)
        assert run.target_calls == kernel.n_stochastic

    def test_flag_validated(self, gm8):
        with pytest.raises(TypeError, match="return_trajectories"):
            speculative_sample(gm8, "rass", K=2, L=2, n_samples=3, return_trajectories="yes")
        with pytest.raises(TypeError, match="return_trajectories"):
            plain_sample(gm8, 3, return_trajectories=1)

    def test_public_names(self):
        for name in ("plain_kernel", "PlainKernel", "check_trajectories", "check_sampler", "PlainSampleResult"):
            assert name in diffusion.__all__
