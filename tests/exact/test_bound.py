"""List-coupling bound alpha*(K, delta): global minimum, stability, reductions.

Proof: proofs/P5-list-coupling-bound.md.  mpmath cells: test_accuracy_mpmath.py.
"""
import math

import numpy as np
import pytest
from scipy import special, stats

from rass_theory.exact import bound, dgrs


def _J(t, K, delta):
    return stats.norm.cdf(t - delta) - np.expm1(K * special.log_ndtr(t))


@pytest.mark.parametrize("K,delta,exc,word", [(0, 1.0, (ValueError, TypeError), "K"),
                                               (-3, 1.0, (ValueError, TypeError), "K"),
                                               (1.5, 1.0, (ValueError, TypeError), "K"),
                                               (3, -1.0, ValueError, "delta"), (3, float("nan"), ValueError, "delta"),
                                               (3, float("inf"), ValueError, "delta")])
def test_bad_input(K, delta, exc, word):
    with pytest.raises(exc, match=word):
        bound.acceptance_bound(K, delta)


class TestValues:
    @pytest.mark.parametrize("delta", [0.0, 1e-9, 0.3, 1.0, 5.0, 30.0])
    def test_K1_is_rmc(self, delta):
        assert bound.acceptance_bound(1, delta) == pytest.approx(2 * stats.norm.cdf(-delta / 2), rel=1e-14)
        assert bound.bound_threshold(1, delta) == delta / 2

    def test_design_value(self):
        # for K = 4, delta = 1 the bound is 0.924
        assert round(bound.acceptance_bound(4, 1.0), 3) == 0.924

    @pytest.mark.parametrize("K", [2, 3, 8, 64, 1024])
    @pytest.mark.parametrize("delta", [0.05, 0.5, 1.0, 3.0, 10.0, 40.0])
    def test_global_minimum_on_dense_grid(self, K, delta):
        res = bound.list_coupling_bound(K, delta)
        t = np.linspace(-40, 60, 50_001)
        grid_min = np.min(_J(t, K, delta))
        assert res.acceptance <= grid_min + 1e-12
        assert res.acceptance == pytest.approx(float(_J(res.t, K, delta)), rel=1e-12, abs=1e-300)
        assert 0.0 <= res.acceptance <= 1.0
        assert res.acceptance + res.rejection_probability == pytest.approx(1.0, abs=1e-15)

    @pytest.mark.parametrize("K,delta", [(2, 0.7), (8, 1.3), (100, 2.0)])
    def test_stationarity(self, K, delta):
        t = bound.bound_threshold(K, delta)
        lhs = stats.norm.pdf(t - delta)
        rhs = K * stats.norm.pdf(t) * stats.norm.cdf(t) ** (K - 1)
        assert lhs == pytest.approx(rhs, rel=1e-12)

    def test_zero_delta(self):
        assert bound.acceptance_bound(5, 0.0) == 1.0
        assert bound.bound_rejection_probability(5, 0.0) == 0.0

    def test_extremes_finite(self):
        for K in (2, 1024):
            for delta in (1e-300, 1e-12, 40.0, 1e3):
                res = bound.list_coupling_bound(K, delta)
                assert all(math.isfinite(v) for v in (res.acceptance, res.rejection_probability))
                assert 0.0 <= res.acceptance <= 1.0
        # tiny acceptance keeps relative accuracy: J = Phi(t - delta) + (1 - Phi(t)^K)
        assert 0.0 < bound.acceptance_bound(2, 40.0) < 1e-80

    def test_monotone(self):
        deltas = np.linspace(0.01, 12, 120)
        for K in (2, 5, 32):
            vals = [bound.acceptance_bound(K, d) for d in deltas]
            assert all(b <= a + 1e-15 for a, b in zip(vals, vals[1:]))
        for d in (0.2, 1.0, 4.0):
            vals = [bound.acceptance_bound(K, d) for K in range(1, 200)]
            assert all(b >= a - 1e-15 for a, b in zip(vals, vals[1:]))

    @pytest.mark.parametrize("K", [2, 4, 16])
    def test_above_dgrs(self, K):
        for d in (1e-3, 0.3, 1.0, 2.0, 6.0):
            assert dgrs.acceptance(K, d) <= bound.acceptance_bound(K, d) + 1e-15
