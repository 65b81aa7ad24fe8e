"""Sequential looks within a cell (rass_theory.stats.looks): the alpha split, early stops, bit-identical final looks.

The wrong verifier shifts every state by 0.5 sd along the displacement: after one 10,000-row
chunk the binned KS statistic of ``s`` is about 0.19, ``p`` below 1e-100, far under the interim
level (~1e-7 here), so it stops at the first look with certainty for practical purposes.  The
exact verifier (target draws) passes the final Holm with probability >= 1 - alpha = 0.999 and
no interim level is reached with probability >= 1 - alpha / 100 (Lemma 9 of
proofs/S1-harness-power.md); the seeds are fixed.
"""
import math
from pathlib import Path

import numpy as np
import pytest

import rass_theory as rt
from rass_theory.stats.config import harness_config
from rass_theory.stats.family import family_size
from rass_theory.stats.grid import default_cells
from rass_theory.stats.looks import INTERIM_SHARE, look_plan, look_positions, total_chunks

from _stats_stubs import resample

KW = dict(K=4, delta=0.5, dim=8, n_samples=40_000, chunk_size=10_000, n_bins=512, two_sample_size=200, rng=5)


def shifted(children, mu_draft, mu_target, sigma, rng):
    res = resample(children, mu_draft, mu_target, sigma, rng)
    diff = (mu_target - mu_draft).astype(np.float64)
    norm = np.linalg.norm(diff, axis=1, keepdims=True)
    e = np.where(norm > 0, diff / np.where(norm > 0, norm, 1.0), 0.0)
    sig = np.asarray(sigma, dtype=np.float64).reshape(-1, 1) if np.ndim(sigma) else sigma
    res.states = (res.states + 0.5 * sig * e).astype(children.dtype)
    return res


def test_look_positions():
    assert look_positions(1) == () and look_positions(2) == (1,) and look_positions(8) == (1, 2, 4)
    assert look_positions(25) == (1, 2, 4, 8, 16)


def test_alpha_split_sums_to_alpha_on_the_default_grid():
    v = rt.verifiers.resample()
    cfgs = [harness_config(v, c["K"], c["delta"], c["dim"], n_samples=c["n_samples"], dtype=c.get("dtype"), rng=0)
            for c in default_cells(v)]
    plan = look_plan(cfgs, 1e-3)
    assert plan.n_pairs == sum(len(look_positions(total_chunks(c))) * family_size(c) for c in cfgs) > 0
    assert math.isclose(plan.interim_alpha, INTERIM_SHARE * 1e-3)
    assert math.isclose(plan.interim_alpha + plan.final_alpha, 1e-3, rel_tol=0, abs_tol=1e-18)
    assert math.isclose(plan.level * plan.n_pairs, plan.interim_alpha)
    proof = (Path(__file__).resolve().parents[2] / "proofs" / "S1-harness-power.md").read_text()
    assert f"= {plan.n_pairs}` and the interim level is `alpha_I / N = {plan.level:.2g}`" in proof   # S1.9 from the code
    off = look_plan(cfgs, 1e-3, enabled=False)
    assert off.interim_alpha == 0.0 and off.final_alpha == 1e-3 and off.level == 0.0
    one_chunk = harness_config(v, 4, 0.5, 8, n_samples=1000, dtype=("float64",), rng=0)
    assert look_plan([one_chunk], 1e-3).final_alpha == 1e-3   # no look: nothing spent


def test_wrong_verifier_stops_at_the_first_look():
    rep = rt.check_exactness(shifted, **KW)
    assert not rep.passed and rep.stop_look == 1 and rep.n_looks == 3 and rep.rows_used == 10_000
    failed = rep.failed_tests
    assert failed and all(t.pvalue_adjusted <= rep.alpha for t in failed)
    assert "stopped at interim look 1 of 3" in rep.summary() and rep.to_dict()["stop_look"] == 1


def test_exact_verifier_runs_every_look_and_matches_a_run_without_looks():
    rep = rt.check_exactness(resample, **KW)
    off = rt.check_exactness(resample, **KW, stop_early=False)
    assert rep.passed and rep.stop_look is None and rep.n_looks == 3 and rep.rows_used == 80_000
    assert off.n_looks == 0 and off.rows_used == 80_000
    assert [(t.name, t.statistic, t.pvalue, t.pvalue_adjusted) for t in rep.tests] == \
        [(t.name, t.statistic, t.pvalue, t.pvalue_adjusted) for t in off.tests]


def test_stopped_run_resumes_to_the_same_stop_and_can_be_finished(tmp_path):
    path = tmp_path / "ck.npz"
    first = rt.check_exactness(shifted, checkpoint=path, **KW)
    assert first.stop_look == 1 and path.exists()
    again = rt.check_exactness(shifted, checkpoint=path, **KW)
    assert again.stop_look == 1 and again.resumed_from_chunk == 1
    assert [(t.name, t.pvalue) for t in again.tests] == [(t.name, t.pvalue) for t in first.tests]
    full = rt.check_exactness(shifted, checkpoint=path, **KW, stop_early=False)
    assert full.stop_look is None and full.rows_used == 80_000 and not full.passed


def test_grid_stops_inside_its_first_cell():
    rep = rt.certify(shifted, [(2, 0.5, 8), (4, 1.0, 8)], n_samples=20_000, chunk_size=10_000, n_bins=512,
                     two_sample_size=100, rng=2, show=False)
    assert not rep.passed and rep.stop_look == 1 and rep.cells[0].rows_used == 10_000
    assert rep.skipped == ((4, 1.0, 8),) and rep.rows_used == 10_000


@pytest.mark.slow
def test_exact_rules_never_stop_at_a_look_over_seeds():
    """20 seeds of an 8-chunk cell: P(any interim stop) <= 20 alpha / 100 = 2e-4 (Lemma 9)."""
    for seed in range(20):
        rep = rt.check_exactness(resample, **{**KW, "rng": 100 + seed})
        assert rep.stop_look is None
