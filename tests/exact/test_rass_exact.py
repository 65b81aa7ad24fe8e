"""RASS exactness and TV accuracy (proof P2, P7).

* The exactness identity ``g_w min(1, f/g_w) + TV r = f`` pointwise (hypothesis over weights).
* ``rass_tv`` against a small independent mpmath oracle (defined below), with relative accuracy
  at ``delta = 1e-8`` and ``1e-4`` where ``TV = O(delta)``.
* Monte Carlo: the whole RASS node rule (rank draw, maximal coupling, residual) outputs ``f``.
"""
import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rass_theory.exact import batch
from rass_theory.exact import normal as nm
from rass_theory.exact import rass
from rass_theory.exact.selected import residual_law, selected_law



def _mp_weights(weights):
    w = [mp.mpf(float(x)) for x in weights]
    total = mp.fsum(w)
    return [x / total for x in w]


def _ratio(w, s):
    """g_w(s) / phi(s) in mpmath."""
    K = len(w)
    p, q = mp.ncdf(s), mp.ncdf(-s)
    return mp.fsum(w[j] * K * mp.binomial(K - 1, j) * p**j * q ** (K - 1 - j) for j in range(K))


def _G(w, s):
    K = len(w)
    if s == mp.inf:
        return mp.mpf(1)
    if s == -mp.inf:
        return mp.mpf(0)
    p, q = mp.ncdf(s), mp.ncdf(-s)
    total = mp.mpf(0)
    cum = mp.mpf(0)
    for k in range(K + 1):
        total += cum * mp.binomial(K, k) * p**k * q ** (K - k)
        if k < K:
            cum += w[k]
    return total


def tv_oracle(weights, delta, starts, dps: int = 60):
    """TV(g_w, f) at ``dps`` digits; ``starts`` are float approximations of the crossings."""
    with mp.workdps(dps):
        w = _mp_weights(weights)
        d = mp.mpf(float(delta))

        def h(s):
            return d * s - d * d / 2 - mp.log(_ratio(w, s))

        roots = sorted(mp.findroot(h, mp.mpf(float(c))) for c in starts)
        bounds = [-mp.inf] + roots + [mp.inf]
        tv = mp.mpf(0)
        for a, b in zip(bounds[:-1], bounds[1:]):
            mid = (a + b) / 2 if (a != -mp.inf and b != mp.inf) else (b - 1 if a == -mp.inf else a + 1)
            if h(mid) <= 0:
                continue
            Fa = mp.ncdf(a - d) if a != -mp.inf else mp.mpf(0)
            Fb = mp.ncdf(b - d) if b != mp.inf else mp.mpf(1)
            tv += (Fb - Fa) - (_G(w, b) - _G(w, a))
        return tv


def _near_uniform(K, delta, scale=0.3):
    """Weights 1/K + delta * scale * c with sum(c) = 0: optimal-like weights at small delta."""
    j = np.arange(K)
    c = (j - (K - 1) / 2) / K
    return 1.0 / K + delta * scale * c


class TestExactnessIdentity:
    @settings(max_examples=25, deadline=None)
    @given(
        raw=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8).filter(lambda v: sum(v) > 0.05),
        delta=st.floats(0.0, 6.0),
    )
    def test_accept_plus_residual_is_target(self, raw, delta):
        w = np.asarray(raw) / np.sum(raw)
        law = selected_law(w, delta)
        res = residual_law(w, delta)
        s = np.linspace(-8.0, delta + 8.0, 201)
        f = np.exp(nm.log_phi(s - delta))
        g = law.pdf(s)
        with np.errstate(divide="ignore", invalid="ignore"):
            accept = np.where(g > 0, np.minimum(1.0, f / g), 1.0)
        out = g * accept + res.mass * res.pdf(s) if res.mass > 0 else g * accept + np.maximum(f - g, 0)
        assert np.allclose(out, f, rtol=0, atol=1e-12)
        # acceptance = 1 - TV
        assert 0.0 <= res.mass <= 1.0
        assert rass.rass_acceptance(w, delta) == pytest.approx(1.0 - res.mass, abs=1e-15)

    def test_K1_reduces_to_rmc(self):
        for delta in (1e-8, 0.3, 1.0, 5.0):
            expected = nm.interval_mass(-delta / 2, delta / 2)  # 2 Phi(delta/2) - 1
            assert rass.rass_tv([1.0], delta) == pytest.approx(float(expected), rel=1e-13)

    def test_uniform_weights_equal_rmc(self):
        for K in (2, 3, 8):
            for delta in (1e-6, 0.5, 2.0):
                expected = nm.interval_mass(-delta / 2, delta / 2)
                assert rass.rass_tv(np.full(K, 1.0 / K), delta) == pytest.approx(float(expected), rel=1e-13)

    def test_crossings_sorted_and_are_crossings(self):
        w = np.array([0.4, 0.0, 0.1, 0.5])
        c = rass.crossings(w, 0.8)
        assert np.all(np.diff(c) > 0)
        law = selected_law(w, 0.8)
        assert np.allclose(law.logpdf(c), nm.log_phi(c - 0.8), atol=1e-12)


class TestTVAccuracy:
    @pytest.mark.parametrize("K", [1, 2, 3, 4, 8, 16])
    @pytest.mark.parametrize("delta", [1e-8, 1e-4, 0.01, 1.0])
    def test_relative_accuracy_against_mpmath(self, K, delta):
        w = _near_uniform(K, delta, scale=0.3 if delta < 0.5 else 0.1)
        tv = rass.rass_tv(w, delta)
        ref = tv_oracle(w, delta, rass.crossings(w, delta))
        assert abs(tv - float(ref)) <= 1e-12 * float(ref)

    @pytest.mark.parametrize("K, delta", [(5, 0.5), (8, 2.0), (32, 1.0)])
    def test_random_weights_against_mpmath(self, K, delta):
        w = np.random.default_rng(K).dirichlet(np.ones(K))
        tv = rass.rass_tv(w, delta)
        ref = tv_oracle(w, delta, rass.crossings(w, delta))
        assert abs(tv - float(ref)) <= 1e-13

    def test_validation(self):
        with pytest.raises(ValueError, match="weights must sum to 1"):
            rass.rass_tv([0.3, 0.3], 1.0)
        with pytest.raises(ValueError, match="delta must be finite"):
            rass.rass_tv([0.5, 0.5], np.inf)
        with pytest.raises(ValueError, match="delta must be >= 0"):
            rass.crossings([0.5, 0.5], -0.1)


class TestRassNodeMonteCarlo:
    """Rank draw + maximal coupling + residual outputs s ~ N(delta, 1) for arbitrary weights."""

    @pytest.mark.parametrize("weights, delta", [([0.7, 0.1, 0.1, 0.1], 0.8), ([0.0, 0.0, 1.0], 1.5)])
    def test_output_law_is_target(self, weights, delta):
        rng = np.random.default_rng(31)
        n, K = 20_000, len(weights)
        w = np.asarray(weights)
        children = np.sort(rng.standard_normal((n, K)), axis=1)
        j = rng.choice(K, size=n, p=w)
        s = children[np.arange(n), j]
        d = np.full(n, delta)
        log_ratio = batch.target_logpdf(d, s) - batch.selected_logpdf(w, d, s)
        accept = np.log(rng.random(n)) < np.minimum(log_ratio, 0.0)
        out = s.copy()
        rej = ~accept
        out[rej] = batch.sample_residual(w, d[rej], rng.random(rej.sum()))
        # acceptance rate against 1 - TV, within 4.5 standard errors
        acc = 1.0 - rass.rass_tv(w, delta)
        se = np.sqrt(acc * (1 - acc) / n)
        assert abs(accept.mean() - acc) < 4.5 * se
        assert stats.kstest(out - delta, "norm").pvalue > 1e-3
