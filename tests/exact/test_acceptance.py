"""The public dispatcher ``rt.acceptance(rule, K, delta, weights=None)``."""
import doctest
import importlib.util
import math

import numpy as np
import pytest
from scipy import stats

import rass_theory as rt
from rass_theory.exact import bound, dgrs
from rass_theory.optimize.dispatch import rejection_probability

_HAS_RASS = importlib.util.find_spec("rass_theory.exact.rass") is not None


class TestValidation:
    def test_unknown_rule_lists_valid_ones(self):
        with pytest.raises(ValueError, match=r"rule must be one of \('rmc', 'dgrs', 'rass', 'threshold', 'optimal_list'\)"):
            rt.acceptance("grs", 2, 1.0)
        with pytest.raises(TypeError, match="rule must be a string"):
            rt.acceptance(3, 2, 1.0)

    def test_rmc_needs_K1(self):
        with pytest.raises(ValueError, match="K == 1"):
            rt.acceptance("rmc", 2, 1.0)

    @pytest.mark.parametrize("rule", ["rmc", "dgrs"])
    def test_weights_only_for_rass(self, rule):
        with pytest.raises(ValueError, match="weights apply only to rule 'rass'"):
            rt.acceptance(rule, 1, 1.0, weights=[1.0])

    @pytest.mark.parametrize("rule", ["rmc", "dgrs", "rass"])
    @pytest.mark.parametrize("delta", [-0.5, float("nan"), float("inf")])
    def test_bad_delta(self, rule, delta):
        with pytest.raises(ValueError, match="delta"):
            rt.acceptance(rule, 1, delta)
        with pytest.raises(ValueError, match="delta"):
            rejection_probability(rule, 1, delta)

    @pytest.mark.parametrize("rule", ["rmc", "dgrs", "rass", "threshold", "optimal_list"])
    @pytest.mark.parametrize("delta", ["1", None, [1.0, "a"], np.array([True]), object()])
    def test_delta_that_is_not_a_number(self, rule, delta):
        """A string used to parse ("1" gave the acceptance at 1) and None read as NaN (ValueError)."""
        with pytest.raises(TypeError, match="delta must be a real number"):
            rt.acceptance(rule, 1, delta)

    @pytest.mark.parametrize("rule", ["dgrs", "rass", "threshold"])
    def test_K_beyond_the_rule_maximum(self, rule):
        """D-GRS's recursion takes one step per child: K = 2**40 ran for days instead of raising."""
        with pytest.raises(ValueError, match="K must be <="):
            rt.acceptance(rule, 2 ** 40, 1.0)
        with pytest.raises(ValueError, match="K must be <="):
            rejection_probability(rule, 2 ** 40, 1.0)

    def test_dgrs_at_its_largest_K(self):
        assert rt.acceptance("dgrs", dgrs.MAX_K, 1.0) == pytest.approx(1.0 - rejection_probability("dgrs", dgrs.MAX_K, 1.0), abs=1e-15)
        with pytest.raises(ValueError, match=f"K must be <= {dgrs.MAX_K}"):
            dgrs.acceptance(dgrs.MAX_K + 1, 1.0)

    @pytest.mark.parametrize("K", [0, -1, 2.5])
    def test_bad_K(self, K):
        with pytest.raises((ValueError, TypeError), match="K"):
            rt.acceptance("dgrs", K, 1.0)

    @pytest.mark.parametrize(
        "weights,match",
        [([0.5, 0.5], "length K=3"), ([0.5, 0.6, -0.1], "non-negative"), ([0.2, 0.2, 0.2], "sum to 1"),
         ([np.nan, 0.5, 0.5], "finite"), ([[1 / 3] * 3], "one-dimensional")],
    )
    def test_bad_weights(self, weights, match):
        with pytest.raises(ValueError, match=match):
            rt.acceptance("rass", 3, 1.0, weights=weights)


class TestValues:
    @pytest.mark.parametrize("delta", [0.0, 1e-12, 1e-4, 0.5, 2.0, 9.0])
    def test_rmc(self, delta):
        assert rt.acceptance("rmc", 1, delta) == pytest.approx(2 * stats.norm.cdf(-delta / 2), rel=1e-14)
        assert rejection_probability("rmc", 1, delta) == pytest.approx(math.erf(delta / (2 * math.sqrt(2))), rel=1e-14)

    def test_dgrs_delegates(self):
        for K in (1, 3, 8):
            for d in (0.0, 1e-6, 0.4, 3.0):
                assert rt.acceptance("dgrs", K, d) == dgrs.acceptance(K, d)
                assert rejection_probability("dgrs", K, d) == dgrs.rejection_probability(K, d)

    def test_integer_and_numpy_arguments(self):
        want = rt.acceptance("dgrs", 4, 1.0)
        assert rt.acceptance("dgrs", np.int64(4), np.float64(1.0)) == want
        assert rt.acceptance("dgrs", 4, 1) == want

    def test_small_delta_relative_accuracy(self):
        # rejection ~ delta; 1 - acceptance would keep only ~8 digits at delta = 1e-8
        d = 1e-8
        assert rejection_probability("rmc", 1, d) / d == pytest.approx(1 / math.sqrt(2 * math.pi), rel=1e-14)
        assert rejection_probability("dgrs", 1, d) / d == pytest.approx(1 / math.sqrt(2 * math.pi), rel=1e-14)

    def test_rass_K1_default_is_rmc(self):
        for d in (0.1, 1.0, 3.0):
            assert rt.acceptance("rass", 1, d) == pytest.approx(rt.acceptance("rmc", 1, d), rel=1e-15)

    @pytest.mark.skipif(not _HAS_RASS, reason="rass_theory.exact.rass not available yet")
    def test_rass_uniform_weights_is_rmc(self):
        for K in (2, 5):
            for d in (1e-6, 0.5, 2.0):
                w = np.full(K, 1.0 / K)
                assert rt.acceptance("rass", K, d, weights=w) == pytest.approx(rt.acceptance("rmc", 1, d), abs=1e-13)
                assert rejection_probability("rass", K, d, weights=w) == pytest.approx(
                    rejection_probability("rmc", 1, d), rel=1e-9)

    @pytest.mark.slow  # the policy optimisation takes ~10-30 s cold
    def test_threshold_rule(self):
        pytest.importorskip("rass_theory.optimize.policies")
        a = rt.acceptance("threshold", 4, 1.0)
        assert rt.acceptance("dgrs", 4, 1.0) <= a <= bound.acceptance_bound(4, 1.0) + 1e-9


def test_doctests():
    import sys

    from rass_theory.optimize import dispatch

    for module in (sys.modules["rass_theory.exact.acceptance"], bound, dispatch):
        failures, _ = doctest.testmod(module)
        assert failures == 0
