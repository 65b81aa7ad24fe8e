"""Tests for rass_theory.exact.segments: the RASS segment on the one crossing search, the polish
of its crossings at small delta, and evaluate_tv's identities."""
import math

import numpy as np
import pytest

from rass_theory.exact import laws, segments


class TestRankSegmentIntervals:
    @pytest.mark.parametrize("K,delta", [(3, 1.0), (8, 2.5), (16, 6.0)])
    def test_same_crossings_signs_and_tv_as_the_engine(self, K, delta, rng):
        """At ``delta >= 1`` nothing is polished: the segment reports the engine's search."""
        w = rng.dirichlet(np.ones(K))
        roots, signs, tv = segments.rank_segment(K).intervals(w, delta)
        bounds, positive, mass = laws.residual_intervals(laws.rank_law(w), np.array([delta]))
        nc = int(np.isfinite(bounds[0]).sum())
        np.testing.assert_array_equal(roots, bounds[0, 1:1 + nc])
        assert signs == [bool(x) for x in positive[0, :nc + 1]]
        assert tv == mass[0].sum()

    @pytest.mark.parametrize("K", [4, 16, 32])
    @pytest.mark.parametrize("delta", [1e-8, 1e-5])
    def test_small_delta_crossing_is_polished(self, K, delta):
        """Uniform weights: ``g = phi``, one crossing at ``delta / 2``.  ``log f - log g`` has an
        absolute rounding ``eps`` against a slope ``delta``, so the engine's own root is off by up
        to ``~eps / delta`` (measured 7e-8 at ``delta = 1e-8``, seven times ``delta``); the polish
        on the sign function ``expm1(delta s - delta^2 / 2) - 0`` finds it to rounding, and TV is
        summed at the polished crossing (at the engine's, K = 32, delta = 1e-8: 4.1e-13 relative)."""
        w = np.full(K, 1.0 / K)
        roots, signs, tv = segments.rank_segment(K).intervals(w, delta)
        assert roots.size == 1 and signs == [False, True]
        assert abs(roots[0] - delta / 2) < 1e-6 * delta
        ev = segments.rass_evaluation(w, delta)
        assert ev.tv == pytest.approx(math.erf(delta / (2 * math.sqrt(2.0))), rel=1e-14)   # 2 Phi(delta/2) - 1


class TestKnownCrossings:
    @pytest.mark.parametrize("K,delta", [(4, 0.3), (8, 1.17), (16, 2.6)])
    def test_confirmed_crossings_replace_the_search(self, K, delta, rng):
        """Crossings known to rounding (here: the precise search's, nudged by 1e-12) are confirmed
        by the 1e-9 search and used as they are; TV is summed at them (D is stationary there)."""
        w = rng.dirichlet(np.ones(K))
        seg = segments.rank_segment(K)
        roots, signs, tv = seg.intervals(w, delta)
        known = roots + 1e-12
        got, got_signs, got_tv = seg.intervals(w, delta, known)
        np.testing.assert_array_equal(got, known)
        assert got_signs == signs
        assert got_tv == pytest.approx(tv, rel=1e-12, abs=1e-18)

    @pytest.mark.parametrize("shift", ["drop", "move"])
    def test_wrong_crossings_are_ignored(self, shift, rng):
        """A missing crossing, or one 1e-3 away from the search's, is not confirmed: the result is
        the plain search's, bit for bit."""
        K, delta = 8, 1.17
        w = rng.dirichlet(np.ones(K))
        seg = segments.rank_segment(K)
        plain = seg.intervals(w, delta)
        known = plain[0][1:] if shift == "drop" else plain[0] + np.r_[1e-3, np.zeros(plain[0].size - 1)]
        got = seg.intervals(w, delta, known)
        np.testing.assert_array_equal(got[0], plain[0])
        assert got[1:] == plain[1:]

    def test_evaluate_tv_passes_them_on(self, rng):
        K, delta = 8, 0.53
        w = rng.dirichlet(np.ones(K))
        ev = segments.rass_evaluation(w, delta)
        known = ev.crossings + 1e-12
        ev2 = segments.evaluate_tv([segments.rank_segment(K)], w, delta,
                                   hessian=False, known_crossings=known)
        np.testing.assert_array_equal(ev2.crossings, known)
        assert ev2.acceptance == pytest.approx(ev.acceptance, abs=1e-14)


class TestPolish:
    def test_roots_found_from_nearby_guesses(self):
        def fun(x):
            return x ** 3 - 2.0

        guess = 2.0 ** (1 / 3) + np.array([1e-13, -3e-8, 2e-5])
        out = segments._polish(fun, guess)
        np.testing.assert_allclose(out, 2.0 ** (1 / 3), rtol=0, atol=4e-16)

    def test_root_without_a_nearby_sign_change_is_kept(self):
        out = segments._polish(lambda x: x * x + 1.0, np.array([0.5]))
        assert out[0] == 0.5


class TestEvaluateTV:
    @pytest.mark.parametrize("K,delta", [(2, 0.3), (5, 1.5), (8, 4.0)])
    def test_identities(self, K, delta, rng):
        """``acceptance + TV = 1``, ``grad_j = b_j(A)`` sums to ``g_w(A) = f(A) - TV`` at ``w``,
        and the certified gap of the evaluated weights is ``>= 0``."""
        w = rng.dirichlet(np.ones(K))
        ev = segments.rass_evaluation(w, delta, hessian=True)
        assert ev.acceptance + ev.tv == pytest.approx(1.0, abs=1e-15)
        assert ev.grad @ w == pytest.approx(ev.interval_f.sum() - ev.tv, abs=1e-14)
        assert segments.certified_gap(ev, w) >= 0.0
        assert np.all(np.linalg.eigvalsh(ev.hessian) <= 1e-12)       # concave acceptance


class TestPiecewiseSegmentsOnTheEngine:
    """Threshold and two-level segments: crossings from the law engine's scan
    (:func:`rass_theory.exact.laws.residual_intervals` of the piecewise law), masses from the
    segments' closed forms."""

    @pytest.mark.parametrize("K,delta,t", [(2, 0.5, 0.3), (4, 1.0, 1.2), (8, 2.0, -1.0), (3, 4.0, 4.5)])
    def test_threshold_tv_is_the_engine_threshold_law_mass(self, K, delta, t, rng):
        """The same law two ways: segments' interval masses against the engine's own
        ``threshold_law`` (relative-accuracy Bernstein form); both sum closed-form masses, so
        they agree to rounding (``1e-13``, a hundred ulps of the summed masses)."""
        from rass_theory.optimize.threshold import threshold_segments

        w = rng.dirichlet(np.ones(K))
        ev = segments.evaluate_tv(threshold_segments(K, t), w, delta,
                                  spacing=0.04, hessian=False)
        mass = laws.residual_mass(laws.threshold_law(w[None, :], np.array([t])), np.array([delta]))
        assert abs(ev.tv - mass[0]) <= 1e-13
        assert abs(ev.acceptance + ev.tv - 1.0) <= 1e-13

    def test_two_level_with_seven_crossings(self):
        """Two-level law at ``K = 4`` with seven crossings (more than the engine's ``K + 2``
        slots of a rank law): every crossing is found, and the TV matches adaptive quadrature
        of ``(f - g)_+`` (``scipy.integrate.quad`` to ``1e-12``) on the pieces between them."""
        from scipy.integrate import quad
        from rass_theory.optimize.policies import TwoLevelThresholdPolicy
        from rass_theory.optimize.threshold import two_level_segments

        K, delta, t1, t2 = 4, 1.0, 1.985576141515, -0.054322447738
        w1 = np.array([0.0224037, 0.13722985, 0.0, 0.84036645])
        w2 = np.array([0.0, 0.00154577, 0.15855034, 0.83990389])
        w = np.concatenate([w1, w2])
        ev = segments.evaluate_tv(two_level_segments(K, t1, t2), w, delta,
                                  spacing=0.04, hessian=False)
        assert ev.crossings.size == 7
        pol = TwoLevelThresholdPolicy(K, t1, t2, w1, w2)

        def excess(s):
            g = math.exp(pol.selected_logpdf(np.array([delta]), np.array([s]))[0])
            return max(math.exp(-0.5 * (s - delta) ** 2) / math.sqrt(2 * math.pi) - g, 0.0)

        pts = np.concatenate([[-12.0], np.sort(np.concatenate([ev.crossings, [t2, t1]])), [14.0]])
        tv = sum(quad(excess, a, b, epsabs=1e-13, epsrel=1e-12)[0] for a, b in zip(pts[:-1], pts[1:]))
        assert abs(ev.tv - tv) <= 1e-11
        from rass_theory.exact.bound import acceptance_bound

        assert 0.0 < ev.acceptance <= acceptance_bound(K, delta) + 1e-12
