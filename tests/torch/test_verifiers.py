"""Torch verifiers: input validation, the contract, exact acceptance, agreement in law with NumPy."""
import math

import numpy as np
import pytest
import torch

from rass_theory.verifiers import _tensors as _core
from scipy import stats

import rass_theory as rt
from rass_theory.torch import verifiers as tv

#: every test runs on both engines of CPU tensors (tests/torch/conftest.py)
pytestmark = pytest.mark.usefixtures("each_cpu_engine")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

RULES = {  # name -> (factory, K)
    "rmc": (lambda: tv.rmc(), 1),
    "dgrs": (lambda: tv.dgrs(), 4),
    "rass": (lambda: tv.rass(), 4),
    "rass_uniform": (lambda: tv.rass("uniform"), 3),
    "threshold": (lambda: tv.threshold(t=0.9, weights=[0.1, 0.2, 0.3, 0.4]), 4),
    "resample": (lambda: tv.resample(), 4),
}


def node_batch(n, K, d, delta, *, dtype=torch.float64, device="cpu", sigma=1.3, seed=0):
    """Children of n identical nodes at displacement delta, drawn with torch."""
    g = torch.Generator(device=device).manual_seed(seed)
    mu_draft = torch.randn(d, generator=g, dtype=dtype, device=device).expand(n, d).contiguous()
    e = torch.randn(d, generator=g, dtype=dtype, device=device)
    e = e / torch.linalg.vector_norm(e)
    mu_target = mu_draft + sigma * delta * e
    children = mu_draft[:, None, :] + sigma * torch.randn(n, K, d, generator=g, dtype=dtype, device=device)
    return children, mu_draft, mu_target, sigma, e


def standardised(states, mu_draft, mu_target, sigma, e):
    z = (states - mu_target) / sigma          # N(0, I) under the target
    s = z @ e
    r = (z * z).sum(1) - s * s
    return s.double().cpu().numpy(), r.double().cpu().numpy()


class TestValidation:
    def setup_method(self):
        self.args = node_batch(8, 4, 3, 0.5)[:4]

    def test_rejects_numpy_inputs(self):
        children, mu_d, mu_t, sigma = self.args
        with pytest.raises(TypeError, match="children must be a torch.Tensor"):
            tv.dgrs()(children.numpy(), mu_d, mu_t, sigma)

    def test_dtype_mismatch_names_argument(self):
        children, mu_d, mu_t, sigma = self.args
        with pytest.raises(ValueError, match="mu_target has dtype torch.float32"):
            tv.dgrs()(children, mu_d, mu_t.float(), sigma)
        with pytest.raises(ValueError, match="sigma has dtype"):
            tv.dgrs()(children, mu_d, mu_t, torch.tensor(1.0, dtype=torch.float32))

    def test_unsupported_dtype(self):
        children, mu_d, mu_t, sigma = self.args
        with pytest.raises(TypeError, match="children must have dtype torch.float32 or torch.float64"):
            tv.dgrs()(children.half(), mu_d.half(), mu_t.half(), sigma)

    def test_device_mismatch_names_argument(self):
        children, mu_d, mu_t, sigma = self.args
        with pytest.raises(ValueError, match="mu_draft is on device meta"):
            tv.rass()(children, mu_d.to("meta"), mu_t, sigma)

    def test_shapes_and_sigma(self):
        children, mu_d, mu_t, sigma = self.args
        with pytest.raises(ValueError, match=r"mu_draft must have shape \(n, d\)"):
            tv.dgrs()(children, mu_d[:3], mu_t, sigma)
        with pytest.raises(ValueError, match="sigma must be finite and > 0"):
            tv.dgrs()(children, mu_d, mu_t, -1.0)
        with pytest.raises(ValueError, match=r"sigma must be a scalar or have shape \(n,\)"):
            tv.dgrs()(children, mu_d, mu_t, torch.ones(3, dtype=torch.float64))
        with pytest.raises(ValueError, match="K = 1"):
            tv.rmc()(children, mu_d, mu_t, sigma)

    def test_generator_checks(self):
        children, mu_d, mu_t, sigma = self.args
        with pytest.raises(TypeError, match="rng must be None, an int or a torch.Generator"):
            tv.dgrs()(children, mu_d, mu_t, sigma, np.random.default_rng(0))
        if torch.cuda.is_available():
            with pytest.raises(ValueError, match="rng is a torch.Generator on device cuda"):
                tv.dgrs()(children, mu_d, mu_t, sigma, torch.Generator(device="cuda"))

    def test_bad_weights(self):
        with pytest.raises(ValueError, match="weights must be 'optimal', 'uniform'"):
            tv.rass("best")
        with pytest.raises(ValueError, match="weights must sum to 1"):
            tv.rass([0.5, 0.6])
        with pytest.raises(ValueError, match="give both t and weights"):
            tv.threshold(t=0.3)
        with pytest.raises(ValueError, match="depend on delta"):
            tv.threshold(K=9).policy_for(9)

    def test_cuda_request_without_cuda(self):
        from rass_theory.torch.harness import resolve_device

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rule", list(RULES))
class TestContractAndAcceptance:
    def test_contract_and_exact_acceptance(self, rule, dtype, device):
        factory, K = RULES[rule]
        v = factory()
        n, delta = 6000, 0.7
        children, mu_d, mu_t, sigma, e = node_batch(n, K, 5, delta, dtype=dtype, device=device, seed=1)
        res = v(children, mu_d, mu_t, sigma, torch.Generator(device=device).manual_seed(2))
        assert res.states.dtype == dtype and res.states.device.type == device
        assert res.accepted.dtype == torch.bool and res.child_index.dtype == torch.int64
        assert res.states.shape == (n, 5)
        assert torch.equal(res.accepted, res.child_index >= 0)
        acc = res.accepted
        idx = torch.clamp(res.child_index, min=0)
        claimed = children[torch.arange(n, device=device), idx]
        assert torch.equal(res.states[acc], claimed[acc])          # bit-for-bit copies
        assert torch.isfinite(res.states).all()
        # contract checker of the NumPy package agrees
        assert rt.verifiers.check_contract(res.numpy(), children.cpu().numpy()) == []
        expected = v.expected_acceptance(K, delta)
        rate = acc.double().mean().item()
        se = math.sqrt(max(expected * (1 - expected), 1e-12) / n)
        assert abs(rate - expected) / se < 4.5


class TestDegenerate:
    @pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
    @pytest.mark.parametrize("rule", ["dgrs", "rass", "threshold"])
    def test_zero_and_tiny_delta_accept_child_zero(self, rule, dtype):
        factory, K = RULES[rule]
        tol = math.sqrt(torch.finfo(torch.float64).eps)  # the band is sqrt(eps_64) in every dtype (issue 14)
        for delta in (0.0, 0.5 * tol):
            children, mu_d, mu_t, sigma, _ = node_batch(50, K, 3, delta, dtype=dtype)
            res = factory()(children, mu_d, mu_t, sigma, 0)
            assert res.accepted.all() and (res.child_index == 0).all()
            assert torch.equal(res.states, children[:, 0])

    def test_small_nonzero_delta_is_finite(self):
        children, mu_d, mu_t, sigma, _ = node_batch(2000, 4, 3, 1e-6)
        for rule in ("dgrs", "rass"):
            res = RULES[rule][0]()(children, mu_d, mu_t, sigma, 3)
            assert torch.isfinite(res.states).all()


class TestReproducibility:
    @pytest.mark.parametrize("rule", ["dgrs", "rass", "threshold", "resample"])
    def test_same_seed_same_output(self, rule):
        factory, K = RULES[rule]
        children, mu_d, mu_t, sigma, _ = node_batch(500, K, 4, 0.9)
        a = factory()(children, mu_d, mu_t, sigma, torch.Generator().manual_seed(5))
        b = factory()(children, mu_d, mu_t, sigma, 5)
        assert torch.equal(a.states, b.states) and torch.equal(a.child_index, b.child_index)


class TestAgreementWithNumpy:
    """Torch and NumPy verifiers are different draws of the same law."""

    @pytest.mark.parametrize("name,K", [("dgrs", 4), ("rass", 4), ("rmc", 1)])
    def test_same_law(self, name, K):
        n, delta, d = 20000, 0.8, 4
        children, mu_d, mu_t, sigma, e = node_batch(n, K, d, delta, seed=11)
        t_res = getattr(tv, name)()(children, mu_d, mu_t, sigma, 12)
        n_res = getattr(rt.verifiers, name)()(children.numpy(), mu_d.numpy(), mu_t.numpy(), sigma,
                                              np.random.default_rng(13))
        s_t, r_t = standardised(t_res.states, mu_d, mu_t, sigma, e)
        s_n, r_n = standardised(torch.from_numpy(n_res.states), mu_d, mu_t, sigma, e)
        # same children: the acceptance indicators are paired; compare both rates to the exact value
        exact = getattr(tv, name)().expected_acceptance(K, delta)
        for rate in (t_res.accepted.double().mean().item(), n_res.accepted.mean()):
            assert abs(rate - exact) / math.sqrt(exact * (1 - exact) / n) < 4.5
        assert stats.ks_2samp(s_t, s_n).pvalue > 1e-3
        assert stats.ks_2samp(r_t, r_n).pvalue > 1e-3
        assert stats.kstest(s_t, "norm").pvalue > 1e-3
        assert stats.kstest(r_t, stats.chi2(d - 1).cdf).pvalue > 1e-3


class TestOptimalWeights:
    def test_device_interpolation_matches_numpy_interpolator(self):
        from rass_theory.optimize import optimal_weights_interpolator

        K = 4
        delta = torch.tensor([0.0, 1e-4, 0.3, 1.234, 5.5, 40.0], dtype=torch.float64)
        v = tv.rass("interpolated")
        from rass_theory.backend import get_backend

        batch = type("B", (), {"K": K, "n": 6, "dtype": torch.float64, "device": torch.device("cpu"),
                               "delta": delta, "delta_safe": delta, "s": delta, "nx": get_backend(delta)})()
        got = v.row_weights(batch).numpy()
        np.testing.assert_allclose(got, optimal_weights_interpolator(K)(delta.numpy()), atol=1e-12)

    @pytest.mark.parametrize("deltas", [[0.7] * 5, [0.3, 0.9, 1.7, 0.3, 2.2]])
    def test_optimal_weights_are_numpys(self, deltas):
        """One call, one law: rass("optimal") resolves the weights exactly as NumPy does (the exact
        optimum for a single-delta batch, the interpolator for per-row deltas)."""
        from rass_theory.verifiers._weights import resolve_weights

        n, K = len(deltas), 4
        mu_d = torch.zeros(n, 3, dtype=torch.float64)
        mu_t = mu_d.clone()
        mu_t[:, 1] = torch.tensor(deltas, dtype=torch.float64)
        batch = _core.prepare(torch.zeros(n, K, 3, dtype=torch.float64), mu_d, mu_t, 1.0, 0)
        got = np.broadcast_to(tv.rass().row_weights(batch).numpy(), (n, K))
        want = np.broadcast_to(resolve_weights("optimal", K, np.array(deltas)), (n, K))
        np.testing.assert_array_equal(got, want)

    def test_pinned_delta_uses_exact_optimum(self):
        from rass_theory.optimize import optimal_rank_weights

        v = tv.rass(delta=0.5)
        np.testing.assert_allclose(v.weights_for(4, 0.5), optimal_rank_weights(4, 0.5).weights)
        assert v.expected_acceptance(4, 0.5) == pytest.approx(rt.acceptance("rass", 4, 0.5), abs=1e-9)

    def test_callable_weights_on_device(self):
        calls = []

        def uniform_weights(K, delta):
            calls.append(delta.shape)
            return torch.full((K,), 1.0 / K, dtype=delta.dtype, device=delta.device)

        children, mu_d, mu_t, sigma, _ = node_batch(300, 3, 2, 0.4)
        res = tv.rass(uniform_weights)(children, mu_d, mu_t, sigma, 0)
        assert calls == [(300,)] and res.states.shape == (300, 2)


class TestFloat32Law:
    """float32 runs keep the target law: s ~ N(delta, 1) and ||z_perp||^2 ~ chi^2(d - 1)."""

    @pytest.mark.parametrize("rule", ["rass", "threshold", "dgrs"])
    def test_float32_output_law(self, rule):
        factory, K = RULES[rule]
        n, d = 30_000, 4
        children, mu_d, mu_t, sigma, e = node_batch(n, K, d, 0.8, dtype=torch.float32, seed=21)
        res = factory()(children, mu_d, mu_t, sigma, 22)
        s, r = standardised(res.states, mu_d, mu_t, sigma, e)
        assert stats.kstest(s, "norm").pvalue > 1e-3
        assert stats.kstest(r, stats.chi2(d - 1).cdf).pvalue > 1e-3


def test_numpy_only_options_name_themselves_on_tensors():
    """One class for both back ends: an option that exists on NumPy only raises a TypeError naming it."""
    children, mu_d, mu_t, sigma, _ = node_batch(20, 4, 3, 0.5)
    with pytest.raises(TypeError, match="residual='rejection' runs on NumPy arrays only"):
        tv.rass("uniform", residual="rejection")(children, mu_d, mu_t, sigma, 0)
    from rass_theory import verifiers
    from rass_theory.optimize.policies import ThresholdRankPolicy

    with pytest.raises(TypeError, match="policy verifiers run on NumPy arrays"):
        verifiers.policy(ThresholdRankPolicy(4, 0.5, [0.25] * 4))(children, mu_d, mu_t, sigma, 0)
