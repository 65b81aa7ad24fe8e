"""The certified threshold-policy table, its interpolation, and the per-row threshold law (P8.5)."""
import numpy as np
import pytest

from rass_theory.exact import batch as eb
from rass_theory.optimize.policies import ThresholdRankPolicy, threshold_acceptance
from rass_theory.optimize.threshold import ThresholdRowLaw, sample_threshold_residual
from rass_theory.optimize.threshold_table import (InterpolatedThresholdPolicy, interpolate_parameters,
                                                  tabulated_K, threshold_table)
from rass_theory.verifiers.policy import _per_row

#: the table's stated certificate (optimize/data/build_threshold_table.py, GAP_TOL)
GAP_TOL = 1e-4


class TestValidation:
    def test_untabulated_K_names_K(self):
        with pytest.raises(ValueError, match="K = 9 has no certified threshold table"):
            threshold_table(9)
        with pytest.raises(ValueError, match="K = 1 has no certified"):
            InterpolatedThresholdPolicy(1)

    def test_bad_delta(self):
        tab = threshold_table(4)
        with pytest.raises(ValueError, match="delta"):
            tab.parameters(-0.5)
        with pytest.raises(ValueError, match="delta"):
            tab.parameters(np.array([0.5, np.nan]))

    def test_law_shapes(self):
        with pytest.raises(ValueError, match="weights must have shape"):
            ThresholdRowLaw(np.zeros(3), np.full((2, 4), 0.25))
        law = ThresholdRowLaw(np.zeros(2), np.full((2, 4), 0.25))
        with pytest.raises(ValueError, match="same number of rows"):
            sample_threshold_residual(law, np.ones(3), np.full(3, 0.5))


class TestTable:
    def test_covers_small_K(self):
        assert set(tabulated_K()) >= {2, 3, 4, 5, 6, 7, 8}

    @pytest.mark.parametrize("K", [2, 3, 4, 5, 6, 7, 8])
    def test_valid_policies_and_certificate(self, K):
        tab = threshold_table(K)
        assert tab.grid[0] == 0.0 and np.all(np.diff(tab.grid) > 0)
        assert np.all((tab.p > 0) & (tab.p <= 1))
        assert np.all(tab.weights >= 0) and np.allclose(tab.weights.sum(axis=1), 1.0, atol=1e-12)
        # every check point: the optimiser's policy is at most GAP_TOL above the interpolated one (its
        # search over t is not certified, so the interpolated policy may also beat it slightly)
        assert np.all(tab.gaps > -1e-5), tab.gaps.min()
        assert tab.max_gap <= GAP_TOL
        assert tab.check_delta.size >= tab.grid.size - 1

    @pytest.mark.parametrize("K", [2, 4, 8])
    def test_stored_acceptances_are_exact(self, K):
        """Recompute the stored acceptances (grid and check points) from the stored parameters."""
        tab = threshold_table(K)
        for i in (1, tab.grid.size // 3, tab.grid.size // 2, tab.grid.size - 1):
            t = np.inf if tab.p[i] >= 1 else float(__import__("scipy.special").special.ndtri(tab.p[i]))
            assert threshold_acceptance(K, tab.grid[i], t, tab.weights[i]) == pytest.approx(tab.acceptance[i],
                                                                                            abs=1e-12)
        pol = InterpolatedThresholdPolicy(K)
        for j in (0, tab.check_delta.size // 2, tab.check_delta.size - 1):
            assert pol.acceptance(tab.check_delta[j]) == pytest.approx(tab.check_acceptance[j], abs=1e-12)

    def test_check_optimum_is_the_optimiser(self):
        from rass_theory.optimize.policies import optimal_threshold_policy

        tab = threshold_table(4)
        j = int(np.argmin(np.abs(tab.check_delta - 1.05)))
        opt = optimal_threshold_policy(4, float(tab.check_delta[j]))
        assert opt.acceptance == pytest.approx(tab.check_optimum[j], abs=1e-9)
        # and the interpolated policy is a real improvement over RASS there
        assert tab.check_acceptance[j] > opt.rass_acceptance + 0.02

    def test_interpolation(self):
        tab = threshold_table(4)
        t, w = tab.parameters(tab.grid)
        p = np.where(np.isinf(t), 1.0, __import__("scipy.special").special.ndtr(t))
        np.testing.assert_allclose(p, tab.p, rtol=1e-12)
        np.testing.assert_allclose(w, tab.weights, atol=1e-15)
        # beyond the end the last parameters are held; between grid points a convex combination
        t_far, w_far = tab.parameters(np.array([50.0]))
        np.testing.assert_allclose(w_far[0], tab.weights[-1])
        mid = 0.5 * (tab.grid[10] + tab.grid[11])
        _, w_mid = tab.parameters(mid)
        np.testing.assert_allclose(w_mid[0], 0.5 * (tab.weights[10] + tab.weights[11]), atol=1e-15)
        t2, w2 = interpolate_parameters(tab.grid, tab.p, tab.weights, np.array([mid]))
        np.testing.assert_allclose(w2, w_mid)

    def test_below_the_bound_and_above_rass_where_it_matters(self):
        import rass_theory as rt

        pol = InterpolatedThresholdPolicy(4)
        for d in (0.5, 1.0, 1.5):
            a = pol.acceptance(d)
            assert a <= rt.acceptance_bound(4, d) + 1e-12
            assert a >= rt.acceptance("rass", 4, d) - 1e-9


class TestRowLaw:
    def test_matches_the_fixed_policy_law(self, rng):
        K = 5
        s = np.linspace(-9.0, 11.0, 801)
        for t in (np.inf, -0.7, 0.4, 2.3):
            w = rng.dirichlet(np.ones(K))
            pol = ThresholdRankPolicy(K, t, w)
            law = ThresholdRowLaw(np.full(s.size, t), np.tile(w, (s.size, 1)))
            ref_lp = pol.selected_logpdf(np.zeros(1), s)
            assert np.all(np.abs(law.logpdf(s) - ref_lp) <= 1e-11 * np.maximum(1, np.abs(ref_lp)))
            np.testing.assert_allclose(law.cdf(s), pol.selected_cdf(np.zeros(1), s), atol=1e-14)

    def test_per_row_parameters(self, rng):
        """Each row evaluates its own (t, w): compare row by row with fixed policies."""
        K, n = 4, 6
        t = np.array([np.inf, -1.0, 0.0, 0.8, 1.7, 3.0])
        w = rng.dirichlet(np.ones(K), size=n)
        s = rng.normal(0.0, 2.0, (n, 7))
        law = ThresholdRowLaw(t, w)
        lp, cdf = law.logpdf(s), law.cdf(s)
        for i in range(n):
            pol = ThresholdRankPolicy(K, t[i], w[i])
            np.testing.assert_allclose(lp[i], pol.selected_logpdf(np.zeros(1), s[i]), atol=1e-11)
            np.testing.assert_allclose(cdf[i], pol.selected_cdf(np.zeros(1), s[i]), atol=1e-14)

    def test_residual_matches_the_generic_sampler(self, rng):
        """The fast per-row residual is the engine's generic inverse CDF (same law, to ~1e-9)."""
        K, m = 4, 400
        for t in (np.inf, -0.5, 1.2):
            w = rng.dirichlet(np.ones(K))
            d, u = rng.uniform(0.02, 4.0, m), rng.random(m)
            pol = ThresholdRankPolicy(K, t, w)
            fast = sample_threshold_residual(ThresholdRowLaw(np.full(m, t), np.tile(w, (m, 1))), d, u)
            ref = eb.sample_residual_generic(_per_row(pol.selected_logpdf, d), _per_row(pol.selected_cdf, d), d, u)
            np.testing.assert_allclose(fast, ref, atol=1e-9)
