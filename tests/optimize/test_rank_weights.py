"""Tests of the optimal rank weights (proofs/P4-weight-program.md)."""
import mpmath as mp
import numpy as np
import pytest
from scipy.special import ndtr

import rass_theory as rt
from rass_theory.exact.segments import rass_evaluation
from rass_theory.optimize.rank_weights import (
    DEGENERATE_DELTA,
    INTERPOLATION_GRID,
    optimal_rank_weights,
    optimal_weights_interpolator,
    optimal_weights_table,
)


def _mp_acceptance(weights, delta, breakpoints, dps=20):
    """Independent mpmath quadrature of int min(f, g_w) (breakpoints only help accuracy)."""
    mp.mp.dps = dps
    K = len(weights)
    w = [mp.mpf(float(x)) for x in weights]
    d = mp.mpf(delta)

    def g(s):
        u = mp.ncdf(s)
        return mp.npdf(s) * K * sum(w[j] * mp.binomial(K - 1, j) * u**j * (1 - u) ** (K - 1 - j) for j in range(K))

    def integrand(s):
        return min(mp.npdf(s - d), g(s))

    pts = [-mp.inf] + [mp.mpf(float(c)) for c in sorted(breakpoints)] + [mp.inf]
    return float(mp.quad(integrand, pts))


@pytest.mark.parametrize("K,delta,exc,word", [(0, 1.0, ValueError, "K"), (-1, 1.0, ValueError, "K"),
                                               (2.5, 1.0, TypeError, "K"), (3, -0.1, ValueError, "delta"),
                                               (3, np.nan, ValueError, "delta"), (3, np.inf, ValueError, "delta")])
def test_bad_input(K, delta, exc, word):
    with pytest.raises(exc, match=word):
        optimal_rank_weights(K, delta)


class TestSpecialCases:
    @pytest.mark.parametrize("delta", [0.0, 0.3, 2.0])
    def test_K1_is_rmc(self, delta):
        res = optimal_rank_weights(1, delta)
        assert res.weights.tolist() == [1.0]
        assert res.acceptance == pytest.approx(2 * ndtr(-delta / 2), abs=1e-15)
        assert res.status == "trivial"

    def test_degenerate_delta_returns_uniform(self):
        res = optimal_rank_weights(4, 1e-9)
        assert 1e-9 <= DEGENERATE_DELTA
        np.testing.assert_allclose(res.weights, 0.25)
        assert res.status == "degenerate"
        assert res.tv == pytest.approx(1 - 2 * ndtr(-0.5e-9), rel=1e-6)
        assert 0 <= res.lower_bound <= res.tv and res.gap <= res.tv


class TestOptimum:
    @pytest.mark.parametrize("K,delta", [(2, 0.5), (3, 0.1), (4, 1.0), (4, 3.0), (5, 0.01)])
    def test_simplex_certificate_and_bounds(self, K, delta, grid_bound):
        res = optimal_rank_weights(K, delta)
        assert res.weights.shape == (K,)
        assert np.all(res.weights >= 0) and res.weights.sum() == pytest.approx(1, abs=1e-14)
        assert res.status == "optimal"
        assert res.gap < 1e-9
        assert res.acceptance + res.tv == pytest.approx(1, abs=1e-13)
        uniform = rass_evaluation(np.full(K, 1 / K), delta).acceptance
        top = rass_evaluation(np.eye(K)[-1], delta).acceptance
        assert res.acceptance >= max(uniform, top) - 1e-14
        assert res.acceptance <= grid_bound(K, delta) + 1e-9

    def test_design_value_K4_delta1(self):
        # RASS at K = 4, delta = 1 accepts 0.896
        assert round(optimal_rank_weights(4, 1.0).acceptance, 3) == 0.896

    @pytest.mark.parametrize("K,delta", [(3, 0.7), (4, 1.0)])
    def test_acceptance_matches_mpmath(self, K, delta):
        res = optimal_rank_weights(K, delta)
        ref = _mp_acceptance(res.weights, delta, res.crossings)
        assert abs(res.acceptance - ref) < 1e-12

    def test_lower_bound_is_valid_for_random_weights(self, rng):
        # convexity certificate (P4.3): no weight vector beats the certified lower bound
        K, delta = 4, 0.8
        res = optimal_rank_weights(K, delta)
        for w in rng.dirichlet(np.ones(K), size=40):
            assert rass_evaluation(w, delta).tv >= res.lower_bound - 1e-13

    def test_small_delta_relative_accuracy(self):
        res = optimal_rank_weights(3, 1e-4)
        assert res.gap < 1e-7 and res.tv > 0
        # TV is O(delta): at most the uniform-weight (RMC) value 1 - 2 Phi(-delta/2)
        assert res.tv <= (1 - 2 * ndtr(-0.5e-4)) * (1 + 1e-9)

    def test_huge_delta_keeps_relative_accuracy(self):
        res = optimal_rank_weights(4, 16.0)
        assert 0 < res.acceptance < 1e-10
        assert res.gap <= 1e-9 * res.acceptance
        ref = _mp_acceptance(res.weights, 16.0, res.crossings, dps=30)
        assert abs(res.acceptance - ref) <= 1e-9 * ref

    def test_monotone_in_K(self):
        accs = [optimal_rank_weights(K, 1.5).acceptance for K in (1, 2, 3, 4)]
        assert all(b >= a - 1e-12 for a, b in zip(accs, accs[1:]))

    def test_public_name(self):
        assert rt.optimal_rank_weights is optimal_rank_weights


class TestTable:
    def test_rows_and_csv(self, tmp_path):
        tab = optimal_weights_table([2, 3], [0.5, 1.0])
        assert tab.K.tolist() == [2, 2, 3, 3]
        assert [w.size for w in tab.weights] == [2, 2, 3, 3]
        assert np.all(tab.gap < 1e-7)
        text = tab.to_csv(tmp_path / "t.csv")
        assert text.splitlines()[0].startswith("K,delta,acceptance")
        assert (tmp_path / "t.csv").read_text() == text
        assert tab.to_rows()[1]["delta"] == 1.0

    def test_rejects_bad_delta(self):
        with pytest.raises(ValueError, match="delta"):
            optimal_weights_table([2], [0.5, -1.0])


class TestInterpolator:
    def test_simplex_deterministic_and_exact_at_nodes(self):
        interp = optimal_weights_interpolator(2)
        assert optimal_weights_interpolator(2) is interp
        d = np.array([0.0, 1e-5, 0.37, 2.2, 40.0])
        W = interp(d)
        assert W.shape == (5, 2)
        assert np.all(W >= 0) and np.allclose(W.sum(axis=1), 1, atol=1e-15)
        np.testing.assert_array_equal(W, interp(d))
        np.testing.assert_allclose(W[0], [0.5, 0.5])
        np.testing.assert_allclose(interp(INTERPOLATION_GRID[5:8]), interp.weights[5:8], atol=1e-15)

    def test_interpolation_loss_small(self):
        interp = optimal_weights_interpolator(2)
        for d in (0.23, 0.9):
            w = interp(np.array([d]))[0]
            loss = optimal_rank_weights(2, d).acceptance - rass_evaluation(w, d).acceptance
            assert -1e-12 <= loss < 1e-4

    def test_bad_delta(self):
        with pytest.raises(ValueError, match="delta"):
            optimal_weights_interpolator(2)(np.array([0.1, np.nan]))


class TestWarmStarts:
    def test_kkt_continuation_matches_cold_solve(self):
        from rass_theory.optimize.rank_weights import _kkt_continuation, _solve

        K = 5
        base = _solve(K, 0.9)
        warm = _kkt_continuation(K, 0.91, (0.9, base.weights, base.crossings, base.left_in_A))
        cold = _solve(K, 0.91)
        assert warm is not None and warm.solver.startswith("KKT-Newton")
        assert warm.gap < 1e-9
        assert abs(warm.acceptance - cold.acceptance) < 1e-12
        np.testing.assert_allclose(warm.weights, cold.weights, atol=1e-7)

    def test_continuation_refuses_a_changed_structure(self):
        from rass_theory.optimize.rank_weights import _kkt_continuation, _solve

        base = _solve(8, 0.7)
        # between 0.72 and 0.8 the crossing pattern changes (9 -> 7 crossings): the KKT zero
        # of the old structure is not certified, so the continuation must decline
        assert _kkt_continuation(8, 0.8, (0.7, base.weights, base.crossings, base.left_in_A)) is None


    @pytest.mark.parametrize("K,delta", [(4, 0.43), (8, 0.53), (8, 1.17), (16, 2.6)])
    def test_table_start_certificate_agrees_with_the_search(self, K, delta):
        """The warm solve certifies at the KKT crossings, which the search only confirms: the
        acceptance, crossings and gap agree with the plain search at the returned weights (a
        crossing accepted wrongly would move the acceptance by its interval's mass)."""
        from rass_theory.exact.segments import certified_gap

        res = optimal_rank_weights(K, delta)
        assert "table" in res.solver
        ev = rass_evaluation(res.weights, delta)
        assert abs(res.acceptance - ev.acceptance) <= 4e-16
        np.testing.assert_allclose(res.crossings, ev.crossings, rtol=0, atol=1e-9)
        assert res.gap <= certified_gap(ev, res.weights) + 1e-14 and res.gap <= 1e-9

    def test_interpolated_start_gives_the_nearest_row_solution(self):
        """Between two table rows of one structure the start is their interpolation; Newton ends
        where it ends from the nearest row alone (to rounding)."""
        from rass_theory.optimize.rank_weights import _kkt_continuation, _table_neighbours

        near, far = _table_neighbours(8, 1.17)
        assert np.array_equal(near[1] > 0, far[1] > 0) and near[2].size == far[2].size  # one structure
        both = _kkt_continuation(8, 1.17, near, "table", far=far)
        one = _kkt_continuation(8, 1.17, near, "table")
        assert both is not None and one is not None
        np.testing.assert_allclose(both.weights, one.weights, rtol=0, atol=1e-13)
        assert abs(both.acceptance - one.acceptance) <= 4e-16


class TestNoCallHistory:
    """``optimal_rank_weights(K, delta)`` is a function of ``(K, delta)`` alone: the same bits
    whatever was solved before in the process (no warm state carried between calls)."""

    CALLS = [(9, 0.8), (9, 0.83), (9, 0.9), (5, 0.91), (5, 0.9), (8, 0.53)]

    def _run(self, calls):
        from rass_theory.optimize import rank_weights as rw

        rw._optimal_rank_weights.cache_clear()
        try:
            return {c: rt.optimal_rank_weights(*c) for c in calls}
        finally:
            rw._optimal_rank_weights.cache_clear()

    def test_two_orders_give_bit_identical_results(self):
        a = self._run(self.CALLS)
        b = self._run(self.CALLS[::-1])
        for c in self.CALLS:
            np.testing.assert_array_equal(a[c].weights, b[c].weights)
            np.testing.assert_array_equal(a[c].crossings, b[c].crossings)
            assert (a[c].acceptance, a[c].tv, a[c].gap, a[c].solver) == \
                   (b[c].acceptance, b[c].tv, b[c].gap, b[c].solver), c
            assert a[c].status == "optimal"

    def test_returned_arrays_are_private_copies(self):
        a = rt.optimal_rank_weights(4, 0.7)
        a.weights[:] = 0.0
        b = rt.optimal_rank_weights(4, 0.7)
        assert b.weights.sum() == pytest.approx(1.0) and b.weights is not a.weights


class TestNoFdSwap:
    def test_lp_solve_duplicates_no_file_descriptor(self, monkeypatch):
        """The LP solve leaves fd 1 alone (an fd swap to hide the HiGHS banner is not
        thread-safe): any os.dup/os.dup2 during a solve fails the test."""
        import os

        from rass_theory.optimize import quadrature
        from rass_theory.optimize.rank_weights import _solve

        calls = []

        def forbidden(*args):
            calls.append(args)
            raise AssertionError("file descriptor duplicated during an LP solve")

        quadrature._cell_lp.cache_clear()  # a new problem object: its first solve included
        with monkeypatch.context() as m:  # undone before pytest's own capture swaps fds again
            m.setattr(os, "dup", forbidden)
            m.setattr(os, "dup2", forbidden)
            res = _solve(11, 0.7)  # K = 11 is not tabulated: the cell LP runs
        assert "LP" in res.solver and res.status == "optimal"
        assert calls == []


class TestAgainstTheoryA:
    @pytest.mark.parametrize("K,delta", [(3, 0.4), (5, 1.3)])
    def test_matches_exact_rass_acceptance(self, K, delta):
        rass = pytest.importorskip("rass_theory.exact.rass")
        res = optimal_rank_weights(K, delta)
        assert abs(res.acceptance - rass.rass_acceptance(res.weights, delta)) < 1e-12
        assert abs(res.tv - rass.rass_tv(res.weights, delta)) < 1e-12


class TestCustomGrid:
    def test_custom_grid_interpolates_linearly(self):
        from rass_theory.optimize.rank_weights import OptimalWeightsInterpolator

        interp = OptimalWeightsInterpolator(3, grid=[0.5, 1.0])
        assert interp.grid.tolist() == [0.0, 0.5, 1.0]
        assert np.all(interp.gap < 1e-9)
        np.testing.assert_allclose(interp(np.array([0.75]))[0], interp.weights[1:].mean(axis=0), atol=1e-15)
        np.testing.assert_allclose(interp(np.array([3.0]))[0], interp.weights[-1])

    def test_bad_grid(self):
        from rass_theory.optimize.rank_weights import OptimalWeightsInterpolator

        with pytest.raises(ValueError, match="grid"):
            OptimalWeightsInterpolator(3, grid=[-1.0, 0.5])
