"""Every built-in verifier: contract, dtype, degenerate rows, reproducibility, row independence, bad input."""
import numpy as np
import pytest

from rass_theory import verifiers
from rass_theory.verifiers import check_contract

K4_RULES = {
    "dgrs": lambda: verifiers.dgrs(),
    "rass": lambda: verifiers.rass(),
    "rass_uniform": lambda: verifiers.rass(weights="uniform"),
    "rass_array": lambda: verifiers.rass(weights=[0.1, 0.2, 0.3, 0.4]),
    "rass_callable": lambda: verifiers.rass(weights=lambda K, delta: np.full(K, 1.0 / K)),
    "rass_rejection": lambda: verifiers.rass(residual="rejection"),
    "rass_fresh": lambda: verifiers.rass(orthogonal="fresh"),
    "resample": lambda: verifiers.resample(),
}
ALL_RULES = dict(K4_RULES, rmc=lambda: verifiers.rmc())


def k_of(name):
    return 1 if name == "rmc" else 4


@pytest.mark.parametrize("name", sorted(ALL_RULES))
class TestContract:
    def test_shapes_dtypes_and_copies(self, name, nodes, rng):
        children, mu_d, mu_t, sigma, _ = nodes.build(500, k_of(name), 5, 0.8, rng, sigma=0.7, same_mean=False)
        res = ALL_RULES[name]()(children, mu_d, mu_t, sigma, rng)
        assert res.states.shape == (500, 5) and res.states.dtype == np.float64
        assert res.accepted.shape == (500,) and res.accepted.dtype == np.bool_
        assert res.child_index.dtype.kind == "i"
        assert check_contract(res, children) == []
        if name != "resample":
            assert 0 < res.n_accepted < 500

    def test_float32_is_preserved(self, name, nodes, rng):
        children, mu_d, mu_t, sigma, _ = nodes.build(300, k_of(name), 4, 0.8, rng, dtype=np.float32)
        res = ALL_RULES[name]()(children, mu_d, mu_t, sigma, rng)
        assert res.states.dtype == np.float32
        assert check_contract(res, children) == []

    def test_same_seed_same_result(self, name, nodes, rng):
        children, mu_d, mu_t, sigma, _ = nodes.build(400, k_of(name), 3, 0.6, rng)
        v = ALL_RULES[name]()
        a = v(children, mu_d, mu_t, sigma, np.random.default_rng(7))
        b = v(children, mu_d, mu_t, sigma, np.random.default_rng(7))
        np.testing.assert_array_equal(a.states, b.states)
        np.testing.assert_array_equal(a.child_index, b.child_index)

    def test_degenerate_rows_accept_child_zero(self, name, nodes, rng):
        if name == "resample":
            pytest.skip("resample never accepts")
        deltas = np.array([0.0, 1e-10, 0.0, 1e-12, 0.9, 0.0])
        children, mu_d, mu_t, sigma, _ = nodes.build(6, k_of(name), 3, deltas, rng, same_mean=False)
        res = ALL_RULES[name]()(children, mu_d, mu_t, sigma, rng)
        degenerate = deltas <= np.sqrt(np.finfo(float).eps)
        assert res.accepted[degenerate].all() and (res.child_index[degenerate] == 0).all()
        np.testing.assert_array_equal(res.states[degenerate], children[degenerate, 0])
        assert check_contract(res, children) == []


ROW_INDEPENDENT = ["rmc", "dgrs", "rass", "rass_uniform", "rass_array", "resample"]


@pytest.mark.parametrize("name", ROW_INDEPENDENT)
def test_rows_are_independent(name, nodes, rng):
    """Changing the other rows' inputs leaves a row's output unchanged (same seed, same n)."""
    K = k_of(name)
    children, mu_d, mu_t, sigma, _ = nodes.build(200, K, 4, 0.7, rng)
    other, _, _, _, _ = nodes.build(200, K, 4, 0.7, rng)
    keep = np.arange(200) % 3 == 0
    mixed = np.where(keep[:, None, None], children, other)
    v = ALL_RULES[name]()
    a = v(children, mu_d, mu_t, sigma, np.random.default_rng(11))
    b = v(mixed, mu_d, mu_t, sigma, np.random.default_rng(11))
    np.testing.assert_array_equal(a.states[keep], b.states[keep])
    np.testing.assert_array_equal(a.child_index[keep], b.child_index[keep])


def test_rows_independent_of_other_rows_delta(nodes, rng):
    """D-GRS with per-row deltas: a row's output does not depend on other rows' displacements."""
    deltas = np.full(300, 0.5)
    children, mu_d, mu_t, sigma, e = nodes.build(300, 4, 4, deltas, rng, same_mean=False)
    mu_t2 = mu_t.copy()
    mu_t2[1::2] = mu_d[1::2] + 1.7 * e[1::2]
    a = verifiers.dgrs()(children, mu_d, mu_t, sigma, np.random.default_rng(3))
    b = verifiers.dgrs()(children, mu_d, mu_t2, sigma, np.random.default_rng(3))
    np.testing.assert_array_equal(a.states[::2], b.states[::2])


class TestBadInput:
    @pytest.fixture
    def node(self, nodes, rng):
        return nodes.build(10, 4, 3, 0.5, rng)

    def test_children_ndim(self, node, rng):
        children, mu_d, mu_t, sigma, _ = node
        with pytest.raises(ValueError, match="children"):
            verifiers.rass()(children[:, 0], mu_d, mu_t, sigma, rng)

    def test_mean_shapes(self, node, rng):
        children, mu_d, mu_t, sigma, _ = node
        with pytest.raises(ValueError, match="mu_draft"):
            verifiers.dgrs()(children, mu_d[:5], mu_t, sigma, rng)
        with pytest.raises(ValueError, match="mu_target"):
            verifiers.dgrs()(children, mu_d, mu_t[:, :2], sigma, rng)

    def test_non_finite_children(self, node, rng):
        children, mu_d, mu_t, sigma, _ = node
        children = children.copy()
        children[3, 1, 2] = np.nan
        with pytest.raises(ValueError, match="children must be finite"):
            verifiers.rass()(children, mu_d, mu_t, sigma, rng)

    def test_sigma(self, node, rng):
        children, mu_d, mu_t, _, _ = node
        with pytest.raises(ValueError, match="sigma"):
            verifiers.rass()(children, mu_d, mu_t, -1.0, rng)
        with pytest.raises(ValueError, match="sigma"):
            verifiers.rass()(children, mu_d, mu_t, np.ones(3), rng)

    def test_rmc_needs_one_child(self, node, rng):
        children, mu_d, mu_t, sigma, _ = node
        with pytest.raises(ValueError, match="K = 1"):
            verifiers.rmc()(children, mu_d, mu_t, sigma, rng)

    def test_weights_length_must_match_K(self, node, rng):
        children, mu_d, mu_t, sigma, _ = node
        with pytest.raises(ValueError, match="children must have K = 3"):
            verifiers.rass(weights=[0.2, 0.3, 0.5])(children, mu_d, mu_t, sigma, rng)

    def test_bad_weights_and_options(self):
        with pytest.raises(ValueError, match="weights must sum to 1"):
            verifiers.rass(weights=[0.5, 0.6])
        with pytest.raises(ValueError, match="weights must be 'optimal'"):
            verifiers.rass(weights="best")
        with pytest.raises(ValueError, match="residual"):
            verifiers.rass(residual="newton")
        with pytest.raises(ValueError, match="orthogonal"):
            verifiers.rass(orthogonal="none")

    def test_rng_type(self, node):
        children, mu_d, mu_t, sigma, _ = node
        with pytest.raises(TypeError, match="rng"):
            verifiers.rass()(children, mu_d, mu_t, sigma, "seed")


EDGE_RULES = dict(K4_RULES, threshold=lambda: verifiers.threshold(), optimal_list=lambda: verifiers.optimal_list())


@pytest.mark.parametrize("n, K, d", [(0, 4, 3), (0, 1, 3), (0, 9, 2), (7, 4, 1), (5, 1, 2)])
@pytest.mark.parametrize("name", ["dgrs", "rass_uniform", "rass_array", "resample", "threshold", "optimal_list"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_edge_shapes(name, n, K, d, backend, rng):
    """Empty batches (for every K: K = 1 and K > 8 once made the threshold rule stack an empty
    list of policies), one dimension (no orthogonal part) and a single child, on both back ends."""
    if name == "rass_array" and K != 4:
        pytest.skip("fixed weights have length 4")
    children = rng.standard_normal((n, K, d))
    mu_d = np.zeros((n, d))
    mu_t = mu_d.copy()
    mu_t[:, 0] = 0.5
    gen = rng
    if backend == "torch":
        torch = pytest.importorskip("torch")
        children, mu_d, mu_t = (torch.from_numpy(x) for x in (children, mu_d, mu_t))
        gen = torch.Generator().manual_seed(0)
    res = EDGE_RULES[name]()(children, mu_d, mu_t, 1.0, gen)
    assert tuple(res.states.shape) == (n, d)
    assert check_contract(res, children) == []


@pytest.mark.slow
def test_get_verifier_threshold_uses_the_optimal_policy(nodes):
    import rass_theory as rt

    rng = np.random.default_rng(1)
    children, mu_d, mu_t, sigma, e = nodes.build(100_000, 4, 3, 1.0, rng)
    v = verifiers.get_verifier("threshold", K=4)
    res = v(children, mu_d, mu_t, sigma, rng)
    nodes.assert_target_law(res.states, mu_d, sigma, e, 1.0)
    exact = rt.acceptance("threshold", 4, 1.0)
    assert abs(res.accepted.mean() - exact) / np.sqrt(exact * (1 - exact) / 100_000) < 4.5
