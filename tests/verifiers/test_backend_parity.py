"""One call, one law: the shared kernels give the same output on NumPy and torch for the same uniforms.

Each case builds the node batch on both back ends (``_core.prepare``), feeds the *same* uniforms
to the kernel with the pieces each back end's verifier uses, and compares the decisions and the
states.  The only piece with two implementations is the residual sampler (exact-engine tables vs
the fixed-iteration device sampler), so corrected states agree to the samplers' tolerance, and
every accept/reject decision and every copied child agree exactly.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rass_theory.torch import verifiers as tv  # noqa: E402
from rass_theory.verifiers import kernels  # noqa: E402
from rass_theory.verifiers._core import prepare  # noqa: E402
from rass_theory.verifiers._weights import batch_weights  # noqa: E402


def nodes(n, K, d, deltas, seed=0):
    rng = np.random.default_rng(seed)
    mu_d = rng.standard_normal((n, d))
    e = rng.standard_normal((n, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    sigma = np.exp(rng.uniform(-1.0, 1.0, n))
    delta = np.asarray(deltas, dtype=np.float64)[rng.integers(0, len(deltas), n)]
    delta[:3] = 0.0                                    # degenerate rows: accept child 0 on both
    mu_t = mu_d + (sigma * delta)[:, None] * e
    children = mu_d[:, None, :] + sigma[:, None, None] * rng.standard_normal((n, K, d))
    return children, mu_d, mu_t, sigma, rng.random((n, K + 1))


def both(children, mu_d, mu_t, sigma):
    b_np = prepare(children, mu_d, mu_t, sigma, 0)
    b_t = prepare(*(torch.from_numpy(a) for a in (children, mu_d, mu_t, sigma)), 0)
    return b_np, b_t


def assert_same(r_np, r_t, atol=1e-8):
    np.testing.assert_array_equal(r_t.accepted.numpy(), r_np.accepted)
    np.testing.assert_array_equal(r_t.child_index.numpy(), r_np.child_index)
    acc = r_np.accepted
    np.testing.assert_array_equal(r_t.states.numpy()[acc], r_np.states[acc])      # exact copies
    np.testing.assert_allclose(r_t.states.numpy(), r_np.states, atol=atol, rtol=0)
    assert 0.05 < acc.mean() < 0.98                                                # both branches ran


@pytest.mark.parametrize("deltas", [[0.8], [0.3, 0.9, 1.7, 2.5]], ids=["one_delta", "per_row"])
@pytest.mark.parametrize("spec", ["optimal", "interpolated", "uniform"])
def test_rass_kernel_same_output(deltas, spec):
    children, mu_d, mu_t, sigma, u = nodes(3000, 4, 5, deltas)
    b_np, b_t = both(children, mu_d, mu_t, sigma)
    w_np = batch_weights(spec, b_np)
    w_t = tv.rass(spec).row_weights(b_t)
    live = ~b_np.degenerate                             # degenerate rows accept child 0 whatever w
    np.testing.assert_allclose(np.broadcast_to(w_t.numpy(), (3000, 4))[live],
                               np.broadcast_to(w_np, (3000, 4))[live], atol=1e-15, rtol=0)
    r_np = kernels.rank_kernel(b_np, u[:, :3], kernels.rank_pieces(w_np))
    r_t = kernels.rank_kernel(b_t, torch.from_numpy(u[:, :3]), kernels.rank_pieces(w_t))
    assert_same(r_np, r_t)


def test_dgrs_and_rmc_kernels_same_output():
    children, mu_d, mu_t, sigma, u = nodes(3000, 4, 5, [0.2, 0.7, 1.5, 3.0])
    b_np, b_t = both(children, mu_d, mu_t, sigma)
    assert_same(kernels.dgrs_kernel(b_np, u), kernels.dgrs_kernel(b_t, torch.from_numpy(u)))
    b_np, b_t = both(children[:, :1], mu_d, mu_t, sigma)
    assert_same(kernels.rmc_kernel(b_np, u[:, 0]), kernels.rmc_kernel(b_t, torch.from_numpy(u[:, 0])),
                atol=1e-12)


def test_zero_displacement_direction_is_e1_on_both():
    children, mu_d, mu_t, sigma, _ = nodes(10, 2, 4, [1.0])
    mu_t[:3] = mu_d[:3]
    b_np, b_t = both(children, mu_d, mu_t, sigma)
    np.testing.assert_array_equal(b_t.direction.numpy()[:3], np.eye(4)[[0, 0, 0]])
    np.testing.assert_array_equal(b_np.direction[:3], np.eye(4)[[0, 0, 0]])
    np.testing.assert_allclose(b_t.s.numpy(), b_np.s, atol=1e-13, rtol=0)
