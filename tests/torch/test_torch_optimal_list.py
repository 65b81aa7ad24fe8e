"""Torch twin of the optimal list verifier: contract, dtype/device, acceptance at the bound,
agreement with the NumPy rule (residual draws, fake-key law), harness at defaults (slow)."""
import numpy as np
import pytest
import torch
from scipy import stats

import rass_theory as rt
from rass_theory.optimize import list_rule as lr
from rass_theory.torch import verifiers as tv

#: every test runs on both engines of CPU tensors (tests/torch/conftest.py)
pytestmark = pytest.mark.usefixtures("each_cpu_engine")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def node_batch(n, K, d, delta, *, dtype=torch.float64, device="cpu", sigma=1.3, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    mu_draft = torch.randn(d, generator=g, dtype=dtype, device=device).expand(n, d).contiguous()
    e = torch.randn(d, generator=g, dtype=dtype, device=device)
    e = e / torch.linalg.vector_norm(e)
    delta = torch.as_tensor(delta, dtype=dtype, device=device)
    mu_target = mu_draft + sigma * (delta.reshape(-1, 1) if delta.ndim else delta) * e
    children = mu_draft[:, None, :] + sigma * torch.randn(n, K, d, generator=g, dtype=dtype, device=device)
    return children, mu_draft, mu_target, sigma, e


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("K,delta", [(4, 1.0), (2, 0.5), (1, 1.0)])
def test_contract_dtype_device_acceptance(device, dtype, K, delta):
    n = 40_000
    children, mu_d, mu_t, sigma, e = node_batch(n, K, 4, delta, dtype=dtype, device=device)
    before = children.clone()
    res = tv.optimal_list()(children, mu_d, mu_t, sigma, torch.Generator(device=device).manual_seed(1))
    assert res.states.dtype == dtype and res.states.device.type == device
    assert torch.equal(children, before)
    acc = res.accepted
    idx = torch.nonzero(acc)[:, 0]
    assert torch.equal(res.states[idx], children[idx, res.child_index[idx]])
    assert torch.all(res.child_index[~acc] == -1)
    exact = rt.acceptance("optimal_list", K, delta)
    se = np.sqrt(exact * (1 - exact) / n)
    assert abs(acc.double().mean().item() - exact) < 4.5 * se + 1e-12
    s = ((res.states - mu_t) / sigma @ e).double().cpu().numpy()
    assert stats.kstest(s, "norm").pvalue > 1e-4


def test_per_row_deltas_and_degenerate():
    n, K = 30_000, 3
    g = torch.Generator().manual_seed(2)
    delta = torch.rand(n, generator=g, dtype=torch.float64) * 3.0
    delta[:100] = 0.0
    children, mu_d, mu_t, sigma, e = node_batch(n, K, 3, delta, seed=3)
    res = tv.optimal_list()(children, mu_d, mu_t, sigma, g)
    assert res.accepted[:100].all() and torch.all(res.child_index[:100] == 0)
    s = (((res.states - mu_d) / sigma) @ e - delta).numpy()
    assert stats.kstest(s, "norm").pvalue > 1e-4


@pytest.mark.parametrize("K,delta", [(4, 1.0), (16, 2.0), (1, 0.7), (3, 8.0)])
def test_residual_matches_numpy(K, delta):
    rule = rt.optimal_list_rule(K, delta)
    u = np.random.default_rng(0).random(500)
    p = rule.params.on(torch.zeros(1, dtype=torch.float64))
    got = lr.sample_residual(p, torch.as_tensor(u)).numpy()
    assert np.max(np.abs(got - rule.sample_residual(u))) < 1e-9


def test_fake_probability_and_keys_match_numpy():
    rule = rt.optimal_list_rule(4, 0.5)
    p = rule.params.on(torch.zeros(1, dtype=torch.float64))
    s = np.linspace(-6, rule.t_keep + 1, 2001)
    np.testing.assert_allclose(lr.fake_probability(p, torch.as_tensor(s)).numpy(),
                               lr.fake_probability(rule.params, s), rtol=1e-12, atol=1e-15)
    keys = lr.draw_fake_scores(p, torch.Generator().manual_seed(0), 40_000).numpy()
    ref = lr.draw_fake_scores(rule.params, np.random.default_rng(0), 40_000)
    assert stats.ks_2samp(keys, ref).pvalue > 1e-4
    assert keys.max() < rule.t_keep


def test_ndtri_exp_far_tail():
    from scipy.special import ndtri_exp

    lp = torch.tensor([-1.0, -50.0, -800.0, -5000.0], dtype=torch.float64)
    np.testing.assert_allclose(lr.ndtri_exp_nx(lp).numpy(), ndtri_exp(lp.numpy()), rtol=1e-12)


def test_speculative_sample_torch_resolver():
    from rass_theory.diffusion.torch_sampler import resolve_torch_verifier

    assert isinstance(resolve_torch_verifier("optimal_list", 4), tv.OptimalListVerifier)


@pytest.mark.slow
@pytest.mark.parametrize("K,delta", [(4, 0.5), (2, 0.25)])
def test_harness_defaults_torch(K, delta):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rep = rt.check_exactness(tv.optimal_list(), K=K, delta=delta, rng=0, backend="torch", device=device)
    assert rep.passed, str(rep)


@pytest.mark.parametrize("device", DEVICES)
def test_large_K_large_delta_torch(device):
    """K = 128, delta = 12: runs on the device, output s ~ N(delta, 1), acceptance alpha* = 2.07e-8
    within 4.5 SE (n = 4000: one acceptance fails; false-fail rate 8e-5)."""
    n, K, delta = 4000, 128, 12.0
    children, mu_d, mu_t, sigma, e = node_batch(n, K, 3, delta, device=device, seed=5)
    res = tv.optimal_list()(children, mu_d, mu_t, sigma, torch.Generator(device=device).manual_seed(6))
    exact = rt.acceptance("optimal_list", K, delta)
    se = np.sqrt(exact * (1 - exact) / n)
    assert abs(res.accepted.double().mean().item() - exact) < 4.5 * se + 1e-12
    s = ((res.states - mu_t) / sigma @ e).double().cpu().numpy()
    assert stats.kstest(s, "norm").pvalue > 1e-4


@pytest.mark.parametrize("K", [2, 128])
def test_per_row_deltas_spanning_the_grid_torch(K):
    """Per-row deltas log-uniform on [1e-3, 40]: s - delta ~ N(0, 1) pooled, acceptance count
    within 4.5 SE of the sum of the rows' exact acceptances."""
    n = 6000
    g = torch.Generator().manual_seed(7)
    delta = torch.exp(torch.empty(n, dtype=torch.float64).uniform_(np.log(1e-3), np.log(40.0), generator=g))
    children, mu_d, mu_t, sigma, e = node_batch(n, K, 3, delta, seed=8)
    res = tv.optimal_list()(children, mu_d, mu_t, sigma, g)
    s = (((res.states - mu_d) / sigma) @ e - delta).numpy()
    assert stats.kstest(s, "norm").pvalue > 1e-4
    p = lr.solve_list_rule(K, delta.numpy()).certify().acceptance
    assert abs(res.accepted.double().sum().item() - p.sum()) < 4.5 * np.sqrt(np.sum(p * (1 - p)))


def test_log_E_matches_numpy_everywhere():
    """Torch log D (residual bisection) = NumPy's on a (K, delta, x) cloud spanning the grid,
    including Phi(x)^K below 1e-16 and Q(x) below 1e-300."""
    rng = np.random.default_rng(9)
    K = rng.choice([2.0, 3.0, 64.0, 128.0, 1024.0], 20_000)
    delta = np.exp(rng.uniform(np.log(1e-3), np.log(40.0), K.size))
    x = rng.uniform(-5.0, 60.0, K.size)
    ref = lr._log_E(x, K, delta)
    got = lr._log_E(*(torch.as_tensor(a) for a in (x, K, delta))).numpy()
    fin = np.isfinite(ref)
    assert np.array_equal(np.isfinite(got), fin) and fin.mean() > 0.4  # D < 0 below t_a: log D = nan
    assert np.max(np.abs(got[fin] - ref[fin]) / np.maximum(1.0, np.abs(ref[fin]))) < 1e-14


@pytest.mark.parametrize("K,delta", [(128, 40.0), (2, 40.0), (1024, 37.0), (1024, 1e-3)])
def test_fake_keys_match_numpy_at_extremes(K, delta):
    """q and the fake-key law agree with NumPy where Phi(s)^(K-1) underflows (one-exp form) and
    where the envelope's low part (phi(. - delta) below b) carries the mass."""
    p_np = lr.solve_list_rule(K, delta)
    p = p_np.on(torch.zeros(1, dtype=torch.float64))
    t_a, t_lo = p_np.t_keep[0], p_np.t_low[0]
    s = np.linspace(t_lo - 4.0 / delta, min(t_a, 9.0), 2001)
    np.testing.assert_allclose(lr.fake_probability(p, torch.as_tensor(s)).numpy(),
                               lr.fake_probability(p_np, s), rtol=1e-10, atol=1e-14)
    keys = lr.draw_fake_scores(p, torch.Generator().manual_seed(3), 40_000).numpy()
    ref = lr.draw_fake_scores(p_np, np.random.default_rng(3), 40_000)
    assert keys.max() < t_a
    assert stats.ks_2samp(keys, ref).pvalue > 1e-4
