"""One call, one law: every rule gives the same output on NumPy and torch for the same uniforms.

Each case builds the node batch on both back ends (``_core.prepare``), feeds the *same* uniforms
to the verifier's ``run`` (the one class per rule serves both), and compares decisions and
states: every accept/reject decision and every copied child agree exactly; corrected states agree
to the residual samplers' tolerance.  All five rules (rmc, dgrs, rass, threshold, optimal_list)
plus resample, on single-delta and per-row-delta batches.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rass_theory import verifiers  # noqa: E402
from rass_theory.verifiers._core import prepare  # noqa: E402

DELTAS = {"one_delta": [0.8], "per_row": [0.3, 0.9, 1.7, 2.5]}


def nodes(n, K, d, deltas, seed=0):
    rng = np.random.default_rng(seed)
    mu_d = rng.standard_normal((n, d))
    e = rng.standard_normal((n, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    sigma = np.exp(rng.uniform(-1.0, 1.0, n))
    delta = np.asarray(deltas, dtype=np.float64)[rng.integers(0, len(deltas), n)]
    if len(deltas) > 1:
        delta *= np.exp(rng.uniform(-0.05, 0.05, n))       # continuous per-row deltas
    delta[:3] = 0.0                                        # degenerate rows: accept child 0 on both
    mu_t = mu_d + (sigma * delta)[:, None] * e
    children = mu_d[:, None, :] + sigma[:, None, None] * rng.standard_normal((n, K, d))
    return children, mu_d, mu_t, sigma, rng.random((n, K + 2))


def both(children, mu_d, mu_t, sigma):
    b_np = prepare(children, mu_d, mu_t, sigma, 0)
    b_t = prepare(*(torch.from_numpy(a) for a in (children, mu_d, mu_t, sigma)), 0)
    return b_np, b_t


def assert_same(r_np, r_t, atol=1e-8, both_branches=True):
    np.testing.assert_array_equal(r_t.accepted.numpy(), r_np.accepted)
    np.testing.assert_array_equal(r_t.child_index.numpy(), r_np.child_index)
    acc = r_np.accepted
    np.testing.assert_array_equal(r_t.states.numpy()[acc], r_np.states[acc])      # exact copies
    np.testing.assert_allclose(r_t.states.numpy(), r_np.states, atol=atol, rtol=0)
    if both_branches:
        assert 0.05 < acc.mean() < 0.98                                            # both branches ran


def run_both(v, deltas, K=4, n=3000, m=3, d=5, **kw):
    children, mu_d, mu_t, sigma, u = nodes(n, K, d, deltas)
    b_np, b_t = both(children, mu_d, mu_t, sigma)
    return v.run(b_np, u[:, :m], **kw.get("np", {})), v.run(b_t, torch.from_numpy(u[:, :m]), **kw.get("t", {}))


@pytest.mark.parametrize("deltas", list(DELTAS.values()), ids=list(DELTAS))
@pytest.mark.parametrize("spec", ["optimal", "interpolated", "uniform"])
def test_rass(deltas, spec):
    children, mu_d, mu_t, sigma, u = nodes(3000, 4, 5, deltas)
    b_np, b_t = both(children, mu_d, mu_t, sigma)
    v = verifiers.rass(spec)
    live = ~b_np.degenerate                             # degenerate rows accept child 0 whatever w
    np.testing.assert_allclose(np.broadcast_to(v.row_weights(b_t).numpy(), (3000, 4))[live],
                               np.broadcast_to(v.row_weights(b_np), (3000, 4))[live], atol=1e-15, rtol=0)
    assert_same(v.run(b_np, u[:, :3]), v.run(b_t, torch.from_numpy(u[:, :3])))


@pytest.mark.parametrize("deltas", list(DELTAS.values()), ids=list(DELTAS))
def test_dgrs(deltas):
    assert_same(*run_both(verifiers.dgrs(), deltas, m=5))


@pytest.mark.parametrize("deltas", list(DELTAS.values()), ids=list(DELTAS))
def test_rmc(deltas):
    assert_same(*run_both(verifiers.rmc(), deltas, K=1, m=1), atol=1e-12)


@pytest.mark.parametrize("deltas", list(DELTAS.values()), ids=list(DELTAS))
@pytest.mark.parametrize("make", [lambda: verifiers.threshold(),
                                  lambda: verifiers.threshold(t=0.6, weights=[0.1, 0.2, 0.3, 0.4])],
                         ids=["table", "fixed"])
def test_threshold(deltas, make):
    assert_same(*run_both(make(), deltas))


def test_threshold_per_row_t():
    children, mu_d, mu_t, sigma, u = nodes(3000, 4, 5, DELTAS["per_row"])
    b_np, b_t = both(children, mu_d, mu_t, sigma)
    t = np.random.default_rng(4).uniform(-0.5, 1.5, 3000)
    w = [0.1, 0.2, 0.3, 0.4]
    assert_same(verifiers.threshold(t=t, weights=w).run(b_np, u[:, :3]),
                verifiers.threshold(t=torch.from_numpy(t), weights=w).run(b_t, torch.from_numpy(u[:, :3])))


class Stream:
    """The same uniforms, in the same order, for both back ends' fake-key draws."""

    def __init__(self, seed, to=None):
        self.rng, self.to = np.random.default_rng(seed), to

    def __call__(self, shape):
        u = self.rng.random(shape)
        return u if self.to is None else self.to(u)


@pytest.mark.parametrize("deltas", list(DELTAS.values()), ids=list(DELTAS))
def test_optimal_list(deltas):
    r_np, r_t = run_both(verifiers.optimal_list(), deltas, m=3,
                         np={"draw": Stream(9)}, t={"draw": Stream(9, torch.from_numpy)})
    assert_same(r_np, r_t)


def test_resample():
    children, mu_d, mu_t, sigma, _ = nodes(500, 2, 4, [1.0])
    v = verifiers.resample()
    r_np = v(children, mu_d, mu_t, sigma, 3)
    r_t = v(*(torch.from_numpy(a) for a in (children, mu_d, mu_t, sigma)), 3)
    for r in (r_np, r_t.numpy()):
        assert not r.accepted.any() and (r.child_index == -1).all()
    z_np = (r_np.states - mu_t) / sigma[:, None]
    z_t = (r_t.states.numpy() - mu_t) / sigma[:, None]
    np.testing.assert_allclose(z_np, np.random.default_rng(3).standard_normal((500, 4)), atol=1e-12)
    np.testing.assert_allclose(z_t, torch.randn(500, 4, generator=torch.Generator().manual_seed(3),
                                                dtype=torch.float64).numpy(), atol=1e-12)


def test_zero_displacement_direction_is_e1_on_both():
    children, mu_d, mu_t, sigma, _ = nodes(10, 2, 4, [1.0])
    mu_t[:3] = mu_d[:3]
    b_np, b_t = both(children, mu_d, mu_t, sigma)
    np.testing.assert_array_equal(b_t.direction.numpy()[:3], np.eye(4)[[0, 0, 0]])
    np.testing.assert_array_equal(b_np.direction[:3], np.eye(4)[[0, 0, 0]])
    np.testing.assert_allclose(b_t.s.numpy(), b_np.s, atol=1e-13, rtol=0)
