"""from_node_rule adapter, get_verifier names, the threshold verifier, and the residual tables."""
import numpy as np
import pytest

import rass_theory as rt
from rass_theory import verifiers
from rass_theory.verifiers import check_contract


def rmc_one_node(children, mu_draft, mu_target, sigma, rng):
    """RMC written for one node (the prototype style from_node_rule adapts)."""
    diff = mu_target - mu_draft
    delta = np.linalg.norm(diff) / sigma
    if delta == 0:
        return children[0], 0
    e = diff / (delta * sigma)
    s = (children[0] - mu_draft) @ e / sigma
    if np.log(rng.random()) < min(0.0, s * delta - delta * delta / 2):
        return children[0], 0
    return children[0] + sigma * (delta - 2 * s) * e, -1


class TestFromNodeRule:
    def test_adapted_rule_is_exact_and_keeps_contract(self, nodes):
        rng = np.random.default_rng(4)
        children, mu_d, mu_t, sigma, e = nodes.build(20_000, 1, 3, 0.9, rng)
        v = verifiers.from_node_rule(rmc_one_node)
        res = v(children, mu_d, mu_t, sigma, rng)
        assert check_contract(res, children) == []
        nodes.assert_target_law(res.states, mu_d, sigma, e, 0.9)
        exact = rt.acceptance("rmc", 1, 0.9)
        assert abs(res.accepted.mean() - exact) / np.sqrt(exact * (1 - exact) / 20_000) < 4.5
        assert "rmc_one_node" in repr(v)

    def test_lying_rule_is_caught_by_the_contract_checker(self, nodes, rng):
        children, mu_d, mu_t, sigma, _ = nodes.build(50, 2, 3, 0.5, rng)

        def liar(ch, md, mt, sig, g):
            return ch[0] + 1e-3, 1  # claims child 1, returns something else

        res = verifiers.from_node_rule(liar)(children, mu_d, mu_t, sigma, rng)
        assert [i.kind for i in check_contract(res, children)] == ["not_a_copy"]

    def test_bad_returns_name_the_rule(self, nodes, rng):
        children, mu_d, mu_t, sigma, _ = nodes.build(5, 2, 3, 0.5, rng)
        with pytest.raises(ValueError, match="shape"):
            verifiers.from_node_rule(lambda *a: (np.zeros(2), 0), name="short")(children, mu_d, mu_t, sigma, rng)
        with pytest.raises(ValueError, match=r"child_index 5"):
            verifiers.from_node_rule(lambda c, *a: (c[0], 5))(children, mu_d, mu_t, sigma, rng)
        with pytest.raises(TypeError, match="must return"):
            verifiers.from_node_rule(lambda *a: None)(children, mu_d, mu_t, sigma, rng)
        with pytest.raises(TypeError, match="callable"):
            verifiers.from_node_rule(3)


VERIFIER_SPELLINGS = (" Optimal-List ", "D_GRS", "THRESHOLD")


class TestGetVerifier:
    @pytest.mark.parametrize("name, cls", [("rmc", verifiers.RMCVerifier), ("DGRS", verifiers.DGRSVerifier),
                                           ("rass", verifiers.RASSVerifier), ("d-grs", verifiers.DGRSVerifier),
                                           ("resample", verifiers.ResampleVerifier),
                                           ("threshold", verifiers.ThresholdVerifier),
                                           (" Optimal-List ", verifiers.OptimalListVerifier)])
    def test_names(self, name, cls):
        assert isinstance(verifiers.get_verifier(name, K=1 if name == "rmc" else 4), cls)

    def test_rule_key_is_the_samplers_reading_too(self):
        from rass_theory.diffusion._contract import resolve_verifier, verifier_name

        assert [verifiers.rule_key(n) for n in VERIFIER_SPELLINGS] == ["optimallist", "dgrs", "threshold"]
        assert [verifier_name(n) for n in VERIFIER_SPELLINGS] == ["optimallist", "dgrs", "threshold"]
        # every spelling of "threshold" is the samplers' snapped policy (it used to need exactly "threshold")
        assert isinstance(resolve_verifier("Thres_hold", 4), verifiers.PolicyVerifier)

    def test_callable_passes_through(self):
        def mine(children, mu_draft, mu_target, sigma, rng):
            return None

        assert verifiers.get_verifier(mine) is mine

    def test_errors(self):
        with pytest.raises(ValueError, match="rmc.*K = 1"):
            verifiers.get_verifier("rmc", K=4)
        with pytest.raises(ValueError, match="one of"):
            verifiers.get_verifier("greedy")
        with pytest.raises(TypeError, match="rule name"):
            verifiers.get_verifier(3)
        with pytest.raises(ValueError, match="K"):
            verifiers.get_verifier("rass", K=0)


def test_threshold_verifier_with_fixed_policy(nodes):
    """Threshold-rank policy (top child if s >= t, else a rank): exact, acceptance as computed."""
    rng = np.random.default_rng(12)
    K, delta, t, w = 4, 1.0, 1.3, [0.0, 0.3, 0.0, 0.7]
    children, mu_d, mu_t, sigma, e = nodes.build(150_000, K, 4, delta, rng)
    v = verifiers.threshold(t=t, weights=w, K=K)
    res = v(children, mu_d, mu_t, sigma, rng)
    assert check_contract(res, children) == []
    nodes.assert_target_law(res.states, mu_d, sigma, e, delta)
    from rass_theory.optimize.policies import threshold_acceptance

    exact = threshold_acceptance(K, delta, t, w)
    assert v.expected_acceptance(K, delta) == pytest.approx(exact, abs=1e-8)
    assert abs(res.accepted.mean() - exact) / np.sqrt(exact * (1 - exact) / 150_000) < 4.5


def test_threshold_arguments():
    with pytest.raises(ValueError, match="together"):
        verifiers.threshold(t=0.5)
    with pytest.raises(TypeError, match="policy"):
        verifiers.policy(42)


class TestResidualTables:
    """The cached per-law samplers reproduce the exact modules' inverse CDFs."""

    @pytest.mark.parametrize("weights, delta", [([0.25, 0.25, 0.25, 0.25], 0.5), ([0.1, 0.2, 0.3, 0.4], 0.5),
                                                ([0.0, 0.0, 0.3, 0.7], 1.5), ([0.7, 0.1, 0.1, 0.1], 1e-6),
                                                ([0.1, 0.0, 0.0, 0.9], 0.05), ([1.0], 0.8)])
    def test_rass_table_matches_sample_residual(self, weights, delta, rng):
        from rass_theory.exact import batch as eb
        from rass_theory.exact import laws

        w = np.asarray(weights)
        u = rng.random(400)
        law = laws.rank_law(w)
        np.testing.assert_allclose(laws.sample(law, np.full(400, delta), u),
                                   eb.sample_residual(w, np.full(400, delta), u, spacing=eb.grid_spacing(w.size)),
                                   atol=2e-12, rtol=0)
        intervals = eb.residual_intervals(w, np.array([delta]))
        intervals = intervals[0] if isinstance(intervals, tuple) else intervals
        assert laws.residual_mass(law, np.array([delta]))[0] == pytest.approx(intervals.total[0], rel=1e-10)

    @pytest.mark.parametrize("K, delta", [(4, 0.5), (2, 0.01), (3, 2.0), (1, 0.3), (8, 4.0)])
    def test_dgrs_table_matches_closed_form_sampler(self, K, delta, rng):
        from rass_theory.exact import dgrs as ed
        from rass_theory.exact.laws import DGRSLaw

        u = rng.random(400)
        np.testing.assert_allclose(DGRSLaw(K, np.full(400, delta)).sample(u),
                                   ed.batch_sample_final_residual(K, np.full(400, delta), u), atol=2e-12, rtol=0)

    @pytest.mark.parametrize("backend", ["numpy", "torch"])
    def test_log_rank_ratio_matches_exact_module(self, rng, backend):
        """The shared kernel's log(g_w/phi) agrees with the exact engine on both back ends."""
        from rass_theory.backend import get_backend
        from rass_theory.exact import batch as eb
        from rass_theory.verifiers.kernels import log_rank_ratio

        s = np.linspace(-30, 30, 601)
        w = rng.dirichlet(np.ones(6), size=601)
        w[::7, 2] = 0.0                                     # zero weights: -inf terms
        w /= w.sum(axis=1, keepdims=True)
        log_phi = -0.5 * s * s - 0.5 * np.log(2 * np.pi)
        ref = eb.selected_logpdf(w, np.zeros(601), s) - log_phi
        if backend == "torch":
            torch = pytest.importorskip("torch")
            w, s = torch.tensor(w), torch.tensor(s)
        got = log_rank_ratio(get_backend(s), w, s)
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12, atol=1e-12)
