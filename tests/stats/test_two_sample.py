"""The model-independent two-sample tests live in ``stats.two_sample``; diffusion and models re-export them."""
import subprocess
import sys

import numpy as np
import pytest

from rass_theory.stats import two_sample as ts


def test_old_import_paths_are_the_same_objects():
    from rass_theory.diffusion import exactness as de
    from rass_theory.models import exactness as me

    for name in ("TwoSampleResult", "EnergyTestResult", "BonferroniComparison", "check_sample_pair",
                 "energy_distance_test"):
        assert getattr(de, name) is getattr(ts, name)
    for name in me.__all__:
        assert getattr(me, name) is getattr(ts, name)


def test_import_loads_no_model_backend():
    code = ("import sys, rass_theory.stats.two_sample; "
            "print(sorted(m for m in ('torch', 'sklearn', 'rass_theory.models', 'rass_theory.diffusion') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_bad_input_messages():
    with pytest.raises(ValueError, match="same dim"):
        ts.check_sample_pair(np.zeros((5, 2)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="at least 10 rows"):
        ts.compare_samples(np.zeros((5, 3)), np.zeros((20, 3)))


def test_compare_samples_passes_on_one_law():
    rng = np.random.default_rng(0)
    res = ts.compare_samples(rng.standard_normal((200, 3)), rng.standard_normal((200, 3)), rng=1,
                             detectable=False, n_permutations=199)
    assert [t.name for t in res.tests] == ["energy", "c2st", "marginal_ks"]
    assert 0.0 < res.pvalue <= 1.0


def test_energy_detectable_shift_on_degenerate_and_large_scale_samples():
    """One point repeated made the shift search double 0 forever (a hang); data of scale 1e7 hit
    an absolute cap at once and reported an infinite detectable shift.  The search is relative to
    the data's spread: scaling the samples scales the detectable shift and keeps the p-value."""
    same = ts.energy_distance_test(np.zeros((30, 4)), np.zeros((30, 4)), rng=0, n_permutations=99)
    assert same.pvalue == 1.0 and same.detectable_mean_shift == 0.0
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((80, 3)), rng.standard_normal((80, 3))
    small = ts.energy_distance_test(x, y, rng=1, n_permutations=99)
    large = ts.energy_distance_test(1e7 * x, 1e7 * y, rng=1, n_permutations=99)
    assert large.pvalue == small.pvalue
    assert np.isfinite(large.detectable_mean_shift)
    assert large.detectable_mean_shift / 1e7 == pytest.approx(small.detectable_mean_shift, rel=1e-9)
