"""Far displacements: every rule, law and verifier at ``delta`` from 20 to 1e300.

Diffusion runs reach large ``delta = ||mu_target - mu_draft|| / sigma`` where ``sigma`` is
small.  Before this file's fixes the RASS optimiser's crossing grid grew as ``delta / 0.1``
(a MemoryError from ``delta ~ 1e8``, "Maximum allowed size exceeded" from 1e100), the optimal
list rule lost its root brackets from ``delta ~ 1e4`` (ListRuleCertificateError), and
``rt.acceptance("rass", K, delta, weights=w)`` rounded ``1 - TV`` to 0 where the optimiser's own
acceptance (the same weights) kept ``3e-23``.
"""
import pathlib
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

import rass_theory as rt
from rass_theory import verifiers as V
from rass_theory.exact import laws
from rass_theory.optimize import list_rule

sys.path.insert(0, str(pathlib.Path(__file__).parent / "exact"))
from mp_reference import top_rank_acceptance  # noqa: E402

FAR = (100.0, 1e3, 1e6, 1e12, 1e100, 1e300)


class TestRassAcceptance:
    @pytest.mark.parametrize("K, delta", [(2, 30.0), (4, 50.0), (3, 60.0)])
    def test_tail_matches_mpmath_on_the_direct_crossing(self, K, delta):
        # these deltas take the grid-free crossing (delta >= max(2 L, increasing_delta(K)))
        assert delta >= max(2 * laws.half_width(K), laws.increasing_delta(K))
        top = [0.0] * (K - 1) + [1.0]
        ref = float(top_rank_acceptance(K, delta))
        assert rt.acceptance("rass", K, delta, weights=top) == pytest.approx(ref, rel=1e-12)
        assert rt.acceptance("rass", K, delta) == pytest.approx(ref, rel=1e-12)

    def test_explicit_weights_keep_the_tail(self):
        # the optimiser's weights at delta = 20 are the top vertex; both calls agree
        w = rt.optimal_rank_weights(4, 20.0).weights
        assert rt.acceptance("rass", 4, 20.0, weights=w) == rt.acceptance("rass", 4, 20.0) > 1e-24

    @pytest.mark.parametrize("K", [2, 4, 8, 64])
    @pytest.mark.parametrize("delta", FAR)
    def test_far_acceptance_is_zero_without_warnings(self, K, delta):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res = rt.optimal_rank_weights(K, delta)
            assert rt.acceptance("rass", K, delta) == 0.0
        assert res.acceptance == 0.0 and np.all(np.isfinite(res.weights))


class TestDirectCrossing:
    @pytest.mark.parametrize("K", [2, 3, 4, 8])
    def test_h_increases_on_the_window_from_increasing_delta(self, K):
        rng = np.random.default_rng(K)
        delta = laws.increasing_delta(K)
        s = np.linspace(-laws.half_width(K), delta, 20001)
        for _ in range(5):
            law = laws.rank_law(rng.dirichlet(np.ones(K)))
            h = delta * s - 0.5 * delta * delta - law.log_ratio(s[None, :])[0]
            assert np.all(np.diff(h) > 0)

    @pytest.mark.parametrize("K", [2, 4, 8])
    def test_direct_crossing_equals_the_grid_scan(self, K):
        rng = np.random.default_rng(10 + K)
        lo = max(2 * laws.half_width(K), laws.increasing_delta(K))
        delta = np.linspace(lo, lo + 30.0, 7)
        w = rng.dirichlet(np.ones(K), size=delta.size)
        law = laws.RankLaw(w)
        whi = np.maximum(delta, np.sqrt(2 * np.log(K))) + laws.half_width(K)
        grid_pts, grid_pos = laws._grid_crossings(law, delta, whi, precise=True)
        pts, pos = laws._crossings(law, delta, whi, precise=True)
        np.testing.assert_array_equal(pos, grid_pos)
        finite = np.isfinite(grid_pts)
        assert np.all(finite.sum(1) == np.isfinite(pts).sum(1))
        np.testing.assert_allclose(pts[np.isfinite(pts)], grid_pts[finite], rtol=1e-14)

    def test_mixed_rows_keep_the_grid_below(self):
        K = 4
        delta = np.array([0.5, 60.0, 2.0, 1e8])
        law = laws.rank_law(np.full(K, 0.25))
        b, pos, mass = laws.residual_intervals(law, delta)
        ref = [laws.residual_intervals(law, delta[i:i + 1]) for i in range(4)]
        for i, (bi, pi, mi) in enumerate(ref):
            np.testing.assert_allclose(mass[i].sum(), mi.sum(), rtol=1e-14)


class TestOptimalListFar:
    @pytest.mark.parametrize("K", [2, 3, 4, 64, 1000])
    @pytest.mark.parametrize("delta", (77.0, 78.0) + FAR)
    def test_rule_is_certified_and_equals_the_bound(self, K, delta):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = rt.optimal_list_rule(K, delta)
        assert r.status == "optimal"
        assert r.acceptance == rt.acceptance_bound(K, delta) == rt.acceptance("optimal_list", K, delta)
        assert r.acceptance <= 1e-322

    def test_far_rows_start_where_the_acceptance_rounds_to_zero(self):
        K = np.full(3, 4.0)
        delta = np.array([70.0, 76.0, 80.0])
        far = list_rule.far_rows(K, delta)
        assert far.tolist() == [False, False, True]
        assert rt.optimal_list_rule(4, 70.0).acceptance > 1e-300

    def test_far_residual_is_the_target(self):
        p = list_rule.solve_list_rule(4, np.array([1e4]))
        u = np.random.default_rng(0).random(20000)
        s = list_rule.sample_residual(p.take(np.zeros(u.size, dtype=np.int64)), u)
        assert stats.kstest(s - 1e4, "norm").pvalue > 1e-3


@pytest.mark.parametrize("rule", ["rass", "optimal_list", "threshold", "dgrs"])
@pytest.mark.parametrize("shared", [True, False])
def test_verifiers_at_far_delta(rule, shared):
    """Every row rejected, states finite, and ``s' - delta`` standard normal (the residual is ``f``)."""
    K, n, d = 4, 4000, 3
    rng = np.random.default_rng(1)
    scale = np.full(n, 1e4) if shared else 10.0 ** rng.uniform(3, 12, n)
    mu_d = rng.standard_normal((n, d))
    mu_t = mu_d.copy()
    mu_t[:, 0] += scale
    children = mu_d[:, None, :] + rng.standard_normal((n, K, d))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = getattr(V, rule)()(children, mu_d, mu_t, 1.0, rng)
    assert not res.accepted.any()
    z = res.states[:, 0] - mu_t[:, 0]
    assert np.all(np.isfinite(res.states))
    assert stats.kstest(z, "norm").pvalue > 1e-4


@pytest.mark.parametrize("rule", ["rass", "optimal_list", "dgrs"])
def test_verifiers_at_delta_1e300(rule):
    rng = np.random.default_rng(2)
    children = rng.standard_normal((4, 2, 3))
    mu_d = np.zeros((4, 3))
    mu_t = np.zeros((4, 3))
    mu_t[:, 0] = [1e300, 1e299, 1e150, 1e200]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = getattr(V, rule)()(children, mu_d, mu_t, 1.0, rng)
    assert not res.accepted.any() and np.all(np.isfinite(res.states))


class TestThresholdDirectCrossing:
    @pytest.mark.parametrize("K", [2, 4, 8])
    def test_direct_crossings_equal_the_grid_scan(self, K):
        """Thresholds below the window, inside it (both sides of the jump) and above it."""
        rng = np.random.default_rng(20 + K)
        lo = max(2 * laws.half_width(K), laws.increasing_delta(K))
        delta = np.repeat(np.linspace(lo, lo + 20.0, 4), 6)
        t = np.tile([-30.0, -2.0, 0.5, 3.0, 0.5 * lo, np.inf], 4)
        w = rng.dirichlet(np.ones(K), size=delta.size)
        law = laws.RankLaw(w, t)
        whi = np.maximum(delta, np.sqrt(2 * np.log(K))) + laws.half_width(K)
        grid_pts, grid_pos = laws._grid_crossings(law, delta, whi, precise=True)
        pts, pos = laws._crossings(law, delta, whi, precise=True)
        np.testing.assert_array_equal(pos, grid_pos)
        for i in range(delta.size):
            a, b = grid_pts[i][np.isfinite(grid_pts[i])], pts[i][np.isfinite(pts[i])]
            np.testing.assert_allclose(b, a, rtol=1e-14, err_msg=f"row {i}: t={t[i]}, delta={delta[i]}")
        _, _, mass = laws.residual_intervals(law, delta)
        assert np.all(np.abs(mass.sum(1) - 1.0) < 1e-12)

    def test_threshold_verifier_large_K_far_delta_is_fast(self):
        import time
        K, n = 16, 4
        rng = np.random.default_rng(3)
        mu_d = np.zeros((n, 3))
        mu_t = np.zeros((n, 3))
        mu_t[:, 0] = [1e5, 1e6, 1e8, 1e12]
        children = rng.standard_normal((n, K, 3))
        start = time.process_time()
        res = V.threshold()(children, mu_d, mu_t, 1.0, rng)
        assert time.process_time() - start < 30.0
        assert not res.accepted.any()
