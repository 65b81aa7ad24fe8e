"""The ``kind`` keyword of plain_sample / speculative_sample: passed through, validated, exact."""
import numpy as np
import pytest

from rass_theory.diffusion import ChurnSchedule, GaussianMixture, plain_sample, speculative_sample
from rass_theory.diffusion.exactness import compare_to_plain
from rass_theory.verifiers import VerifierResult


@pytest.fixture(scope="module")
def gm16():
    return GaussianMixture.random(dim=16, n_components=5, seed=0)


def test_ddim_runs(gm16):
    run = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=50, rng=0, kind="ddim")
    ref = plain_sample(gm16, 50, rng=0, kind="ddim")
    assert run.samples.shape == ref.shape == (50, 16)
    assert np.all(np.isfinite(run.samples)) and np.all(np.isfinite(ref))
    assert run.n_standard_steps == ChurnSchedule(30, 0.06, kind="ddim").n_stochastic


def test_kind_changes_plain_chain(gm16):
    """Same seed, different kernel: the chains differ (the keyword is not ignored)."""
    a = plain_sample(gm16, 20, rng=5, kind="sde")
    b = plain_sample(gm16, 20, rng=5, kind="ddim")
    assert not np.allclose(a, b)
    assert np.array_equal(a, plain_sample(gm16, 20, rng=5))        # default unchanged


@pytest.mark.parametrize("kind", ["sde", "ddim"])
def test_speculative_uses_the_kernel_of_kind(gm16, kind):
    """The first verified node is the root x_0 with its exact target velocity: its target mean
    must be ``a_0 x_0 + b_0 u(x_0, 1)`` of ``ChurnSchedule(kind=kind)``."""
    seen = {}

    def recording_reject(children, mu_draft, mu_target, sigma, rng):
        seen.setdefault("mu_target", mu_target.copy())
        seen.setdefault("sigma", np.broadcast_to(np.asarray(sigma, float), (children.shape[0],)).copy())
        n = children.shape[0]
        sig = np.broadcast_to(np.asarray(sigma, float), (n,))
        return VerifierResult(mu_target + sig[:, None] * rng.standard_normal(mu_target.shape),
                              np.zeros(n, bool), np.full(n, -1))

    n = 8
    speculative_sample(gm16, recording_reject, K=1, L=3, n_samples=n, rng=3, kind=kind)
    x0 = np.random.default_rng(3).standard_normal((n, gm16.dim))    # first draw of the run's stream
    sch = ChurnSchedule(30, 0.06, kind=kind)
    expected = sch.mean(0, x0, gm16.velocity(x0, sch.s[0]))
    np.testing.assert_allclose(seen["mu_target"], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(seen["sigma"], sch.sigma[0])
    other = ChurnSchedule(30, 0.06, kind="ddim" if kind == "sde" else "sde")
    assert not np.allclose(seen["mu_target"], other.mean(0, x0, gm16.velocity(x0, other.s[0])))


@pytest.mark.parametrize("verifier,K,L", [("dgrs", 2, 3), ("rass", 1, 3)])
def test_ddim_speculative_matches_ddim_plain(gm16, verifier, K, L):
    """Whole-run two-sample check (d = 16, 600 trajectories, independent seeds, alpha = 1e-3)."""
    run = speculative_sample(gm16, verifier, K=K, L=L, n_samples=600, rng=41, kind="ddim")
    ref = plain_sample(gm16, 600, rng=42, kind="ddim")
    comp = compare_to_plain(run.samples, ref, gm16.means, alpha=1e-3, n_permutations=199, rng=43,
                            detectable=False)
    assert comp.passed, comp


@pytest.mark.parametrize("bad", ["ode", "DDIM", "", None, 1])
def test_bad_kind_raises(gm16, bad):
    with pytest.raises(ValueError, match="kind"):
        plain_sample(gm16, 5, rng=0, kind=bad)
    with pytest.raises(ValueError, match="kind"):
        speculative_sample(gm16, "dgrs", K=1, L=3, n_samples=5, rng=0, kind=bad)
