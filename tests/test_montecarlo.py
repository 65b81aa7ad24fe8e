"""Monte-Carlo estimators agree with the exact acceptance and selected laws within their intervals."""
import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

import rass_theory as rt
from rass_theory import verifiers
from rass_theory.stats.montecarlo import (clopper_pearson, dkw_epsilon, estimate_acceptance,
                                          estimate_selected_law)


class TestIntervals:
    @pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (4812, 10_000)])
    def test_clopper_pearson_matches_statsmodels(self, k, n):
        low, high = clopper_pearson(k, n, 0.95)
        ref = proportion_confint(k, n, alpha=0.05, method="beta")
        assert low == pytest.approx(ref[0], abs=1e-12) and high == pytest.approx(ref[1], abs=1e-12)

    def test_dkw_epsilon(self):
        assert dkw_epsilon(1000, 0.95) == pytest.approx(np.sqrt(np.log(2 / 0.05) / 2000))

    def test_bad_arguments(self):
        with pytest.raises(ValueError, match="k must be <= 10"):
            clopper_pearson(11, 10)
        with pytest.raises(ValueError, match="confidence"):
            dkw_epsilon(10, 1.5)


class TestEstimateAcceptance:
    @pytest.mark.parametrize("rule, K, weights", [("rmc", 1, None), ("dgrs", 3, None),
                                                  ("rass", 4, [0.1, 0.2, 0.3, 0.4])])
    def test_agrees_with_exact_acceptance(self, rule, K, weights):
        v = {"rmc": verifiers.rmc(), "dgrs": verifiers.dgrs(), "rass": verifiers.rass(weights=weights)}[rule]
        est = estimate_acceptance(v, K, 0.7, 3, 60_000, rng=2024, confidence=0.999, batch_size=25_000)
        exact = rt.acceptance(rule, K, 0.7, weights=weights) if weights else rt.acceptance(rule, K, 0.7)
        assert est.n_samples == 60_000 and est.n_accepted == round(est.estimate * 60_000)
        assert est.contains(exact), (est, exact)
        assert abs(est.estimate - exact) / est.standard_error < 4.5

    def test_detects_a_wrong_acceptance(self):
        """resample never accepts: its interval excludes RMC's acceptance."""
        est = estimate_acceptance(verifiers.resample(), 1, 0.7, 2, 1000, rng=0)
        assert est.estimate == 0 and not est.contains(rt.acceptance("rmc", 1, 0.7))
        assert est.confidence_interval[0] == 0.0

    def test_reproducible(self):
        a = estimate_acceptance(verifiers.rmc(), 1, 0.4, 2, 5000, rng=9)
        b = estimate_acceptance(verifiers.rmc(), 1, 0.4, 2, 5000, rng=9)
        assert a == b

    def test_bad_arguments(self):
        with pytest.raises(TypeError, match="verifier"):
            estimate_acceptance("rmc", 1, 0.5, 2, 10)
        with pytest.raises(ValueError, match="n_samples"):
            estimate_acceptance(verifiers.rmc(), 1, 0.5, 2, 0)
        with pytest.raises(ValueError, match="delta"):
            estimate_acceptance(verifiers.rmc(), 1, -0.5, 2, 10)
        with pytest.raises(ValueError, match="sigma"):
            estimate_acceptance(verifiers.rmc(), 1, 0.5, 2, 10, sigma=0.0)


class TestEstimateSelectedLaw:
    @pytest.mark.parametrize("weights", [[0.25, 0.25, 0.25, 0.25], [0.0, 0.1, 0.2, 0.7], [1.0, 0.0, 0.0, 0.0]])
    def test_ecdf_band_contains_exact_cdf(self, weights):
        est = estimate_selected_law(4, 0.5, weights, 80_000, rng=31, confidence=0.999)
        law = rt.selected_law(np.asarray(weights), 0.5)
        assert est.contains(law.cdf), est.sup_distance(law.cdf)
        assert est.sup_distance(law.cdf) <= est.epsilon

    def test_histogram_within_standard_errors(self):
        weights = np.array([0.1, 0.2, 0.3, 0.4])
        est = estimate_selected_law(4, 0.5, weights, 80_000, rng=5, bins=40)
        law = rt.selected_law(weights, 0.5)
        edges = est.bin_edges
        exact = np.diff(law.cdf(edges)) / np.diff(edges)  # exact mean density per bin
        z = np.abs(est.density - exact) / np.maximum(est.density_se, 1e-12)
        assert z.max() < 4.5

    def test_band_detects_wrong_law(self):
        """Samples of the top order statistic are far outside the band around g_uniform = phi."""
        est = estimate_selected_law(4, 0.5, [0, 0, 0, 1.0], 20_000, rng=1)
        law = rt.selected_law(np.full(4, 0.25), 0.5)
        assert not est.contains(law.cdf)

    def test_policy_selected_law(self):
        from rass_theory.optimize.policies import ThresholdRankPolicy

        pol = ThresholdRankPolicy(4, 1.0, [0.2, 0.2, 0.3, 0.3])
        est = estimate_selected_law(4, 0.8, policy=pol, n_samples=80_000, rng=3, confidence=0.999)
        assert est.contains(lambda s: pol.selected_cdf(np.full(np.size(s), 0.8), np.asarray(s)))

    def test_arguments(self):
        with pytest.raises(ValueError, match="exactly one"):
            estimate_selected_law(4, 0.5, n_samples=10)
        with pytest.raises(ValueError, match="weights"):
            estimate_selected_law(4, 0.5, [0.5, 0.5], n_samples=10)
