"""Tests for rass_theory.exact.normal: tail-accurate standard normal pieces."""
import mpmath as mp
import numpy as np
import pytest
from scipy.special import log_ndtr, ndtr

from rass_theory.exact import normal as nm


def _mp_mass(a, b):
    """Phi(b) - Phi(a) at 60 digits, using upper tails when a > 0 (no cancellation)."""
    with mp.workdps(60):
        a = a if isinstance(a, mp.mpf) else mp.mpf(float(a))
        b = b if isinstance(b, mp.mpf) else mp.mpf(float(b))
        return float(mp.ncdf(-a) - mp.ncdf(-b)) if a > 0 else float(mp.ncdf(b) - mp.ncdf(a))


class TestIntervalMass:
    def test_relative_accuracy_random_intervals(self):
        rng = np.random.default_rng(0)
        a = rng.uniform(-30, 30, 400)
        b = a + 10 ** rng.uniform(-12, 1.5, 400)
        got = nm.interval_mass(a, b)
        ref = np.array([_mp_mass(x, y) for x, y in zip(a, b)])
        keep = ref > 1e-300
        rel = np.abs(got[keep] - ref[keep]) / ref[keep]
        # exp(-x^2/2) at |x| <= 30 is conditioned ~ x^2 eps ~ 2e-13
        assert rel.max() < 5e-13

    def test_infinite_ends_and_orientation(self):
        assert nm.interval_mass(-np.inf, np.inf) == 1.0
        assert nm.interval_mass(0.0, np.inf) == pytest.approx(0.5, rel=1e-15)
        assert nm.interval_mass(1.0, 0.0) == pytest.approx(-nm.interval_mass(0.0, 1.0), rel=1e-15)


class TestShiftDifference:
    @pytest.mark.parametrize("delta", [1e-12, 1e-8, 1e-4, 0.1, 1.0, 7.0])
    def test_relative_accuracy(self, delta):
        xs = np.array([-20.0, -3.0, 0.0, delta / 2, 2.0, 20.0])
        got = nm.shift_difference(xs, delta)
        for x, g in zip(xs, got):
            with mp.workdps(60):
                lo = mp.mpf(float(x)) - mp.mpf(delta)  # the exact x - delta, not its rounding
            ref = -_mp_mass(lo, x)
            assert abs(g - ref) <= 1e-13 * abs(ref)

    def test_zero_at_infinity(self):
        assert np.all(nm.shift_difference(np.array([-np.inf, np.inf]), 0.5) == 0.0)


class TestQuantileFromTails:
    def test_upper_tail_keeps_digits(self):
        upper = np.array([1e-20, 1e-100])
        x = nm.quantile_from_tails(1.0 - upper, upper)
        assert np.allclose(ndtr(-x), upper, rtol=1e-13)

    def test_log_functions_finite_in_tails(self):
        s = np.array([-40.0, 40.0])
        assert np.all(np.isfinite(log_ndtr(s))) and np.all(np.isfinite(log_ndtr(-s)))
