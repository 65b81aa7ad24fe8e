"""Output laws of the built-in verifiers: target law in s and in ||z_perp||^2, exact acceptance.

Fixed seeds; KS tests at level 1e-4 and acceptance within 4.5 binomial standard errors.
"""
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import log_ndtr, ndtr

import rass_theory as rt
from rass_theory import verifiers

N = 200_000


def acceptance_z(res_accepted, exact):
    n = res_accepted.size
    rate = res_accepted.mean()
    se = np.sqrt(exact * (1 - exact) / n) if 0 < exact < 1 else 1.0 / n
    return abs(rate - exact) / se


RULES = {
    "rmc": (lambda: verifiers.rmc(), 1),
    "dgrs": (lambda: verifiers.dgrs(), 4),
    "rass_optimal": (lambda: verifiers.rass(), 4),
    "rass_array": (lambda: verifiers.rass(weights=[0.4, 0.1, 0.1, 0.4]), 4),
    "rass_rejection_residual": (lambda: verifiers.rass(weights="uniform", residual="rejection"), 4),
    "rass_fresh_orthogonal": (lambda: verifiers.rass(weights=[0.0, 0.0, 0.5, 0.5], orthogonal="fresh"), 4),
    "dgrs_K2": (lambda: verifiers.dgrs(), 2),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_target_law_and_exact_acceptance(name, nodes):
    factory, K = RULES[name]
    rng = np.random.default_rng(20261130)
    delta, d = 0.5, 6
    children, mu_d, mu_t, sigma, e = nodes.build(N, K, d, delta, rng, sigma=0.8)
    v = factory()
    res = v(children, mu_d, mu_t, sigma, rng)
    nodes.assert_target_law(res.states, mu_d, sigma, e, delta)
    exact = v.expected_acceptance(K, delta)
    assert acceptance_z(res.accepted, exact) < 4.5, (res.accepted.mean(), exact)


def test_expected_acceptance_matches_public_api():
    assert verifiers.rmc().expected_acceptance(1, 0.7) == pytest.approx(rt.acceptance("rmc", 1, 0.7), rel=1e-12)
    assert verifiers.dgrs().expected_acceptance(3, 0.7) == pytest.approx(rt.acceptance("dgrs", 3, 0.7), rel=1e-12)
    w = np.array([0.1, 0.2, 0.7])
    assert verifiers.rass(weights=w).expected_acceptance(3, 0.7) == pytest.approx(
        rt.acceptance("rass", 3, 0.7, weights=w), rel=1e-12)
    # uniform rank weights select a plain draft: RMC's acceptance
    assert verifiers.rass(weights="uniform").expected_acceptance(4, 0.9) == pytest.approx(
        rt.acceptance("rmc", 1, 0.9), rel=1e-9)


def _smooth_weights(K, delta):
    """A deterministic per-row weight map (shifts mass to the top rank as delta grows)."""
    delta = np.asarray(delta, dtype=float)
    logits = np.multiply.outer(np.atleast_1d(delta), np.arange(K, dtype=float))
    w = np.exp(logits - logits.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w if np.ndim(delta) else w[0]


GROUP_DELTAS = (0.0, 1e-10, 1e-6, 0.05, 0.5, 1.5, 3.0)


@pytest.mark.parametrize("name", ["dgrs", "rass_callable", "rass_array"])
def test_per_row_deltas_give_correct_law_per_group(name, nodes):
    """One batch mixing displacements (degenerate, tiny and large) and scales: law per group."""
    rng = np.random.default_rng(7)
    K, d, m = 4, 4, 25_000
    parts = [nodes.build(m, K, d, delta, rng, sigma=0.5 + j / 4) for j, delta in enumerate(GROUP_DELTAS)]
    children = np.concatenate([p[0] for p in parts])
    mu_d = np.concatenate([p[1] for p in parts])
    mu_t = np.concatenate([p[2] for p in parts])
    sigma = np.concatenate([np.full(m, p[3]) for p in parts])
    perm = rng.permutation(children.shape[0])  # interleave the groups
    v = {"dgrs": verifiers.dgrs(), "rass_callable": verifiers.rass(weights=_smooth_weights),
         "rass_array": verifiers.rass(weights=[0.1, 0.2, 0.3, 0.4])}[name]
    res = v(children[perm], mu_d[perm], mu_t[perm], sigma[perm], rng)
    assert verifiers.check_contract(res, children[perm]) == []
    inv = np.argsort(perm)
    states, accepted = res.states[inv], res.accepted[inv]
    for j, delta in enumerate(GROUP_DELTAS):
        rows = slice(j * m, (j + 1) * m)
        _, mu_dj, _, sig_j, e_j = parts[j]
        nodes.assert_target_law(states[rows], mu_dj, sig_j, e_j, delta)
        if delta <= np.sqrt(np.finfo(float).eps):
            assert accepted[rows].all()
            continue
        if name == "dgrs":
            exact = rt.acceptance("dgrs", K, delta)
        else:
            w = _smooth_weights(K, delta) if name == "rass_callable" else np.array([0.1, 0.2, 0.3, 0.4])
            exact = rt.acceptance("rass", K, delta, weights=w)
        assert acceptance_z(accepted[rows], exact) < 4.5, (delta, accepted[rows].mean(), exact)


class TopOrFirstPolicy:
    """Test policy: the top child if its s >= t, else child 0 (drafting order).

    Selected law: ``g(s) = K phi(s) Phi(s)^(K-1)`` for ``s >= t`` and ``phi(s) Phi(t)^(K-1)``
    below; CDF ``Phi(s) Phi(t)^(K-1)`` below ``t`` and ``Phi(s)^K`` above.
    """

    def __init__(self, K, t):
        self.K, self.t = K, t

    def select(self, delta, s, rng):
        top = np.argmax(s, axis=1)
        return np.where(s[np.arange(s.shape[0]), top] >= self.t, top, 0)

    def selected_logpdf(self, delta, s):
        s = np.asarray(s, dtype=float)
        log_phi = -0.5 * s * s - 0.5 * np.log(2 * np.pi)
        above = np.log(self.K) + (self.K - 1) * log_ndtr(s)
        below = (self.K - 1) * log_ndtr(self.t)
        return log_phi + np.where(s >= self.t, above, below)

    def selected_cdf(self, delta, s):
        s = np.asarray(s, dtype=float)
        return np.where(s >= self.t, ndtr(s) ** self.K, ndtr(s) * ndtr(self.t) ** (self.K - 1))


def test_policy_verifier_is_exact_with_known_law(nodes):
    rng = np.random.default_rng(99)
    K, delta, d = 3, 0.8, 5
    pol = TopOrFirstPolicy(K, 0.4)
    children, mu_d, mu_t, sigma, e = nodes.build(N, K, d, delta, rng)
    v = verifiers.policy(pol)
    res = v(children, mu_d, mu_t, sigma, rng)
    assert verifiers.check_contract(res, children) == []
    nodes.assert_target_law(res.states, mu_d, sigma, e, delta)

    def overlap(x):
        f = stats.norm.pdf(x - delta)
        g = np.exp(pol.selected_logpdf(np.array([delta]), np.array([x])))[0]
        return min(f, g)

    exact = sum(integrate.quad(overlap, a, b, limit=200)[0] for a, b in ((-np.inf, 0.4), (0.4, np.inf)))
    assert acceptance_z(res.accepted, exact) < 4.5
    assert v.expected_acceptance(K, delta) == pytest.approx(exact, abs=1e-7)


def test_policy_verifier_per_row_deltas(nodes):
    rng = np.random.default_rng(5)
    K, d, m = 3, 3, 30_000
    deltas = (0.3, 1.2)
    parts = [nodes.build(m, K, d, delta, rng) for delta in deltas]
    children = np.concatenate([p[0] for p in parts])
    mu_d = np.concatenate([p[1] for p in parts])
    mu_t = np.concatenate([p[2] for p in parts])
    res = verifiers.policy(TopOrFirstPolicy(K, 0.0))(children, mu_d, mu_t, 1.0, rng)
    for j, delta in enumerate(deltas):
        rows = slice(j * m, (j + 1) * m)
        nodes.assert_target_law(res.states[rows], parts[j][1], 1.0, parts[j][4], delta)


def test_tiny_delta_is_not_degenerate_and_stays_exact(nodes):
    """delta = 1e-7 > sqrt(eps): the residual branch runs without dividing by zero."""
    rng = np.random.default_rng(3)
    children, mu_d, mu_t, sigma, e = nodes.build(50_000, 4, 3, 1e-7, rng)
    for v in (verifiers.rass(weights=[0.7, 0.1, 0.1, 0.1]), verifiers.dgrs()):
        res = v(children, mu_d, mu_t, sigma, rng)
        assert np.isfinite(res.states).all()
        nodes.assert_target_law(res.states, mu_d, sigma, e, 1e-7)


@pytest.mark.slow
def test_optimal_weights_per_row_use_the_interpolator(nodes):
    rng = np.random.default_rng(8)
    K, d, m = 4, 3, 40_000
    deltas = (0.2, 0.9, 2.5)
    parts = [nodes.build(m, K, d, delta, rng) for delta in deltas]
    children = np.concatenate([p[0] for p in parts])
    mu_d = np.concatenate([p[1] for p in parts])
    mu_t = np.concatenate([p[2] for p in parts])
    res = verifiers.rass()(children, mu_d, mu_t, 1.0, rng)
    interp = rt.optimize.rank_weights.optimal_weights_interpolator(K)
    for j, delta in enumerate(deltas):
        rows = slice(j * m, (j + 1) * m)
        nodes.assert_target_law(res.states[rows], parts[j][1], 1.0, parts[j][4], delta)
        exact = rt.acceptance("rass", K, delta, weights=interp(np.array([delta]))[0])
        assert acceptance_z(res.accepted[rows], exact) < 4.5
