"""Predicted speedup from exact acceptance vs measurement."""
import numpy as np
import pytest
from scipy import stats

import rass_theory as rt
from rass_theory.diffusion import GaussianMixture, speculative_sample
from rass_theory.diffusion.theory import acceptance_curve, predict_speedup


@pytest.fixture(scope="module")
def gm16():
    return GaussianMixture.random(dim=16, n_components=5, seed=0)


class TestAcceptanceCurve:
    def test_rmc_closed_form(self):
        d = np.array([0.0, 0.5, 2.0])
        np.testing.assert_allclose(acceptance_curve("rmc", 1)(d), 2 * stats.norm.cdf(-d / 2))

    def test_dgrs_matches_rt(self):
        assert acceptance_curve("dgrs", 3)(np.array([1.3]))[0] == pytest.approx(rt.acceptance("dgrs", 3, 1.3))

    def test_unknown_rule(self):
        with pytest.raises(ValueError, match="rule"):
            acceptance_curve("magic", 2)(np.array([1.0]))

    def test_rmc_needs_K1(self):
        with pytest.raises(ValueError, match="K = 1"):
            acceptance_curve("rmc", 2)


class TestPrediction:
    @pytest.mark.parametrize("verifier,K,L", [("rmc", 1, 3), ("dgrs", 2, 3)])
    def test_prediction_within_se(self, gm16, verifier, K, L):
        run = speculative_sample(gm16, verifier, K=K, L=L, n_samples=400, rng=7)
        pred = predict_speedup(run)
        assert abs(pred.z) < 4.5, pred
        # in-situ check of the verifier: measured acceptance rate per depth vs exact mean
        for j in range(L):
            diff = pred.acceptance_by_depth_measured[j] - pred.acceptance_by_depth_predicted[j]
            assert abs(diff) < 4.5 * pred.acceptance_by_depth_se[j] + 1e-12

    def test_prediction_exact_for_degenerate_runs(self, gm16):
        """Draft model = target: every acceptance is 1, prediction equals the count exactly."""
        run = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=5, rng=0, draft=gm16.perturbed(0.0))
        pred = predict_speedup(run)
        assert pred.predicted_speedup == pytest.approx(run.speedup)
        assert pred.predicted_calls == pytest.approx(10)
