"""certify over a grid; flat memory; calibration of the whole verdict (false-fail rate ~ alpha)."""
import tracemalloc

import numpy as np
import pytest
from scipy import stats

import rass_theory as rt
from rass_theory.stats.grid import default_cells
from rass_theory.stats.report import ExactnessReport

from _stats_stubs import Overdispersed, resample

SMALL = dict(n_samples=5_000, chunk_size=5_000, n_bins=512, two_sample_size=100)


class TestCertify:
    def test_exact_rule_passes_grid_with_one_family(self):
        res = rt.certify(resample, [(2, 0.0, 3), (4, 0.5, 8), {"K": 1, "delta": 2.0, "dim": 1}], show=False,
                         rng=0, **SMALL)
        assert isinstance(res, ExactnessReport) and res.passed
        per_cell = [len([t for t in r.tests if t.name != "contract"]) for r in res.cells]
        assert res.n_tests == sum(per_cell) + len(res.grid_tests)
        assert {t.name.split("/")[0] for t in res.grid_tests} == {"grid(dim=1)", "grid(dim=3)", "grid(dim=8)"}
        # grid-wide Holm: adjusted p-values are at least as large as a per-cell Holm would give
        single = rt.check_exactness(resample, 4, 0.5, 8, rng=res.cells[1].seed, **SMALL)
        by_name = {t.name: t for t in single.tests}
        for a in res.cells[1].tests:
            b = by_name[a.name]
            assert a.pvalue == b.pvalue and a.pvalue_adjusted >= b.pvalue_adjusted - 1e-15
        assert "certify: PASSED" in str(res) and len(res.to_dict()["cells"]) == 3
        assert res.tests[0].name.startswith("K=2,delta=0/") and res.acceptance_rate == 0.0

    def test_wrong_rule_fails_somewhere(self):
        res = rt.certify(Overdispersed(1.1), [(4, 0.5, 8), (4, 0.0, 8)], show=False, rng=0, **SMALL)
        assert not res.passed and all(not r.passed for r in res.cells)

    def test_default_cells_and_bad_cells(self):
        cells = default_cells()
        # issue 19: K in {2, 3, 4, 8} (an odd K and one >= 5), a cell with dim >= 256, and a power cell
        assert {c["K"] for c in cells} >= {2, 3, 4, 8} and max(c["dim"] for c in cells) >= 256
        assert {c["K"] for c in default_cells(rt.verifiers.rmc())} == {1}
        from rass_theory.optimize.dispatch import acceptance
        assert 1 - acceptance("rass", 4, max(c["delta"] for c in cells)) >= 0.3
        with pytest.raises(ValueError, match="unknown key"):
            rt.certify(resample, [{"K": 2, "delta": 0.5, "dim": 3, "size": 3}], show=False)
        with pytest.raises(ValueError, match="cells"):
            rt.certify(resample, [], show=False)
        with pytest.raises(ValueError, match=r"cells\[0\]"):
            rt.certify(resample, [(4, 0.5)], show=False)
        with pytest.raises(ValueError, match="delta"):
            rt.certify(resample, [(4, -0.5, 8)], show=False)


def test_memory_is_flat_in_n_samples():
    """Peak traced memory of a run 8x longer stays within 10% (memory is O(chunk_size))."""
    peaks = []
    for n in (40_000, 320_000):
        tracemalloc.start()
        rt.check_exactness(resample, 4, 0.5, 8, n_samples=n, chunk_size=20_000, n_bins=512, two_sample_size=100,
                           rng=0)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] <= 1.1 * peaks[0], peaks


def _verdicts(n_seeds, alpha, **kw):
    out = []
    for seed in range(n_seeds):
        rep = rt.check_exactness(rt.verifiers.rass(), 4, 1.0, 8, rng=10_000 + seed, alpha=alpha, **kw)
        out.append(rep)
    return out


# tests whose null law is discrete (counts) or that are conservative by construction: their
# p-values are super-uniform, so only P(p <= 0.05) <= 0.05 is checked for them
_SUPER_UNIFORM = ("_ks", "acceptance_binomial", "acceptance_bound", "repeats", "_hi4", "_lo4", "_hi5", "_lo5",
                  "_abs4", "_abs5")


def _check_uniform(reps, names):
    for name in names:
        p = np.array([r.test(name).pvalue for r in reps])
        p = p[~np.isnan(p)]
        if name.endswith(_SUPER_UNIFORM) or "large_delta:" in name:
            assert np.mean(p <= 0.05) <= 0.05 + 4.5 * np.sqrt(0.05 * 0.95 / p.size), name
        else:
            assert stats.kstest(p, "uniform").pvalue > 1e-3 / len(names), name


@pytest.mark.slow
def test_pvalues_of_a_correct_rule_are_uniform():
    """200 seeds at small n: every test's p-values are uniform (KS of the p-values), or
    super-uniform for the discrete and conservative ones; the new statistics are included."""
    reps = _verdicts(200, 1e-3, n_samples=2_000, chunk_size=2_000, n_bins=256, two_sample_size=50,
                     n_permutations=199)
    names = [t.name for t in reps[0].tests if t.name != "contract"]
    assert {"xcov_s", "indep_half", "proj_ks", "joint_s_dir0_chi2", "float32:xcov_s2"} <= set(names)
    _check_uniform(reps, names)
    assert sum(not r.passed for r in reps) <= 3  # alpha = 1e-3 over 200 runs: expect 0.2


@pytest.mark.slow
def test_false_fail_rate_of_whole_verdict_matches_alpha():
    """250 runs of an exact rule at alpha = 0.05: the false-fail rate is at most alpha (Holm is
    conservative; the KS p-values are too), within 4.5 standard errors."""
    alpha = 0.05
    reps = _verdicts(250, alpha, n_samples=2_000, chunk_size=2_000, n_bins=256, two_sample_size=50,
                     n_permutations=199)
    rate = np.mean([not r.passed for r in reps])
    se = np.sqrt(alpha * (1 - alpha) / len(reps))
    assert rate <= alpha + 4.5 * se
