"""Delta traces record the regime each verified node met: sigma and ||mu_draft|| / sigma."""
import numpy as np
import pytest

from rass_theory import diffusion
from rass_theory.stats.regime import regime_from_trace


@pytest.fixture(scope="module")
def target():
    return diffusion.GaussianMixture.random(dim=16, n_components=3, seed=0)


@pytest.mark.parametrize("expansion", ["lazy", "full"])
def test_numpy_trace_records_sigma_and_mu_ratio(target, expansion):
    run = diffusion.speculative_sample(target, "rass", K=3, L=3, n_samples=40, rng=0, expansion=expansion)
    nodes = run.nodes
    kernel = diffusion.plain_kernel(target, n_steps=30, churn=0.06)
    assert nodes.sigma.shape == nodes.delta.shape == nodes.mu_ratio.shape
    # every node's sigma is the plain kernel's scale at the node's step
    np.testing.assert_allclose(nodes.sigma, np.asarray(kernel.std(nodes.step), dtype=float), rtol=1e-12)
    assert np.all(np.isfinite(nodes.mu_ratio)) and np.all(nodes.mu_ratio >= 0)
    trace = diffusion.DeltaTrace.from_run(run)
    np.testing.assert_array_equal(trace.sigma, nodes.sigma)
    np.testing.assert_array_equal(trace.mu_ratio, nodes.mu_ratio)
    regime = regime_from_trace(trace)
    assert regime.sigma is not None and regime.rho is not None
    np.testing.assert_array_equal(np.sort(regime.rho), np.sort(nodes.mu_ratio))


def test_torch_trace_records_sigma_and_mu_ratio():
    pytest.importorskip("torch")
    from rass_theory import models

    m = models.digits_flow(device="cpu")
    run = diffusion.speculative_sample(m, "rass", K=2, L=2, n_samples=12, backend="torch", device="cpu", rng=0)
    nodes = run.nodes
    kernel = diffusion.plain_kernel(m, n_steps=30, churn=0.06)
    assert nodes.sigma.shape == nodes.delta.shape == nodes.mu_ratio.shape
    np.testing.assert_allclose(nodes.sigma, np.asarray(kernel.std(nodes.step), dtype=float), rtol=1e-6)
    assert np.all(np.isfinite(nodes.mu_ratio)) and np.all(nodes.mu_ratio >= 0)
    assert regime_from_trace(run).rho is not None
