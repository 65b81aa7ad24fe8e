"""Torch tree sampler: validation, call counting, trace bookkeeping, agreement with the NumPy sampler."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rass_theory import diffusion  # noqa: E402
from rass_theory.diffusion import GaussianMixture, compare_to_plain  # noqa: E402
from rass_theory.diffusion.torch_sampler import plain_sample_torch, speculative_sample_torch  # noqa: E402
from rass_theory.models import from_velocity  # noqa: E402
from rass_theory.verifiers._tensors import TorchVerifierResult  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module")
def gm8():
    return GaussianMixture.random(dim=8, n_components=3, seed=0)


def linear_model(dim=6, device="cpu", dtype=torch.float64):
    """A cheap non-trivial torch velocity field (exactness holds for any field)."""
    g = torch.Generator().manual_seed(3)
    W = (0.3 * torch.randn(dim, dim, generator=g, dtype=dtype)).to(device)

    def fn(x, s):
        return x @ W + torch.sin(3 * s)[:, None] * x
    return from_velocity(fn, dim, name="linear", dtype=dtype, device=device)


def accept_first(children, mu_draft, mu_target, sigma, rng):
    """Known-wrong: always commit the first draft."""
    n = children.shape[0]
    return TorchVerifierResult(children[:, 0].clone(), torch.ones(n, dtype=torch.bool, device=children.device),
                               torch.zeros(n, dtype=torch.int64, device=children.device))


class TestValidation:
    """The options shared with the NumPy sampler are checked on both backends in
    ``tests/diffusion/test_speculative.py::TestValidation::test_value_errors``."""

    def test_max_batch(self, gm8):
        with pytest.raises(ValueError, match="max_batch"):
            speculative_sample_torch(gm8, "dgrs", K=2, L=2, n_samples=4, rng=0, max_batch=0)

    def test_dtype_names_as_on_numpy(self, gm8):
        """``dtype="float32"`` (what the NumPy backend takes) raised a TypeError on torch."""
        runs = [diffusion.speculative_sample(gm8, "rass", K=2, L=2, n_samples=20, n_steps=10, rng=0,
                                             backend="torch", dtype=dt).samples
                for dt in ("float32", torch.float32, np.float32)]
        assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])
        with pytest.raises(TypeError, match="dtype must be torch.float32 or torch.float64"):
            diffusion.speculative_sample(gm8, "rass", n_samples=4, backend="torch", dtype="float16")

    def test_rmc_needs_k1(self, gm8):
        with pytest.raises(ValueError, match="rmc.*K = 1"):
            speculative_sample_torch(gm8, "rmc", K=2, L=2, n_samples=4, rng=0)

    def test_unknown_verifier(self, gm8):
        with pytest.raises(ValueError, match="verifier"):
            speculative_sample_torch(gm8, "magic", K=2, L=2, n_samples=4, rng=0)

    def test_rule_names_resolve_as_in_numpy(self):
        """One resolver for both samplers: the same classes, "threshold" snapped per grid cell on torch."""
        from rass_theory.diffusion._contract import resolve_verifier
        from rass_theory.diffusion.torch_sampler import _SnappedThreshold, resolve_torch_verifier

        for name in ("dgrs", "rass", "optimal_list", "resample"):
            assert type(resolve_torch_verifier(name, 3)) is type(resolve_verifier(name, 3))
        assert isinstance(resolve_torch_verifier("threshold", 3), _SnappedThreshold)
        with pytest.raises(TypeError, match="verifier must be a rule name"):
            resolve_torch_verifier(42, 3)

    def test_evaluate_leaves_type(self, gm8):
        with pytest.raises(TypeError, match="evaluate_leaves"):
            speculative_sample_torch(gm8, "dgrs", K=2, L=2, n_samples=4, rng=0, evaluate_leaves="yes")

    def test_target_without_velocity(self):
        with pytest.raises(TypeError, match="velocity"):
            speculative_sample_torch(object(), "dgrs", K=2, L=2, n_samples=4, rng=0)

    def test_raw_target_wrong_shape(self):
        class Bad:
            dim = 4

            def velocity(self, x, s):
                return x[:, :2]
        with pytest.raises(ValueError, match="shape"):
            speculative_sample_torch(Bad(), "dgrs", K=2, L=2, n_samples=4, rng=0)

    def test_nonfinite_model_named(self):
        m = from_velocity(lambda x, s: x / (s[:, None] < 0.5).to(x.dtype) - x, dim=4, name="blowup")
        with pytest.raises(ValueError, match="blowup.*non-finite"):
            speculative_sample_torch(m, "dgrs", K=2, L=2, n_samples=4, n_steps=10, churn=0.06, rng=0)

    def test_deferred_nonfinite_flag_read_at_round_end(self):
        """Accelerator path: the model's device flag is read with the round's data and raises."""
        class Deferred:
            dim = 4

            def velocity(self, x, s):
                return -x

            def pop_pending(self):
                return (torch.tensor(True), "call 2")

            def nonfinite_error(self, first):
                return ValueError(f"deferred model: non-finite at or after {first}")
        with pytest.raises(ValueError, match="non-finite at or after call 2"):
            speculative_sample_torch(Deferred(), "dgrs", K=2, L=2, n_samples=4, rng=0)

    def test_verifier_contract_checked(self, gm8):
        def bad(children, mu_draft, mu_target, sigma, rng):
            n = children.shape[0]
            return TorchVerifierResult(children[:, 0, :2], torch.ones(n, dtype=torch.bool), torch.zeros(n).long())
        with pytest.raises(ValueError, match="states"):
            speculative_sample_torch(gm8, bad, K=2, L=2, n_samples=4, rng=0)

    @pytest.mark.parametrize("make,error,match", [
        (lambda c, n: object(), TypeError, "must return an object with .states"),
        (lambda c, n: TorchVerifierResult(c[:, 0], torch.ones(n), torch.zeros(n).long()), ValueError,
         r"verifier broke the contract: \[dtype\] result.accepted must have dtype bool"),
        (lambda c, n: TorchVerifierResult(c[:, 0].to(torch.float32 if c.dtype == torch.float64 else torch.float64),
                                          torch.ones(n, dtype=torch.bool), torch.zeros(n).long()),
         ValueError, r"states must have dtype torch.float(32|64), got"),
        (lambda c, n: TorchVerifierResult(c[:, 0].numpy(), torch.ones(n, dtype=torch.bool), torch.zeros(n).long()),
         ValueError, "states must be a tensor"),
    ])
    def test_verifier_output_goes_through_the_one_checker(self, gm8, make, error, match):
        """The shared checker's whole-array clauses and messages, then the sampler's own (device, dtype)."""
        def bad(children, mu_draft, mu_target, sigma, rng):
            return make(children, children.shape[0])
        with pytest.raises(error, match=match):
            speculative_sample_torch(gm8, bad, K=2, L=2, n_samples=4, rng=0)


class TestBookkeeping:
    @pytest.mark.parametrize("prefetch", ["nearest", "parent", "none"])
    @pytest.mark.parametrize("leaves", [False, True])
    def test_calls_rounds_and_trace(self, prefetch, leaves):
        model = linear_model()
        run = speculative_sample_torch(model, "dgrs", K=2, L=3, n_samples=40, n_steps=20, churn=0.1, rng=1,
                                       prefetch=prefetch, evaluate_leaves=leaves)
        n_std = run.n_standard_steps
        r = run.rounds
        # every trajectory commits exactly the stochastic steps
        assert np.all(np.bincount(r.trajectory, weights=r.committed, minlength=40) == n_std)
        # calls = initial evaluation + batched calls + root calls (prefetch="none")
        expect = 1 + np.bincount(r.trajectory, weights=r.called, minlength=40) \
            + np.bincount(r.trajectory, weights=r.root_call, minlength=40)
        assert np.array_equal(run.target_calls, expect)
        assert run.speedup == pytest.approx(n_std / run.target_calls.mean())
        # one verified node per committed step; depths 0..committed-1 in each round
        nodes = run.nodes
        assert nodes.delta.size == r.committed.sum()
        assert np.array_equal(np.bincount(nodes.round_id, minlength=r.committed.size), r.committed)
        assert np.all(nodes.step == r.start_step[nodes.round_id] + nodes.depth)
        # every node but the last of its round was accepted
        last = nodes.depth == r.committed[nodes.round_id] - 1
        assert np.all(nodes.accepted[~last])
        # the first round starts from an exactly evaluated root
        first = (nodes.depth == 0) & (r.drift_source[nodes.round_id] == "initial")
        assert first.sum() == 40 and np.allclose(nodes.delta[first], 0.0, atol=1e-12)
        if prefetch == "none":
            assert np.all(r.root_call[r.drift_source != "initial"] | (r.drift_source[r.drift_source != "initial"] == "leaf"))
            assert np.allclose(nodes.delta[nodes.depth == 0], 0.0, atol=1e-12)
        srcs = set(np.unique(r.drift_source))
        if leaves:
            assert "leaf" in srcs
        if prefetch == "nearest":
            assert "nearest" in srcs
        assert run.extra["samples_torch"].shape == (40, 6)
        assert run.samples.dtype == np.float64

    @pytest.mark.parametrize("prefetch", ["none", "nearest"])
    def test_round_without_batched_call(self, prefetch):
        """Every round commits one step (always reject); with an exact root the last round of
        depth 1 needs no batched call (prefetch='none'), and calls are counted accordingly."""
        def always_reject(children, mu_draft, mu_target, sigma, rng):
            n = children.shape[0]
            z = torch.randn(mu_target.shape, generator=rng, dtype=mu_target.dtype, device=mu_target.device)
            return TorchVerifierResult(mu_target + sigma[:, None] * z, torch.zeros(n, dtype=torch.bool),
                                       torch.full((n,), -1, dtype=torch.int64))
        run = speculative_sample_torch(linear_model(), always_reject, K=2, L=2, n_samples=3, n_steps=10, churn=0.1,
                                       rng=0, prefetch=prefetch)
        n_std = run.n_standard_steps
        assert np.all(run.rounds.committed == 1)
        if prefetch == "none":   # initial + a root call in rounds 2..n_std + batched calls in rounds 1..n_std-1
            assert np.all(run.target_calls == 1 + 2 * (n_std - 1))
        else:                    # the root is never exact after round 1: every round makes its batched call
            assert np.all(run.target_calls == 1 + n_std)

    def test_same_seed_same_run(self):
        model = linear_model()
        a = speculative_sample_torch(model, "rass", K=2, L=2, n_samples=20, n_steps=12, churn=0.1, rng=5)
        b = speculative_sample_torch(model, "rass", K=2, L=2, n_samples=20, n_steps=12, churn=0.1, rng=5)
        assert np.array_equal(a.samples, b.samples) and np.array_equal(a.target_calls, b.target_calls)

    @pytest.mark.parametrize("device", DEVICES)
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
    def test_dtype_device_follow_model(self, device, dtype):
        model = linear_model(device=device, dtype=dtype)
        run = speculative_sample_torch(model, "threshold", K=2, L=2, n_samples=16, n_steps=10, churn=0.1, rng=0)
        t = run.extra["samples_torch"]
        assert t.dtype == dtype and t.device.type == device
        plain = plain_sample_torch(model, 8, n_steps=10, churn=0.1, rng=0, return_tensor=True)
        assert plain.dtype == dtype and plain.device.type == device

    def test_max_batch_same_law_same_values(self):
        model = linear_model()
        a = speculative_sample_torch(model, "dgrs", K=2, L=3, n_samples=10, n_steps=12, churn=0.1, rng=2)
        b = speculative_sample_torch(model, "dgrs", K=2, L=3, n_samples=10, n_steps=12, churn=0.1, rng=2, max_batch=7)
        np.testing.assert_allclose(a.samples, b.samples, rtol=1e-10, atol=1e-10)
        assert np.array_equal(a.target_calls, b.target_calls)

    def test_dispatch_through_diffusion(self, gm8):
        run = diffusion.speculative_sample(gm8, "dgrs", K=2, L=2, n_samples=8, rng=0, backend="torch")
        assert run.extra["backend"] == "torch"
        out = diffusion.plain_sample(gm8, 8, rng=0, backend="torch")
        assert out.shape == (8, 8)


class TestAgreementWithNumpy:
    """Same target, same kernel: the torch and NumPy samplers agree in law and in call counts."""

    @pytest.mark.parametrize("verifier,K,prefetch", [
        ("dgrs", 2, "nearest"), ("rass", 2, "parent"), ("rmc", 1, "none"),
        pytest.param("threshold", 2, "nearest", marks=pytest.mark.slow),     # the NumPy threshold run takes ~30 s
    ])
    def test_speedup_matches_numpy(self, gm8, verifier, K, prefetch):
        kw = dict(K=K, L=3, n_samples=500, prefetch=prefetch)
        t = diffusion.speculative_sample(gm8, verifier, rng=11, backend="torch", **kw)
        n = diffusion.speculative_sample(gm8, verifier, rng=12, expansion="full", **kw)
        z = (t.speedup - n.speedup) / np.hypot(t.speedup_se, n.speedup_se)
        assert abs(z) < 4.0, (t.speedup, n.speedup)          # two-sided, false-fail rate 6e-5
        assert t.n_standard_steps == n.n_standard_steps

    @pytest.mark.parametrize("protocol", ["default", "paper"])
    def test_samples_match_numpy_plain(self, gm8, protocol):
        run = speculative_sample_torch(gm8, "dgrs", K=2, L=3, n_samples=600, rng=21, protocol=protocol)
        ref = diffusion.plain_sample(gm8, 600, rng=22, protocol=protocol)
        cmp = compare_to_plain(run.samples, ref, gm8.means, alpha=0.01, n_permutations=499, rng=0, detectable=False)
        assert cmp.passed, cmp
        plain_t = plain_sample_torch(gm8, 600, rng=23, protocol=protocol)
        cmp2 = compare_to_plain(plain_t, ref, gm8.means, alpha=0.01, n_permutations=499, rng=0, detectable=False)
        assert cmp2.passed, cmp2

    def test_known_wrong_verifier_is_caught(self, gm8):
        """Power check of the comparison above: committing the first draft is detected."""
        run = speculative_sample_torch(gm8, accept_first, K=2, L=3, n_samples=600, rng=21, churn=0.3)
        ref = diffusion.plain_sample(gm8, 600, rng=22, churn=0.3)
        cmp = compare_to_plain(run.samples, ref, gm8.means, alpha=0.01, n_permutations=499, rng=0, detectable=False)
        assert not cmp.passed
