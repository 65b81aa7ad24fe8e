"""Every numeric constant stated in ``proofs/`` checked against an independent mpmath value.

Each test fails if the constant as stated in the proof were false, and, where the code relies on
the constant, also checks the code's side (window widths, degenerate band, p-value bounds).
"""
import math

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate, special, stats

mp.mp.dps = 40


def Phi(x):
    return mp.ncdf(mp.mpf(x))


def He(n, x):
    """Probabilists' Hermite polynomial ``He_n(x)``."""
    return mp.hermite(n, mp.mpf(x) / mp.sqrt(2)) * mp.mpf(2) ** (-mp.mpf(n) / 2)


def largest_K(coefficient_plus, bound, tail):
    """Largest integer ``K`` with ``(K + coefficient_plus) * tail <= bound``."""
    return int(mp.floor(mp.mpf(bound) / tail)) - coefficient_plus


class TestP3SeriesTail:
    """P3.4 / P3.6: truncation of the Hermite series for ``Phi(m + h) - Phi(m - h)``."""

    def test_old_intermediate_bound_was_false_and_first_omitted_term_is_small(self):
        old = (mp.mpf("0.05") * (1 + mp.mpf("3.5"))) ** 12 / mp.factorial(13)
        assert 2.70e-18 < old < 2.71e-18  # the old "(h(|m|+3.5))^12/13! < 1e-18" reaches 2.7e-18
        worst = max(abs(He(12, m)) * (mp.mpf("0.05") / max(1, m)) ** 12 / mp.factorial(13)
                    for m in (mp.mpf(i) / 200 for i in range(0, 2001)))
        assert 5.0e-22 < worst <= 5.04e-22

    def test_rigorous_tail_bound(self):
        def bound(m, h):
            g = lambda z: (h * (abs(m) + z)) ** 12 * mp.cosh(h * (abs(m) + z)) * mp.npdf(z)
            return mp.quad(g, [-mp.inf, -5, 0, 5, mp.inf]) / mp.factorial(13)

        at_one = bound(mp.mpf(1), mp.mpf("0.05"))
        assert at_one <= 5.62e-21
        for m in (0, 0.5, 0.93, 1.5, 3, 40):  # the maximum over the range is at |m| = 1
            m = mp.mpf(m)
            assert bound(m, mp.mpf("0.05") / max(1, m)) <= at_one
        # the bound dominates the true tail at the worst point of the first omitted term
        m, h = mp.mpf("0.93"), mp.mpf("0.05")
        tail = mp.nsum(lambda j: abs(He(int(2 * j), m)) * h ** (2 * j) / mp.factorial(2 * j + 1), [6, mp.inf])
        assert tail <= bound(m, h)
        # three-term branch: first omitted term <= y^6/7! < 2e-22 for y < 1e-3
        assert mp.mpf("1e-3") ** 6 / mp.factorial(7) < 2e-22

    def test_code_series_matches_mpmath_at_the_worst_points(self):
        from rass_theory.exact import dgrs

        for m in (0.0, 0.93, 1.0, -2.5, 40.0):
            h = 0.0499 / max(1.0, abs(m))
            a, b = m - h, m + h  # the float end points the code receives
            ref = mp.ncdf(mp.mpf(b)) - mp.ncdf(mp.mpf(a))
            got = dgrs.interval_mass(a, b)
            assert abs(got - ref) <= 1e-15 * abs(ref), (m, got, ref)


class TestP4Window:
    """P4.2: mass outside the optimiser's window."""

    def test_old_claim_and_true_ranges(self):
        tail = Phi(-11.5)
        assert 6.59e-31 < tail < 6.60e-31
        assert 2.70e-27 < 4096 * tail < 2.71e-27  # old claim "< 1e-27 for K <= 4096" is false
        assert largest_K(0, "1e-27", tail) == 1516  # K Phi(-11.5) <= 1e-27 iff K <= 1516
        assert largest_K(4, "1e-27", tail) == 1512  # (K + 4) Phi(-11.5) <= 1e-27 iff K <= 1512

    @pytest.mark.parametrize("K", [1, 2, 8, 1512, 1516, 1517, 4096, 100_000])
    def test_code_window_keeps_the_truncation_error_below_2_5e_27(self, K):
        from rass_theory.exact.segments import default_window

        for delta in (0.0, 1.0, 30.0):
            lo, hi = default_window(K, delta)
            L = -lo
            tail = Phi(-L)
            assert (K + 4) * tail <= mp.mpf("2.5e-27"), (K, L)
            # the pieces of the bound (P4.2): f outside, the minimum left of -L, the maximum right of hi
            f_out = Phi(lo - delta) + Phi(-(hi - delta))
            assert f_out <= 2 * tail
            # Bernoulli's inequality; -expm1(K log1p(-tail)) avoids the cancellation of 1 - (1 - tail)^K
            assert -mp.expm1(K * mp.log1p(-tail)) <= K * tail * (1 + mp.mpf("1e-30"))
            assert 1 - Phi(hi) ** K <= (1 + mp.mpf(L) ** -2) * tail


class TestP7Window:
    """P7.3: truncation of the residual-law crossing search."""

    def test_old_claim_and_true_ranges(self):
        tail = Phi(-10)
        assert 7.61e-24 < tail < 7.63e-24
        assert largest_K(1, "1e-20", tail) == 1311  # old "(K + 1) Phi(-10) < 1e-20" fails at K >= 1312
        assert 2 * (655 + 1) * tail <= 1e-20 < 2 * (656 + 1) * tail  # with both tails: K <= 655
        assert largest_K(1, "1e-27", 2 * Phi(-11.5)) == 757  # 2 (K+1) Phi(-11.5) <= 1e-27 iff K <= 757

    @pytest.mark.parametrize("K", [1, 2, 757, 1515, 1516, 4096, 100_000])
    def test_engine_half_width_keeps_the_bound(self, K):
        from rass_theory.exact._window import half_width

        L = half_width(K)
        assert L >= 11.5
        # L(K) solves (K + 1) Phi(-L) = 1e-27 in float64 above K = 1515: allow its rounding
        assert 2 * (K + 1) * Phi(-L) <= mp.mpf("2e-27") * (1 + mp.mpf("1e-9")), (K, L)


class TestDegenerateBand:
    """P1.3: the degenerate band is ``sqrt(eps_float64)`` in every input dtype."""

    def test_tv_constants(self):
        tol64 = mp.sqrt(mp.mpf(float(np.finfo(np.float64).eps)))
        tv64 = 2 * Phi(tol64 / 2) - 1
        assert 5.944e-9 < tv64 <= 5.95e-9
        assert tv64 <= tol64 / mp.sqrt(2 * mp.pi)
        tol32 = mp.sqrt(mp.mpf(float(np.finfo(np.float32).eps)))
        tv32 = 2 * Phi(tol32 / 2) - 1
        assert 1.37e-4 < tv32 < 1.38e-4  # the old float32 band's per-node error

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    def test_numpy_frame_band(self, dtype):
        from rass_theory.frame import Rank1Frame

        d = 4
        mu_d = np.zeros((3, d), dtype=dtype)
        mu_t = np.zeros((3, d), dtype=dtype)
        mu_t[:, 0] = np.array([1e-9, 1e-6, 1e-3], dtype=dtype)
        frame = Rank1Frame.from_means(mu_d, mu_t, 1.0)
        # 1e-6 lies above sqrt(eps64) = 1.49e-8 and below sqrt(eps32) = 3.45e-4
        assert frame.degenerate.tolist() == [True, False, False]

    @pytest.mark.parametrize("dtype_name", ["float32", "float64"])
    def test_torch_band(self, dtype_name):
        torch = pytest.importorskip("torch")
        from rass_theory.verifiers._tensors import prepare

        dtype = getattr(torch, dtype_name)
        n, K, d = 3, 2, 4
        mu_d = torch.zeros((n, d), dtype=dtype)
        mu_t = torch.zeros((n, d), dtype=dtype)
        mu_t[:, 0] = torch.tensor([1e-9, 1e-6, 1e-3], dtype=dtype)
        children = torch.zeros((n, K, d), dtype=dtype)
        batch = prepare(children, mu_d, mu_t, 1.0, 0)
        assert batch.degenerate.tolist() == [True, False, False]


class TestP5Attained:
    """P5.5: the law ``g*`` (f below ``t_a``, the maximum's density above) reaches the bound."""

    @pytest.mark.parametrize("K,delta", [(2, 0.25), (2, 1.0), (4, 0.5), (8, 1.0), (64, 3.0)])
    def test_optimal_law(self, K, delta):
        from scipy.optimize import brentq

        from rass_theory.exact.bound import acceptance_bound, bound_threshold

        f = lambda s: stats.norm.pdf(s - delta)
        top = lambda s: K * stats.norm.pdf(s) * stats.norm.cdf(s) ** (K - 1)
        D = lambda t: stats.norm.cdf(t) ** K - stats.norm.cdf(t - delta)
        t2 = bound_threshold(K, delta)
        t_a = brentq(D, -12.0, t2)  # D(-inf) = 0-, D(t2) = 1 - alpha* > 0
        assert D(t2) > 0
        # D < 0 below t_a (the convex-order condition of the proof), one sign change
        grid = np.linspace(-8.0, t_a - 1e-6, 4001)
        assert np.all(np.array([D(t) for t in grid]) <= 0)
        g = lambda s: f(s) if s < t_a else top(s)
        mass = integrate.quad(g, -np.inf, t_a)[0] + integrate.quad(g, t_a, np.inf)[0]
        assert mass == pytest.approx(1.0, abs=1e-10)
        pts = sorted([t_a, t2])
        acc = sum(integrate.quad(lambda s: min(f(s), g(s)), a, b, limit=200)[0]
                  for a, b in zip([-np.inf] + pts, pts + [np.inf]))
        assert acc == pytest.approx(acceptance_bound(K, delta), abs=1e-9)


class TestS1KolmogorovBranches:
    """S1.1(c) and S1.2 step 3: the code's KS p-value against Massart's bound."""

    def test_large_n_branch_is_within_the_stated_factor_of_massart(self):
        from rass_theory.stats.tests import kolmogorov_sf

        for n in (10_001, 10**6):
            for x in np.linspace(0.3, 4.0, 38):
                p = kolmogorov_sf(x / math.sqrt(n), n)
                massart = 2 * math.exp(-2 * x * x)
                assert p <= massart * (1 + 1e-12)
                assert p >= massart * (1 - math.exp(-6 * x * x)) * (1 - 1e-12)

    def test_stated_factors(self):
        for a, factor in ((0.05, 1.6e-5), (0.1, 1.3e-4), (1e-3 / 15, 3.8e-14), (0.5, 0.017)):
            x = stats.kstwobign.isf(a)
            assert 1 / (1 - math.exp(-6 * x * x)) - 1 <= factor
        assert stats.kstwobign.isf(0.05) == pytest.approx(1.3581, abs=1e-4)

    def test_small_n_branch_below_massart(self):
        from rass_theory.stats.tests import kolmogorov_sf

        for n in (50, 2000, 10_000):
            for x in np.linspace(0.3, 3.0, 28):
                assert kolmogorov_sf(x / math.sqrt(n), n) <= 2 * math.exp(-2 * x * x) * (1 + 1e-9)

    def test_joint_alternative_example_is_at_ks_distance_one_eighth(self):
        """S1.2 scope: ``sign(A)(|A| + |B|)/sqrt 2`` is at KS distance 0.125 from ``N(0, 1)``."""

        def cdf(x):
            y = abs(x) * math.sqrt(2)
            v = integrate.quad(lambda a: 2 * stats.norm.pdf(a) * (2 * stats.norm.cdf(y - a) - 1), 0, y)[0]
            return 0.5 + 0.5 * v if x > 0 else 0.5 - 0.5 * v

        d = max(abs(cdf(x) - stats.norm.cdf(x)) for x in np.linspace(-4, 4, 801))
        assert d == pytest.approx(0.125, abs=2e-4)


class TestStatedValues:
    """Values quoted in P6.4 and P8.3."""

    def test_dgrs_small_delta_slope(self):
        from rass_theory import rejection_probability

        p1 = mp.npdf(0)  # P3.5: t_1 = 0, p_k = phi(t_k) - t_k Q(t_k), t_{k+1} = t_k + p_k
        t2 = p1
        p2 = mp.npdf(t2) - t2 * (1 - mp.ncdf(t2))
        assert mp.nstr(p2, 5) == "0.2308"
        assert p1 == pytest.approx(1 / math.sqrt(2 * math.pi), rel=1e-15)
        assert rejection_probability("dgrs", 2, 1e-8) / 1e-8 == pytest.approx(float(p2), rel=1e-7)

    def test_bound_and_rass_values_of_p8(self):
        import rass_theory as rt
        from rass_theory.exact.bound import acceptance_bound

        assert acceptance_bound(4, 1.0) == pytest.approx(0.924197, abs=5e-7)
        assert acceptance_bound(2, 0.5) == pytest.approx(0.970496, abs=5e-7)
        assert acceptance_bound(8, 1.0) == pytest.approx(0.981710, abs=5e-7)
        assert rt.optimal_rank_weights(4, 1.0).acceptance == pytest.approx(0.895863, abs=5e-7)

    @pytest.mark.slow
    @pytest.mark.parametrize("K,delta,value", [(2, 0.5, 0.965516), (8, 1.0, 0.970895)])
    def test_threshold_optimum_below_the_bound_at_small_delta(self, K, delta, value):
        from rass_theory.exact.bound import acceptance_bound
        from rass_theory.optimize.policies import optimal_threshold_policy

        acc = optimal_threshold_policy(K, delta).acceptance
        assert acc == pytest.approx(value, abs=5e-7)
        assert acc < acceptance_bound(K, delta) - 1e-3  # the family falls short of the bound (P8.3)
