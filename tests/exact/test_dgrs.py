"""D-GRS closed form: structure of the levels, batch helpers, and a Monte-Carlo run of the rule.

Proof: proofs/P3-dgrs-closed-form.md.  Independent mpmath values: test_accuracy_mpmath.py.
"""
import math

import numpy as np
import pytest
from scipy import integrate, stats

from rass_theory.exact import dgrs


def _phi(s):
    return np.exp(-0.5 * s * s) / math.sqrt(2 * math.pi)


class TestValidation:
    @pytest.mark.parametrize("K", [0, -1, 2.5, "3", True])
    def test_bad_K(self, K):
        with pytest.raises((ValueError, TypeError), match="K"):
            dgrs.levels(K, 1.0)
        with pytest.raises((ValueError, TypeError), match="K"):
            dgrs.rejection_probability(K, 1.0)

    @pytest.mark.parametrize("delta", [-0.1, float("nan"), float("inf")])
    def test_bad_delta(self, delta):
        with pytest.raises(ValueError, match="delta"):
            dgrs.levels(3, delta)
        with pytest.raises(ValueError, match="delta"):
            dgrs.acceptance(3, delta)
        with pytest.raises(ValueError, match="delta"):
            dgrs.batch_accept_prob(1, np.array([delta]), np.array([0.0]))

    def test_levels_need_positive_delta(self):
        with pytest.raises(ValueError, match="delta must be > 0"):
            dgrs.levels(3, 0.0)

    def test_batch_shapes(self):
        with pytest.raises(ValueError, match="s must have the same length"):
            dgrs.batch_accept_prob(1, np.ones(3), np.zeros(4))
        with pytest.raises(ValueError, match="s must be finite"):
            dgrs.batch_accept_prob(1, np.ones(2), np.array([0.0, np.nan]))
        with pytest.raises(ValueError, match="k must be >= 1"):
            dgrs.batch_accept_prob(0, np.ones(2), np.zeros(2))
        with pytest.raises(ValueError, match=r"u must lie in \[0, 1\)"):
            dgrs.batch_sample_final_residual(2, np.ones(2), np.array([0.5, 1.0]))


class TestLevels:
    @pytest.mark.parametrize("delta", [1e-6, 0.05, 0.3, 1.0, 3.0, 9.0])
    def test_k1_is_rmc(self, delta):
        assert dgrs.acceptance(1, delta) == pytest.approx(2 * stats.norm.cdf(-delta / 2), rel=1e-14, abs=1e-300)
        lv = dgrs.levels(1, delta)
        assert lv.acceptance == pytest.approx(1 - lv.P[1], abs=1e-16)
        assert dgrs.rejection_probability(1, delta) == pytest.approx(math.erf(delta / (2 * math.sqrt(2))), rel=1e-14)

    @pytest.mark.parametrize("K,delta", [(3, 0.2), (6, 1.0), (5, 2.5)])
    def test_structure(self, K, delta):
        lv = dgrs.levels(K, delta)
        assert lv.a.shape == lv.b.shape == lv.c.shape == lv.P.shape == (K + 1,)
        assert lv.Z.shape == (K,)
        np.testing.assert_allclose(np.cumprod(lv.Z), lv.P[1:], rtol=1e-13)
        assert np.all((lv.Z > 0) & (lv.Z < 1))
        assert np.all(np.diff(lv.c) > 0)
        # the crossing: a_k f(c_k) = b_k phi(c_k)
        for k in range(1, K + 1):
            c = lv.c[k]
            np.testing.assert_allclose(lv.a[k] * _phi(c - delta), lv.b[k] * _phi(c), rtol=1e-12)
        # each residual is a probability density on [c_k, inf)
        for k in range(1, K + 1):
            mass, err = integrate.quad(lambda s: lv.a[k] * _phi(s - delta) - lv.b[k] * _phi(s), lv.c[k], np.inf,
                                       epsabs=1e-13, epsrel=1e-13)
            assert mass == pytest.approx(1.0, abs=1e-10)
        assert lv.acceptance == pytest.approx(dgrs.acceptance(K, delta), abs=1e-15)

    def test_recursion_pointwise(self):
        """r_k = (r_{k-1} - phi)_+ / Z_k at many points, from the stored coefficients."""
        delta = 0.7
        lv = dgrs.levels(5, delta)
        s = np.linspace(-3, 6, 901)

        def r(k):
            if k == 0:
                return _phi(s - delta)
            return np.where(s >= lv.c[k], lv.a[k] * _phi(s - delta) - lv.b[k] * _phi(s), 0.0)

        for k in range(1, 6):
            np.testing.assert_allclose(r(k), np.maximum(r(k - 1) - _phi(s), 0.0) / lv.Z[k - 1], atol=1e-12)

    def test_masses_match_levels_and_limit(self):
        np.testing.assert_allclose(dgrs.dgrs_residual_masses(6, 0.4), dgrs.levels(6, 0.4).Z, rtol=1e-15)
        z0 = dgrs.dgrs_residual_masses(6, 0.0)
        assert z0[0] == 0.0
        z_small = dgrs.dgrs_residual_masses(6, 1e-7)
        np.testing.assert_allclose(z_small[1:], z0[1:], rtol=1e-6)
        assert dgrs.rejection_probability(6, 1e-120) / 1e-120 == pytest.approx(
            dgrs.rejection_probability(6, 1e-9) / 1e-9, rel=1e-8)

    def test_accept_monotone_and_bounded(self):
        for delta in (1e-8, 0.01, 0.5, 2.0, 16.0, 40.0):
            acc = [dgrs.acceptance(K, delta) for K in range(1, 40)]
            assert all(0.0 <= a <= 1.0 for a in acc)
            assert all(b >= a for a, b in zip(acc, acc[1:]))

    def test_large_K(self):
        acc = dgrs.acceptance(1024, 0.5)
        assert 0.99 < acc <= 1.0
        assert dgrs.rejection_probability(1024, 0.5) > 0.0


class TestBatchAcceptProb:
    def test_matches_levels(self, rng):
        deltas = np.array([0.0, 1e-9, 0.05, 0.6, 1.5, 4.0])
        n = deltas.size
        for k in (1, 2, 4):
            s = rng.normal(size=n) + 1.0
            got = dgrs.batch_accept_prob(k, deltas, s)
            assert got.shape == (n,) and np.all((got >= 0) & (got <= 1))
            for i, d in enumerate(deltas):
                if d == 0.0:
                    continue
                if k == 1:
                    want = min(1.0, _phi(s[i] - d) / _phi(s[i]))
                else:
                    lv = dgrs.levels(k - 1, d)
                    r = max(lv.a[k - 1] * _phi(s[i] - d) - lv.b[k - 1] * _phi(s[i]), 0.0)
                    want = min(1.0, r / _phi(s[i]))
                # the reference a f - b phi cancels ~1/d-fold when d is tiny
                assert got[i] == pytest.approx(want, abs=1e-6 if d < 1e-6 else 1e-12)
        assert dgrs.batch_accept_prob(1, np.zeros(3), np.array([-5.0, 0.0, 5.0])).tolist() == [1.0, 1.0, 1.0]

    def test_scalar_delta_broadcasts(self):
        s = np.linspace(-2, 3, 7)
        np.testing.assert_array_equal(dgrs.batch_accept_prob(3, 0.8, s), dgrs.batch_accept_prob(3, np.full(7, 0.8), s))


class TestFinalResidualSampler:
    @pytest.mark.parametrize("K", [1, 3, 8])
    def test_inverts_survival(self, K):
        deltas = np.array([0.0, 1e-6, 0.05, 0.5, 1.0, 3.0, 8.0])
        for u0 in (0.0, 1e-6, 0.1, 0.5, 0.9, 0.999999):
            u = np.full(deltas.size, u0)
            s = dgrs.batch_sample_final_residual(K, deltas, u)
            assert np.all(np.isfinite(s))
            sf = dgrs.final_residual_sf(K, deltas, s)
            np.testing.assert_allclose(sf, 1.0 - u, atol=1e-12 if u0 > 1e-8 else 1e-9)
        for d in deltas[deltas > 0]:
            lv = dgrs.levels(K, d)
            s0 = dgrs.batch_sample_final_residual(K, np.array([d]), np.array([0.0]))
            assert s0[0] == pytest.approx(lv.c[-1], abs=1e-12)

    def test_monotone_in_u(self):
        u = np.linspace(0, 1, 401, endpoint=False)
        s = dgrs.batch_sample_final_residual(4, np.full(u.size, 0.9), u)
        assert np.all(np.diff(s) > 0)

    def test_survival_against_quadrature(self):
        K, delta = 3, 1.2
        lv = dgrs.levels(K, delta)
        for x in (lv.c[-1] + 0.1, lv.c[-1] + 1.0, lv.c[-1] + 3.0):
            want, _ = integrate.quad(lambda s: lv.a[K] * _phi(s - delta) - lv.b[K] * _phi(s), x, np.inf,
                                     epsabs=1e-14, epsrel=1e-13)
            assert dgrs.final_residual_sf(K, np.array([delta]), np.array([x]))[0] == pytest.approx(want, abs=1e-12)


class TestMonteCarloRule:
    """Run D-GRS on the s-coordinate with the batch helpers: output must be N(delta, 1)."""

    @pytest.mark.parametrize("K,delta", [(3, 0.8), (2, 2.0)])
    def test_output_law_and_acceptance(self, K, delta, rng):
        n = 100_000
        s_children = rng.normal(size=(n, K))
        out = np.empty(n)
        accepted_at = np.full(n, -1)
        pending = np.ones(n, dtype=bool)
        d = np.full(n, delta)
        for k in range(1, K + 1):
            idx = np.flatnonzero(pending)
            p = dgrs.batch_accept_prob(k, d[idx], s_children[idx, k - 1])
            acc = rng.random(idx.size) < p
            out[idx[acc]] = s_children[idx[acc], k - 1]
            accepted_at[idx[acc]] = k
            pending[idx[acc]] = False
        idx = np.flatnonzero(pending)
        out[idx] = dgrs.batch_sample_final_residual(K, d[idx], rng.random(idx.size))
        # output law: KS against N(delta, 1); with this fixed seed the test is deterministic
        assert stats.kstest(out - delta, "norm").pvalue > 1e-3
        lv = dgrs.levels(K, delta)
        for k in range(1, K + 1):  # P(accept exactly at step k) = P_{k-1} - P_k
            p = lv.P[k - 1] - lv.P[k]
            rate = np.mean(accepted_at == k)
            assert abs(rate - p) / math.sqrt(p * (1 - p) / n) < 4.5
