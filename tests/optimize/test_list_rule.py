"""The optimal list rule (proofs/P10-optimal-list-rule.md): its acceptance is the list-coupling
bound, its selected law is g*, and every step the proof uses holds numerically."""
import dataclasses

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import log_ndtr, ndtr

import rass_theory as rt
from rass_theory.exact.batch import sample_residual_generic
from rass_theory.optimize import list_rule as lr

GRID_K = (2, 3, 4, 8, 16)
GRID_DELTA = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
mp.mp.dps = 40


# ------------------------------------------------------------------------------------------------
# independent mpmath reference
# ------------------------------------------------------------------------------------------------

def _mp_Phi(x):
    return mp.ncdf(x)


def _mp_bound(K, delta):
    """``min_t J(t)``: J' = f - K phi Phi^(K-1) vanishes at the larger crossing (mpmath findroot)."""
    K, delta = mp.mpf(K), mp.mpf(delta)

    def dlog(t):  # log f - log g_max
        return delta * t - delta ** 2 / 2 - mp.log(K) - (K - 1) * mp.log(_mp_Phi(t))

    t0 = delta / 2 + mp.log(K) / delta
    t = mp.findroot(dlog, t0)
    # the larger root: dlog increasing there
    assert mp.diff(dlog, t) > 0
    return _mp_Phi(t - delta) + 1 - _mp_Phi(t) ** K, t


def _mp_rule_acceptance(K, delta, t_hint, t_cross):
    """``int min(f, g*)`` by mpmath quadrature, with ``t_a`` from mpmath's own root of
    ``Phi(t)^K = Phi(t - delta)`` and ``g*`` built from its definition."""
    K, delta = mp.mpf(K), mp.mpf(delta)
    t_a = mp.findroot(lambda t: _mp_Phi(t) ** K - _mp_Phi(t - delta), mp.mpf(t_hint))

    def f(x):
        return mp.npdf(x - delta)

    def g(x):
        return f(x) if x < t_a else K * mp.npdf(x) * _mp_Phi(x) ** (K - 1)

    pts = sorted([t_a - 8, t_a, t_cross, t_cross + 4, t_cross + 12])
    pts = [-mp.inf] + pts + [mp.inf]
    mass = mp.quad(g, pts)
    acc = mp.quad(lambda x: min(f(x), g(x)), pts)
    return acc, mass, t_a


SLOW = pytest.mark.slow


@pytest.mark.parametrize("K,delta", [(2, 0.25), (4, 0.5), pytest.param(3, 1.0, marks=SLOW),
                                     pytest.param(8, 1.5, marks=SLOW), pytest.param(16, 3.0, marks=SLOW),
                                     pytest.param(4, 4.0, marks=SLOW)])
def test_acceptance_matches_mpmath(K, delta):
    rule = rt.optimal_list_rule(K, delta)
    bound, t_cross = _mp_bound(K, delta)
    acc, mass, t_a = _mp_rule_acceptance(K, delta, rule.t_keep, t_cross)
    assert abs(mass - 1) < 1e-15
    assert abs(float(t_a) - rule.t_keep) < 1e-10 * max(1.0, abs(rule.t_keep))
    assert abs(float(acc) - rule.acceptance) < 1e-13
    assert abs(float(bound) - rule.acceptance) < 1e-13
    assert abs(float(1 - bound) - rule.rejection_probability) <= 1e-12 * float(1 - bound) + 1e-300


@pytest.mark.parametrize("K", GRID_K)
def test_grid_attains_bound(K):
    for delta in GRID_DELTA:
        rule = rt.optimal_list_rule(K, delta)
        assert rule.status == "optimal", (K, delta, rule.status)
        assert abs(rule.acceptance - rt.acceptance_bound(K, delta)) <= 1e-15, (K, delta)
        assert abs(rule.gap) <= 1e-15
        assert rt.acceptance("optimal_list", K, delta) == rule.acceptance
        assert rt.rejection_probability("optimal_list", K, delta) == rule.rejection_probability


@pytest.mark.parametrize("K,delta", [(1, 0.7), (1, 3.0), (2, 0.0), (5, 0.0), (4, 1e-9), (8, 1e-5), (2, 40.0),
                                     (1024, 0.5), (64, 10.0)])
def test_edge_cases_optimal(K, delta):
    rule = rt.optimal_list_rule(K, delta)
    assert rule.status == "optimal"
    assert abs(rule.acceptance - rt.acceptance_bound(K, delta)) <= 2e-16
    if K == 1:  # one child: the rule is RMC
        assert rule.acceptance == pytest.approx(rt.acceptance("rmc", 1, delta), abs=1e-15)


# ------------------------------------------------------------------------------------------------
# the lemmas of P10, numerically
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K,delta", [(2, 0.5), (3, 0.1), (4, 1.0), (8, 2.0), (16, 0.25)])
def test_root_order_and_feasibility(K, delta):
    """t_lo < t_a < t*; G*(s) >= Phi(s)^K everywhere (feasible for an increasing g*/phi) and
    g*/phi increasing with an upward jump at t_a (P10 Lemma 1-2)."""
    rule = rt.optimal_list_rule(K, delta)
    p = rule.params
    assert p.t_low[0] < p.t_keep[0] < p.t_star[0]
    s = np.linspace(-8, p.t_star[0] + 3, 20001)
    G = rule.selected_cdf(s)
    assert np.all(G >= np.exp(K * log_ndtr(s)) - 1e-15)
    ratio = rule.selected_logpdf(s) + 0.5 * s * s + 0.5 * np.log(2 * np.pi)
    assert np.all(np.diff(ratio) > -1e-12)


@pytest.mark.parametrize("K,delta", [(2, 0.5), (3, 0.1), (4, 1.0), (8, 2.0), (16, 0.25), (4, 0.05)])
def test_priority_kernel_identities(K, delta):
    """q in [0, 1] before clipping; (1 - q) a + q M = m below t_a; the fake-key law nu has
    E_nu[a] = M (so keys are uniform and E[Phi(key)^(K-1) | s] = f/(K phi)) (P10 Lemma 3)."""
    rule = rt.optimal_list_rule(K, delta)
    p = rule.params
    t_a, lc, M = p.t_keep[0], p.log_c[0], np.exp(p.log_M[0])
    s = np.linspace(max(-10.0, p.t_low[0] - 8), t_a, 4001)[:-1]
    with np.errstate(all="ignore"):
        m = np.exp(delta * s - 0.5 * delta ** 2 - np.log(K) - (K - 1) * lc)
        a = np.exp((K - 1) * (log_ndtr(s) - lc))
        raw = (m - a) / (M - a)
    raw = raw[np.abs(M - a) > 1e-6 * M]
    assert raw.min() >= -1e-9 and raw.max() <= 1 + 1e-9
    q = lr.fake_probability(p, s)
    assert np.allclose((1 - q) * a + q * M, m, rtol=1e-9, atol=1e-14)

    def phi(x):
        return np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)

    def nu(x):
        return phi(x) * lr.fake_probability(p, np.array([x]))[0]

    lo = min(-12.0, p.t_low[0] - 12)
    brk = [p.t_low[0]]
    Z = integrate.quad(nu, lo, t_a, points=brk, limit=400, epsabs=1e-14)[0]
    Ea = integrate.quad(lambda x: nu(x) * np.exp((K - 1) * (log_ndtr(x) - lc)), lo, t_a,
                        points=brk, limit=400, epsabs=1e-14)[0] / Z
    assert Ea == pytest.approx(M, rel=1e-7)


# ------------------------------------------------------------------------------------------------
# Monte Carlo: the selection realises g*
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K,delta", [(2, 0.5), (4, 0.5), (4, 1.0), (3, 4.0), pytest.param(8, 0.25, marks=SLOW),
                                     pytest.param(16, 2.0, marks=SLOW)])
def test_selected_law_monte_carlo(K, delta):
    """Selected s binned into 40 equiprobable bins of g*: every count within 4.5 SE
    (binomial; familywise false-fail < 40 * 7e-6 per case) and the KS p-value above 1e-4."""
    rule = rt.optimal_list_rule(K, delta)
    rng = np.random.default_rng(1000 + 17 * K + int(100 * delta))
    n = 200_000
    s = rng.standard_normal((n, K))
    child = rule.select(s, rng)
    sel = s[np.arange(n), child]
    u = rule.selected_cdf(sel)
    counts = np.histogram(u, bins=40, range=(0, 1))[0]
    p = 1 / 40
    se = np.sqrt(n * p * (1 - p))
    assert np.max(np.abs(counts - n * p)) < 4.5 * se
    assert stats.kstest(sel, lambda x: rule.selected_cdf(x)).pvalue > 1e-4


def test_selection_differs_from_max_rule():
    """The test above can fail: the max rule's law is rejected by the same histogram test."""
    rule = rt.optimal_list_rule(4, 0.5)
    rng = np.random.default_rng(5)
    n = 200_000
    sel = rng.standard_normal((n, 4)).max(axis=1)
    counts = np.histogram(rule.selected_cdf(sel), bins=40, range=(0, 1))[0]
    assert np.max(np.abs(counts - n / 40)) > 4.5 * np.sqrt(n / 40 * (1 - 1 / 40))


# ------------------------------------------------------------------------------------------------
# residual draw
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K,delta", [(1, 1.0), (2, 0.5), (4, 1.0), (16, 2.0), (3, 4.0), (3, 8.0), (2, 40.0)])
def test_residual_inverse_cdf(K, delta):
    """Round trip through the residual CDF; at large delta (where 1 - Phi^K is below the rounding
    of Q(x - delta) at the upper bracket end) no draw is stuck at a bracket end."""
    rule = rt.optimal_list_rule(K, delta)
    u = np.random.default_rng(3).random(2000)
    x = rule.sample_residual(u)
    assert np.all(x >= rule.t_star)
    assert np.unique(x).size == x.size
    Kf, df = np.full(x.size, float(K)), np.full(x.size, delta)
    back = 1 - np.exp(lr._log_E(x, Kf, df) - rule.params.log_rejection[0])
    assert np.max(np.abs(back - u)) < 1e-11


@pytest.mark.parametrize("K,delta", [(4, 1.0), (8, 2.0)])
def test_residual_agrees_with_generic_engine(K, delta):
    """Same inverse CDF as the shared residual engine fed with g*'s log density and CDF."""
    rule = rt.optimal_list_rule(K, delta)
    u = np.random.default_rng(4).random(200)
    d = np.full(u.size, delta)

    def log_g(s):
        return rule.selected_logpdf(s)

    def cdf_g(s):
        return rule.selected_cdf(s)

    ref = sample_residual_generic(log_g, cdf_g, d, u)
    assert np.max(np.abs(rule.sample_residual(u) - ref)) < 1e-8


# ------------------------------------------------------------------------------------------------
# per-row solve, caching, statuses, bad input
# ------------------------------------------------------------------------------------------------

def test_vector_solve_matches_scalar():
    deltas = np.array([0.0, 1e-7, 0.05, 0.3, 1.0, 2.5, 7.0])
    P = lr.solve_list_rule(4, deltas)
    assert P.converged.all()
    for i, d in enumerate(deltas):
        q = rt.optimal_list_rule(4, float(d)).params
        for f in ("t_keep", "t_star", "log_c"):
            a, b = getattr(P, f)[i], getattr(q, f)[0]
            assert a == b or abs(a - b) <= 1e-12 * max(1.0, abs(b)), (f, d)


def test_cached_and_frozen():
    a, b = rt.optimal_list_rule(4, 0.5), rt.optimal_list_rule(4, 0.5)
    assert a is b
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.acceptance = 1.0


def test_failed_status_refuses_to_select():
    bad = dataclasses.replace(rt.optimal_list_rule(4, 0.5), status="failed: test")
    with pytest.raises(RuntimeError, match="failed: test"):
        bad.select(np.zeros((3, 4)), np.random.default_rng(0))
    with pytest.raises(RuntimeError):
        bad.sample_residual(np.array([0.5]))


@pytest.mark.parametrize("K,delta,exc,word", [(0, 0.5, ValueError, "K"), (2.5, 0.5, (TypeError, ValueError), "K"),
                                               (True, 0.5, (TypeError, ValueError), "K"),
                                               (4, -0.1, ValueError, "delta"), (4, np.nan, ValueError, "delta"),
                                               (4, np.inf, ValueError, "delta"), (4, "a", TypeError, "delta"),
                                               (4, [0.1, 0.2], ValueError, "delta")])
def test_bad_input(K, delta, exc, word):
    with pytest.raises(exc, match=word):
        rt.optimal_list_rule(K, delta)


def test_select_shape_checked():
    with pytest.raises(ValueError, match="s must have shape"):
        rt.optimal_list_rule(4, 0.5).select(np.zeros((3, 5)), np.random.default_rng(0))


def test_degenerate_and_single_child_select_first():
    rng = np.random.default_rng(0)
    assert np.all(rt.optimal_list_rule(3, 0.0).select(rng.standard_normal((5, 3)), rng) == 0)
    assert np.all(rt.optimal_list_rule(1, 0.5).select(rng.standard_normal((5, 1)), rng) == 0)


def test_cdf_matches_density():
    rule = rt.optimal_list_rule(4, 0.75)
    for x in (-1.0, rule.t_keep - 0.01, rule.t_keep + 0.5, 3.0):
        val = integrate.quad(lambda s: np.exp(rule.selected_logpdf(np.array([s]))[0]), -40.0, x,
                             points=None if x < rule.t_keep else [rule.t_keep], epsabs=1e-14, limit=200)[0]
        assert val == pytest.approx(float(rule.selected_cdf(np.array([x]))[0]), abs=1e-10)
    assert float(ndtr(0.0)) == 0.5  # scipy sanity for the references above


class TestSelectedLawProtocol:
    """``OptimalListLaw`` implements ``exact.laws.SelectedLaw``: the engine's residual sampler on it
    draws the same residual as the rule's own log-space inverse (which the verifiers keep: it
    stays relatively accurate in the far tail, where the engine's linear-space inverse is off by
    1e-3 at u = 1 - 1e-14)."""

    @pytest.mark.parametrize("K,delta", [(4, 1.0), (16, 2.0), (2, 0.3)])
    def test_engine_sample_matches_rule_residual(self, K, delta):
        from rass_theory.exact import laws

        p = lr.rule_params(K, np.array([delta]))
        u = np.linspace(1e-3, 1 - 1e-3, 501)
        own = lr.sample_residual(p, u)
        eng = laws.sample(lr.OptimalListLaw(K, p), np.full(u.size, delta), u)
        np.testing.assert_allclose(eng, own, atol=1e-8, rtol=0)

    def test_cdf_excess_and_ratio_are_the_rule_law(self):
        p = lr.rule_params(4, np.array([0.3, 1.0, 2.5]))
        law = lr.OptimalListLaw(4, p)
        s = np.linspace(-4.0, 6.0, 41)[None, :].repeat(3, 0)
        col = p.column()
        np.testing.assert_allclose(law.cdf_excess(s), lr.selected_cdf(col, s) - ndtr(s), atol=1e-15)
        np.testing.assert_array_equal(law.log_ratio(s), lr.log_selected_ratio(col, s))
        assert law.take(np.array([1])).params.delta[0] == 1.0 and law.keys().shape == (3, 1)
