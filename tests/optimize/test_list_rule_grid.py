"""The optimal list rule at every K >= 2 and delta > 0 (issue 18, part 1; proofs/P10 P10.6).

Every point of a K x delta grid is checked against the independent 30-digit reference of
``mp_list_reference.py``: no exception, acceptance within 1e-12 of alpha*, t_a and t* to a
relative 1e-12, the TV bound |D(t_a)| of the float constants (evaluated in mpmath) at most
1e-12, and the rejection probability to a relative 1e-10 where it is representable.  The dense
grid is slow; a representative subset (including the points that failed before: K = 64,
delta = 8.338958619827478 and K = 1024, delta = 16, where t_a was 1.8135 instead of 1.2601)
runs in the fast suite.  Certification failures raise a ValueError naming K, delta and the
check, on the scalar and on the vectorised path.
"""
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import rass_theory as rt
from rass_theory.optimize import list_rule as lr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mp_list_reference as ref  # noqa: E402

GRID_K = (2, 3, 4, 5, 8, 16, 32, 64, 128, 256, 512, 1024)
#: 64 log-spaced deltas in [1e-3, 40] plus the values of the issue (8.34-8.88, 12, 16, 18-37)
GRID_DELTA = tuple(sorted(set(np.geomspace(1e-3, 40.0, 64).tolist()
                              + [8.338958619827478, 8.5, 8.88, 12.0, 16.0, 18.0, 25.0, 37.0])))
FAST_POINTS = [(2, 1e-3), (2, 40.0), (3, 0.05), (5, 2.0), (32, 5.0), (64, 8.338958619827478), (64, 8.88),
               (128, 12.0), (256, 0.3), (1024, 1e-3), (1024, 16.0), (1024, 18.0), (1024, 37.0)]


def _check_point(K, delta):
    rule = rt.optimal_list_rule(K, delta)  # raises ListRuleCertificateError if not certified
    assert rule.status == "optimal"
    alpha, rej, t_a, t2 = ref.reference(K, delta)
    assert abs(rule.acceptance - float(alpha)) <= 1e-12, (K, delta, rule.acceptance, float(alpha))
    assert rt.acceptance("optimal_list", K, delta) == rule.acceptance
    assert abs(rule.t_keep - float(t_a)) <= 1e-12 * max(1.0, abs(float(t_a))), (K, delta, rule.t_keep, float(t_a))
    assert abs(rule.t_star - float(t2)) <= 1e-12 * max(1.0, abs(float(t2))), (K, delta, rule.t_star, float(t2))
    # the TV bound of P10.6 for the constants actually used, evaluated independently
    tv = float(ref.defect(rule.t_keep, K, delta))
    assert tv <= lr.CERTIFICATE_TOL, (K, delta, tv)
    assert abs(float(rule.params.mass_defect[0]) - tv) <= 1e-15, (K, delta)
    if rej > 1e-290:
        assert abs(rule.rejection_probability - float(rej)) <= 1e-10 * float(rej), (K, delta)
    return rule


@pytest.mark.parametrize("K,delta", FAST_POINTS)
def test_representative_points_match_mpmath(K, delta):
    _check_point(K, delta)


def test_issue_examples():
    """The two examples of the issue: no exception at K = 64, delta = 8.3390, and t_a = 1.2601
    (not 1.8135) at K = 1024, delta = 16."""
    rt.optimal_list_rule(64, 8.338958619827478)
    assert rt.optimal_list_rule(1024, 16.0).t_keep == pytest.approx(1.2600713610204323, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("K", GRID_K)
def test_dense_grid_matches_mpmath(K):
    """Every grid point, scalar path, and the vectorised (per-row) solve of the whole row of the
    grid certifies and agrees with the scalar solve."""
    for delta in GRID_DELTA:
        _check_point(K, delta)
    table = lr.solve_list_rule(K, np.array(GRID_DELTA)).certify()
    for i, delta in enumerate(GRID_DELTA):
        p = rt.optimal_list_rule(K, delta).params
        for f in ("t_keep", "t_low", "t_star", "log_c", "log_M", "acceptance"):
            a, b = getattr(table, f)[i], getattr(p, f)[0]
            assert a == b or abs(a - b) <= 1e-13 * max(1.0, abs(b)), (K, delta, f, a, b)


def test_few_distinct_deltas_take_the_vectorised_path_with_the_scalar_constants():
    """rule_params on 2..32 distinct deltas: one vectorised solve (no per-value loop), constants
    bit-identical to the cached scalar rules, rows in the batch's order, every check run."""
    deltas = np.array([2.5, 0.004, 0.7, 2.5, 31.0, 0.7, 1e-3])
    for K in (2, 5, 1024):
        p = lr.rule_params(K, deltas)
        assert p.delta.shape == deltas.shape and np.array_equal(p.delta, deltas)
        for i, d in enumerate(deltas):
            q = rt.optimal_list_rule(K, float(d)).params
            for f in p.__dataclass_fields__:
                assert np.array_equal(getattr(p, f)[i], getattr(q, f)[0], equal_nan=True), (K, d, f)
    shared = lr.rule_params(4, np.full(9, 0.3))
    assert shared.delta.shape == (1,) and shared is rt.optimal_list_rule(4, 0.3).params


def test_by_branch_one_branch_everywhere_matches_the_split():
    """``_by_branch`` with every element on one side (no gathers) gives the values of ``where``."""
    x = np.linspace(0.5, 9.0, 50)
    for v in (x, -x, np.concatenate([x, -x])):
        got = lr._log_Phi(v)
        with np.errstate(divide="ignore"):
            want = np.where(v > 0, np.log1p(-stats.norm.sf(v)), stats.norm.logcdf(np.minimum(v, 0.0)))
        np.testing.assert_allclose(got, want, rtol=1e-14)
    pair = lr._by_branch(x > 0, lambda a: (a, 2 * a), lambda a: (-a, a), x)
    assert isinstance(pair, tuple) and np.array_equal(pair[1], 2 * x)
    pair[0][0] = 7.0                                   # a fresh array, not a view of the input
    assert x[0] == 0.5


def test_vectorised_solve_certifies_the_fast_grid():
    """> 32 distinct deltas per K (the path that skipped two checks before): all certified."""
    deltas = np.geomspace(1e-3, 40.0, 200)
    for K in (2, 64, 1024):
        table = lr.solve_list_rule(K, deltas)
        assert table.failed_checks() == []
        assert np.all(table.mass_defect <= 1e-15) and np.all(np.abs(table.gap) <= 1e-15)


# ------------------------------------------------------------------------------------------------
# certification failures: ValueError naming K, delta and the failed check
# ------------------------------------------------------------------------------------------------

def _corrupt(p, **fields):
    return dataclasses.replace(p, **{k: v for k, v in fields.items()})


def test_certify_names_the_mass_defect():
    p = lr.solve_list_rule(64, np.linspace(0.5, 4.0, 40))
    bad = p.t_keep.copy()
    bad[7] += 0.05  # wrong t_a: D(t_a) no longer 0
    defect = np.abs(lr._D(bad, np.full(p.delta.size, 64.0), p.delta))
    assert defect[7] > 1e-6 and np.all(np.delete(defect, 7) <= 1e-15)
    q = _corrupt(p, t_keep=bad, mass_defect=defect)
    with pytest.raises(ValueError, match=r"K=64, delta=.*mass defect") as info:
        q.certify()
    assert info.value.delta == float(p.delta[7]) and info.value.K == 64
    assert [i for i, _ in q.failed_checks()] == [7]


def test_certify_names_the_gap_and_convergence():
    p = lr.solve_list_rule(8, np.linspace(0.5, 3.0, 40))
    gap = p.gap.copy()
    gap[3] = 1e-6
    with pytest.raises(ValueError, match=r"K=8, delta=0\.69.*bound by 1e-06"):
        _corrupt(p, gap=gap).certify()
    conv = p.converged.copy()
    conv[0] = False
    with pytest.raises(ValueError, match=r"K=8, delta=0\.5: root finding"):
        _corrupt(p, converged=conv).certify()


def test_verifier_raises_value_error_on_uncertified_batch(monkeypatch):
    """rule_params on several distinct deltas certifies every row; a failure is a ValueError."""
    import importlib

    vol = importlib.import_module("rass_theory.verifiers.optimal_list")

    real = lr.solve_list_rule

    def broken(K, delta):
        p = real(K, delta)
        d = p.mass_defect.copy()
        d[-1] = 1e-3
        return dataclasses.replace(p, mass_defect=d)

    monkeypatch.setattr(lr, "solve_list_rule", broken)
    with pytest.raises(ValueError, match=r"K=4, delta=.*mass defect"):
        vol.rule_params(4, np.linspace(0.1, 3.0, 100))


def test_error_is_also_a_runtime_error():
    err = lr.ListRuleCertificateError(4, 0.5, "test")
    assert isinstance(err, ValueError) and isinstance(err, RuntimeError)
    assert "K=4, delta=0.5: test" in str(err)


# ------------------------------------------------------------------------------------------------
# edge inputs of the public entry points
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("delta", [1e-12, 1e-30, 1e-200, 5e-324])
def test_tiny_delta(delta):
    """Tiny delta: acceptance 1 to rounding, t_a and t* beyond float resolution handled."""
    for K in (2, 4, 1024):
        rule = rt.optimal_list_rule(K, delta)
        assert rule.acceptance == 1.0 and rule.rejection_probability == 0.0
        assert rt.acceptance("optimal_list", K, delta) == 1.0
        assert rule.t_keep <= rule.t_star


def test_degenerate_and_single_child():
    for K in (2, 7):
        rule = rt.optimal_list_rule(K, 0.0)
        assert rule.acceptance == 1.0 and rule.t_keep == np.inf
    for delta in (1e-12, 0.5, 40.0):
        assert rt.acceptance("optimal_list", 1, delta) == pytest.approx(rt.acceptance("rmc", 1, delta), abs=1e-15)


def test_vectorised_edges_match_scalar():
    deltas = np.array([0.0, 1e-12, 1e-3, 0.5, 8.338958619827478, 40.0])
    for K in (1, 2, 1024):
        table = lr.solve_list_rule(K, deltas).certify()
        for i, d in enumerate(deltas):
            assert table.acceptance[i] == pytest.approx(rt.acceptance("optimal_list", K, float(d)), abs=1e-15)


@pytest.mark.parametrize("K,delta,exc,word", [(0, 0.5, ValueError, "K"), (-3, 0.5, ValueError, "K"),
                                               (2.5, 0.5, TypeError, "K"), (4, -1e-300, ValueError, "delta"),
                                               (4, np.nan, ValueError, "delta"), (4, [0.5], ValueError, "delta")])
def test_acceptance_bad_input(K, delta, exc, word):
    with pytest.raises(exc, match=word):
        rt.acceptance("optimal_list", K, delta)


# ------------------------------------------------------------------------------------------------
# the priority kernel at large K delta: q, its envelope, the fake-key law
# ------------------------------------------------------------------------------------------------

EXTREME = [(128, 40.0), (4, 40.0), (2, 40.0), (1024, 37.0), (4, 12.0), (1024, 1e-3)]


@pytest.mark.parametrize("K,delta", EXTREME)
def test_fake_probability_identity_in_log_space(K, delta):
    """(1 - q) a + q M = m below t_a (Lemma 3(a)) where Phi(s)^(K-1) underflows and c^(1-K)
    overflows (K = 128, delta = 40: the product form gave q = 0); a, m, M from logs."""
    p = lr.solve_list_rule(K, delta)
    t_a, t_lo, lc = p.t_keep[0], p.t_low[0], p.log_c[0]
    s = np.linspace(t_lo - 4.0 / delta, t_a, 2001)[:-1]
    q = lr.fake_probability(p, s)
    a = np.exp((K - 1) * (lr._log_Phi(s) - lc))
    m = np.exp(delta * s - 0.5 * delta ** 2 - np.log(K) - (K - 1) * lc)
    M = np.exp(p.log_M[0])
    assert np.all((q >= 0) & (q <= 1)) and q.max() > 0.5
    assert np.allclose((1 - q) * a + q * M, m, rtol=1e-7, atol=1e-12 * M)


@pytest.mark.parametrize("K,delta", EXTREME)
def test_fake_score_envelope_and_law(K, delta):
    """q <= env (the proposal's shape, so rejection sampling is exact), and 400,000 fake scores
    against the CDF of nu ~ phi q by trapezoid quadrature on 200,001 points: KS p > 1e-4."""
    from scipy import stats

    p = lr.solve_list_rule(K, delta)
    t_a = p.t_keep[0]
    top = min(t_a, 0.0)  # nu's mass lies within 12 / |top| + 3 / delta below min(t_a, 0) (or in (-12, 9))
    lo = max(top - 12.0 / max(1.0, abs(top)) - 3.0 / delta, top - 12.0)
    grid = np.linspace(lo, min(t_a, 9.0), 200_001)
    b, m0, *_ = lr._proposal(p)
    env = np.where(grid < b[0], np.exp(m0[0] + delta * grid - 0.5 * delta ** 2), 1.0)
    q = lr.fake_probability(p, grid)
    assert np.all(q <= env * (1 + 1e-12))
    w = np.exp(-0.5 * grid ** 2 + 0.5 * np.min(grid ** 2)) * q  # phi q, rescaled against underflow
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (w[1:] + w[:-1]) * np.diff(grid))])
    cdf /= cdf[-1]
    x = lr.draw_fake_scores(p, np.random.default_rng(11), 400_000)
    assert x.max() < t_a
    assert stats.kstest(x, lambda v: np.interp(v, grid, cdf)).pvalue > 1e-4


def test_table_started_solve_matches_the_wide_solve():
    """10,000 random (K, delta) rows: the table-started solve gives the wide-start solve's
    constants to rounding (in units of eps max(1, |x|)), and the table guess
    is used on most rows (a guess that never held would only cost time)."""
    rng = np.random.default_rng(20261201)
    n = 10_000
    K = rng.choice([2, 3, 4, 8, 16, 64], n).astype(float)
    delta = np.exp(rng.uniform(np.log(0.005), np.log(40.0), n))
    new = lr.solve_list_rule(K, delta)
    ts, tl, ta, _, _, _, conv, defect, gap, acc = lr._solve_general(K, delta)
    assert lr._table_guess(K, delta)[0].mean() > 0.8
    np.testing.assert_array_equal(new.converged, conv)
    # Newton roots (t*, t_lo) and J to a few eps; t_a (regula-falsi point of the narrow bracket
    # against the wide solve's 8 eps bracket) measured worst 21 eps max(1, |x|)
    for got, want, ulps in ((new.t_star, ts, 4), (new.t_low, tl, 8), (new.t_keep, ta, 32), (new.acceptance, acc, 4)):
        fin = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(got), fin)
        assert np.all(np.abs(got[fin] - want[fin]) <= ulps * lr._EPS * np.maximum(1.0, np.abs(want[fin])))
    assert np.all(new.mass_defect <= lr.CERTIFICATE_TOL) and np.all(np.abs(new.gap) <= lr.CERTIFICATE_TOL)
