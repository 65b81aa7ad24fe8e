"""The NumPy optimal list verifier: contract, acceptance at the bound, exact output law."""
import numpy as np
import pytest

import rass_theory as rt
from rass_theory.verifiers import check_contract, get_verifier, optimal_list


def _z(p, n):
    """Number of binomial standard errors between a count fraction and ``p``."""
    return np.sqrt(n * p * (1 - p)) / n


@pytest.mark.parametrize("K,delta", [(2, 0.5), (4, 1.0), (8, 0.25), (3, 3.0), (3, 8.0), (1, 1.0)])
def test_contract_and_acceptance(nodes, rng, K, delta):
    n, d = 40_000, 5
    children, mu_d, mu_t, sigma, e = nodes.build(n, K, d, delta, rng)
    before = [a.copy() for a in (children, mu_d, mu_t)]
    res = optimal_list()(children, mu_d, mu_t, sigma, rng)
    assert check_contract(res, children) == []
    for a, b in zip(before, (children, mu_d, mu_t)):
        assert np.array_equal(a, b)  # inputs untouched
    acc = rt.acceptance("optimal_list", K, delta)
    assert acc == pytest.approx(rt.acceptance_bound(K, delta), abs=1e-15)
    assert abs(res.accepted.mean() - acc) < 4.5 * _z(acc, n) + 1e-12
    nodes.assert_target_law(res.states, mu_d, sigma, e, delta)


def test_states_bit_equal_and_rebuilt_rows_keep_z_perp(nodes, rng):
    n, K, d, delta = 20_000, 4, 6, 2.0
    children, mu_d, mu_t, sigma, e = nodes.build(n, K, d, delta, rng)
    res = optimal_list()(children, mu_d, mu_t, sigma, rng)
    acc = res.accepted
    assert np.array_equal(res.states[acc], children[np.flatnonzero(acc), res.child_index[acc]])
    assert np.all(res.child_index[~acc] == -1)
    # rejected rows: s' lies in the residual's support [t*, inf)
    s, _ = nodes.coordinates(res.states[~acc], mu_d[~acc], sigma, e[~acc])
    assert s.min() >= rt.optimal_list_rule(K, delta).t_star - 1e-9


def test_per_row_deltas_exact_law(nodes, rng):
    """Each row its own delta (many distinct values: the vectorised solve); the standardised
    output s - delta is N(0, 1) pooled over rows, and the acceptance matches the exact mean."""
    n, K, d = 30_000, 4, 3
    delta = rng.uniform(0.0, 3.0, n)
    children, mu_d, mu_t, sigma, e = nodes.build(n, K, d, delta, rng, same_mean=False)
    res = optimal_list()(children, mu_d, mu_t, sigma, rng)
    assert check_contract(res, children) == []
    s, _ = nodes.coordinates(res.states, mu_d, sigma, e)
    from scipy import stats

    assert stats.kstest(s - delta, "norm").pvalue > 1e-4
    # exact expected acceptance on a quadrature of the (uniform) deltas
    grid = np.linspace(0, 3, 61)
    exact = np.array([rt.acceptance("optimal_list", K, float(x)) for x in grid])
    mean_exact = np.trapezoid(exact, grid) / 3.0
    # + 2e-4 covers the trapezoid error of the 61-point average (acceptance is smooth in delta)
    assert abs(res.accepted.mean() - mean_exact) < 4.5 * _z(mean_exact, n) + 2e-4


def test_few_distinct_deltas_use_cached_rules(nodes, rng):
    n, K, d = 30_000, 3, 4
    delta = np.repeat([0.25, 1.0, 2.0], n // 3)
    children, mu_d, mu_t, sigma, _e = nodes.build(n, K, d, delta, rng, same_mean=False)
    res = optimal_list()(children, mu_d, mu_t, sigma, rng)
    for v in (0.25, 1.0, 2.0):
        rows = delta == v
        acc = rt.acceptance("optimal_list", K, v)
        assert abs(res.accepted[rows].mean() - acc) < 4.5 * _z(acc, rows.sum()) + 1e-12


def test_degenerate_rows_accept_child0(nodes, rng):
    children, mu_d, mu_t, sigma, _e = nodes.build(100, 3, 4, 0.0, rng)
    res = optimal_list()(children, mu_d, mu_t, sigma, rng)
    assert res.accepted.all() and np.all(res.child_index == 0)


def test_float32_and_fresh_orthogonal(nodes, rng):
    children, mu_d, mu_t, sigma, _e = nodes.build(5000, 4, 5, 1.5, rng, dtype=np.float32)
    res = optimal_list(orthogonal="fresh")(children, mu_d, mu_t, sigma, rng)
    assert res.states.dtype == np.float32
    assert check_contract(res, children) == []


def test_registry_and_bad_arguments():
    assert isinstance(get_verifier("optimal_list"), rt.verifiers.OptimalListVerifier)
    assert isinstance(get_verifier("Optimal-List"), rt.verifiers.OptimalListVerifier)
    assert "optimal_list" in rt.verifiers.VERIFIER_NAMES
    with pytest.raises(ValueError, match="orthogonal"):
        optimal_list(orthogonal="other")
    v = optimal_list()
    with pytest.raises(ValueError, match="delta"):
        v.expected_acceptance(4, -1.0)
    with pytest.raises(ValueError, match="K"):
        v.expected_acceptance(0, 1.0)
    assert v.expected_acceptance(4, 0.5) == rt.acceptance_bound(4, 0.5)


def test_speculative_sample_resolves_name():
    from rass_theory.diffusion._contract import resolve_verifier

    assert isinstance(resolve_verifier("optimal_list", 4), rt.verifiers.OptimalListVerifier)


@pytest.mark.slow
@pytest.mark.parametrize("K,delta", [(4, 0.5), (2, 0.25), (8, 1.0)])
def test_harness_defaults(K, delta):
    rep = rt.check_exactness(optimal_list(), K=K, delta=delta, rng=0)
    assert rep.passed, str(rep)


# ------------------------------------------------------------------------------------------------
# large K and delta (issue 18): K = 128, delta = 12 and per-row deltas spanning [1e-3, 40]
# ------------------------------------------------------------------------------------------------

def test_large_K_large_delta(nodes, rng):
    """K = 128, delta = 12 (the rule could not be built there before): runs, exact output law, and
    the acceptance alpha* = 2.07e-8 within 4.5 SE (with n = 4000 one acceptance already fails:
    false-fail rate P(Bin(4000, 2.07e-8) >= 1) = 8e-5)."""
    n, K, d, delta = 4000, 128, 4, 12.0
    children, mu_d, mu_t, sigma, e = nodes.build(n, K, d, delta, rng)
    res = optimal_list()(children, mu_d, mu_t, sigma, rng)
    assert check_contract(res, children) == []
    acc = rt.acceptance("optimal_list", K, delta)
    assert acc == pytest.approx(2.065456119e-8, rel=1e-8)
    assert abs(res.accepted.mean() - acc) < 4.5 * _z(acc, n) + 1e-12
    nodes.assert_target_law(res.states, mu_d, sigma, e, delta)


@pytest.mark.parametrize("K", [2, 128])
def test_per_row_deltas_spanning_the_grid(nodes, rng, K):
    """Per-row deltas log-uniform on [1e-3, 40] (every row distinct: the vectorised, fully
    checked solve); s - delta ~ N(0, 1) pooled, and the acceptance count within 4.5 SE of the
    sum of the rows' exact acceptances (SE = sqrt(sum p (1 - p)), independent rows)."""
    from scipy import stats

    from rass_theory.optimize.list_rule import solve_list_rule

    n, d = 8000, 3
    delta = np.exp(rng.uniform(np.log(1e-3), np.log(40.0), n))
    children, mu_d, mu_t, sigma, e = nodes.build(n, K, d, delta, rng, same_mean=False)
    res = optimal_list()(children, mu_d, mu_t, sigma, rng)
    assert check_contract(res, children) == []
    s, _ = nodes.coordinates(res.states, mu_d, sigma, e)
    assert stats.kstest(s - delta, "norm").pvalue > 1e-4
    p = solve_list_rule(K, delta).certify().acceptance
    for i in (0, n // 2, n - 1):  # the vectorised acceptances are the scalar rule's
        assert p[i] == pytest.approx(rt.acceptance("optimal_list", K, float(delta[i])), abs=1e-15)
    assert abs(res.accepted.sum() - p.sum()) < 4.5 * np.sqrt(np.sum(p * (1 - p)))
