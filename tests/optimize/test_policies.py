"""Tests of value-aware selection policies (proofs/P8-value-aware-policies.md)."""
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from rass_theory.optimize.policies import (
    RankPolicy,
    SelectionPolicy,
    ThresholdRankPolicy,
    TwoLevelThresholdPolicy,
    optimal_threshold_policy,
    threshold_acceptance,
)
from rass_theory.optimize.rank_weights import optimal_rank_weights


POLICIES = [
    RankPolicy([0.1, 0.2, 0.7]),
    ThresholdRankPolicy(3, 0.4, [0.5, 0.1, 0.4]),
    ThresholdRankPolicy(4, -0.3, [0.0, 0.6, 0.0, 0.4]),
    ThresholdRankPolicy(3, np.inf, [0.2, 0.3, 0.5]),
    TwoLevelThresholdPolicy(3, 1.1, 0.2, [0.3, 0.3, 0.4], [0.1, 0.2, 0.7]),
]


def _breaks(policy):
    if isinstance(policy, TwoLevelThresholdPolicy):
        return [policy.t2, policy.t1]
    t = getattr(policy, "t", np.inf)
    return [t] if np.isfinite(t) else []


class TestValidation:
    def test_bad_weights(self):
        with pytest.raises(ValueError, match="weights"):
            ThresholdRankPolicy(3, 0.0, [0.5, 0.5])
        with pytest.raises(ValueError, match="weights"):
            RankPolicy([0.5, 0.6])

    def test_bad_threshold(self):
        with pytest.raises(ValueError, match="t must"):
            ThresholdRankPolicy(3, np.nan, [1 / 3] * 3)
        with pytest.raises(ValueError, match="t2 must be < t1"):
            TwoLevelThresholdPolicy(3, 0.0, 0.5, [1 / 3] * 3, [1 / 3] * 3)
        with pytest.raises(ValueError, match="weights2"):
            TwoLevelThresholdPolicy(3, 1.0, 0.5, [1 / 3] * 3, [0.5, 0.5])

    def test_bad_children_shape(self):
        with pytest.raises(ValueError, match="shape"):
            RankPolicy([0.5, 0.5]).select(np.zeros((4, 3)), np.zeros(4), 0)


@pytest.mark.parametrize("policy", POLICIES)
class TestSelectedLaw:
    def test_protocol(self, policy):
        assert isinstance(policy, SelectionPolicy)

    def test_density_integrates_to_one_and_matches_cdf(self, policy):
        pdf = lambda x: float(np.exp(policy.selected_logpdf(np.array([0.0]), np.array([x]))[0]))
        brk = _breaks(policy)
        total = sum(quad(pdf, a, b, limit=200)[0] for a, b in
                    zip([-np.inf] + brk, brk + [np.inf]))
        assert total == pytest.approx(1.0, abs=1e-9)
        for x in (-1.0, 0.2, 1.3):
            pts = [p for p in brk if p < x]
            mass = sum(quad(pdf, a, b, limit=200)[0] for a, b in zip([-np.inf] + pts, pts + [x]))
            cdf = policy.selected_cdf(np.array([0.0]), np.array([x]))[0]
            assert cdf == pytest.approx(mass, abs=1e-9)

    def test_broadcast_rows(self, policy):
        s = np.array([[-1.0, 0.0, 1.0], [0.5, 0.6, 0.7]])
        out = policy.selected_logpdf(np.array([0.3, 0.9]), s)
        assert out.shape == (2, 3)
        np.testing.assert_allclose(out[1, 1], policy.selected_logpdf(np.array([0.9]), np.array([0.6]))[0])

    def test_monte_carlo_histogram(self, policy):
        # selected child of K iid N(0,1) children: binned frequencies vs the exact CDF,
        # each bin within 4.5 standard errors (20 bins; false-fail probability < 1e-4)
        rng = np.random.default_rng(20261130)
        n = 200_000
        s = rng.standard_normal((n, policy.K))
        idx = policy.select(np.zeros(n), s, rng)
        x = s[np.arange(n), idx]
        edges = np.concatenate([[-np.inf], np.quantile(x, np.linspace(0.05, 0.95, 19)), [np.inf]])
        cdf = policy.selected_cdf(np.zeros(edges.size), edges[:, None])[:, 0]
        cdf[0], cdf[-1] = 0.0, 1.0
        p = np.diff(cdf)
        counts = np.histogram(x, bins=edges)[0]
        z = (counts - n * p) / np.sqrt(n * p * (1 - p))
        assert np.max(np.abs(z)) < 4.5

    def test_exactness_identity(self, policy, grid_bound):
        # P8.2: accepted part min(f, g) plus TV * residual (f - g)_+ / TV equals f
        delta = 0.8
        s = np.linspace(-5, 6, 2001)
        g = np.exp(policy.selected_logpdf(np.zeros(s.size), s))
        f = norm.pdf(s - delta)
        acc = policy.acceptance(delta)
        tv = 1 - acc
        residual = np.clip(f - g, 0, None) / tv
        np.testing.assert_allclose(g * np.minimum(1, f / g) + tv * residual, f, atol=1e-15)
        # and the exact acceptance equals int min(f, g)
        brk = _breaks(policy)
        pdf = lambda x: float(np.exp(policy.selected_logpdf(np.array([0.0]), np.array([x]))[0]))
        m = sum(quad(lambda x: min(norm.pdf(x - delta), pdf(x)), a, b, limit=400)[0]
                for a, b in zip([-np.inf] + brk, brk + [np.inf]))
        assert acc == pytest.approx(m, abs=1e-8)
        assert acc <= grid_bound(policy.K, delta) + 1e-12


class TestOptimalThreshold:
    def test_beats_rass_and_respects_bound(self, grid_bound):
        res = optimal_threshold_policy(2, 1.0, n_grid=9, xtol=1e-3)
        rass = optimal_rank_weights(2, 1.0).acceptance
        assert res.acceptance >= rass - 1e-12
        assert res.acceptance <= grid_bound(2, 1.0) + 1e-9
        assert res.acceptance == pytest.approx(
            threshold_acceptance(2, 1.0, res.t, res.weights), abs=1e-12)
        assert isinstance(res.policy, ThresholdRankPolicy)

    def test_threshold_acceptance_helper_agrees(self):
        pol = ThresholdRankPolicy(3, 0.7, [0.2, 0.3, 0.5])
        assert threshold_acceptance(3, 0.9, 0.7, [0.2, 0.3, 0.5]) == pol.acceptance(0.9)

    def test_rank_policy_acceptance_is_rass(self):
        res = optimal_rank_weights(3, 0.6)
        assert RankPolicy(res.weights).acceptance(0.6) == pytest.approx(res.acceptance, abs=1e-14)

    def test_concave_upper_bound_bounds_a_concave_maximum(self):
        from rass_theory.optimize.policies import _concave_upper_bound

        rng = np.random.default_rng(7)
        for _ in range(300):
            c, m, tstar = rng.uniform(0.01, 3), rng.normal(), rng.uniform(-1, 2)
            f = lambda x: m - c * (x - tstar) ** 2
            xs = np.sort(np.concatenate([[-1.0, 2.0], rng.uniform(-1, 2, rng.integers(1, 6))]))
            ub = _concave_upper_bound(xs, f(xs))
            assert ub >= m - 1e-12
        # tight on a sampled tent's peak neighbourhood; infinite with too few chords
        xs = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
        assert _concave_upper_bound(xs, -np.abs(xs - 2.0)) == pytest.approx(0.0)
        assert _concave_upper_bound(xs, -np.abs(xs - 2.5)) == pytest.approx(0.0)
        assert _concave_upper_bound([0.0, 1.0], [0.0, 1.0]) == np.inf

    def test_refine_max_finds_maximum_and_stops_on_flat_top(self):
        from rass_theory.optimize.policies import _refine_max

        calls = {}

        def a(t):
            calls[t] = -(t - 0.3) ** 2
            return calls[t]

        _refine_max(a, -1.0, 1.0, 1e-7, 0.0, lambda: calls, lambda: max(calls.values()))
        assert abs(max(calls, key=calls.get) - 0.3) < 1e-6
        flat = {}

        def b(t):
            flat[t] = 1.0
            return 1.0

        _refine_max(b, -1.0, 1.0, 1e-9, 1e-12, lambda: flat, lambda: 1.0)
        assert len(flat) == 3                   # the two ends and one interior point: flat top
        low = {}

        def c(t):
            low[t] = -(t - 0.3) ** 2
            return low[t]

        _refine_max(c, -1.0, 1.0, 1e-9, 1e-12, lambda: low, lambda: 10.0)
        assert len(low) <= 4                    # cannot beat the best found elsewhere: stop

    @pytest.mark.slow
    def test_two_level_closes_part_of_the_gap(self, grid_bound):
        from rass_theory.optimize.policies import optimal_two_level_policy

        res = optimal_two_level_policy(4, 0.5)
        assert res.acceptance > res.threshold_acceptance + 1e-3
        assert res.acceptance <= grid_bound(4, 0.5) + 1e-9
        assert res.policy.acceptance(0.5) == pytest.approx(res.acceptance, abs=1e-14)

    @pytest.mark.slow
    def test_design_value_K4_delta1(self, grid_bound):
        # threshold policy 0.924 = the bound at K = 4, delta = 1
        res = optimal_threshold_policy(4, 1.0)
        assert round(res.acceptance, 3) == 0.924
        assert res.acceptance == pytest.approx(grid_bound(4, 1.0), abs=1e-7)
