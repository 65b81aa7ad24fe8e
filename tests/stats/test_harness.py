"""check_exactness: argument validation, verdicts on hand-written rules, broken contracts, reproducibility."""
import json

import numpy as np
import pytest

import rass_theory as rt
from rass_theory.stats.harness import collect_counts, _config, build_node, run_chunk_numpy
from rass_theory.stats.node import chunk_plan
from rass_theory.stats.streaming import ExactnessCounts

from _stats_stubs import Named, Overdispersed, make_reflection, resample, result

SMALL = dict(n_samples=20_000, chunk_size=5_000, n_bins=512, two_sample_size=200)


class TestValidation:
    @pytest.mark.parametrize("kw, name", [
        ({"K": 0}, "K"), ({"delta": -1.0}, "delta"), ({"delta": float("nan")}, "delta"), ({"dim": 0}, "dim"),
        ({"n_samples": 1}, "n_samples"), ({"alpha": 0.0}, "alpha"), ({"alpha": 1.5}, "alpha"),
        ({"sigma": -1.0}, "sigma"), ({"chunk_size": 0}, "chunk_size"), ({"n_bins": 3}, "n_bins"),
        ({"n_directions": 9}, "n_directions"), ({"backend": "cuda"}, "backend"),
        ({"false_pass_rate": 1.0}, "false_pass_rate"), ({"expected_acceptance": 1.5}, "expected_acceptance"),
        ({"device": "cpu"}, "device"), ({"checkpoint_every": 0}, "checkpoint_every"),
        ({"two_sample_size": -1}, "two_sample_size"),
    ])
    def test_bad_argument_names_itself(self, kw, name):
        with pytest.raises(ValueError, match=name):
            rt.check_exactness(resample, **{**SMALL, **kw})

    def test_type_errors(self):
        with pytest.raises(TypeError, match="verifier"):
            rt.check_exactness("rass", **SMALL)
        with pytest.raises(TypeError, match="rng"):
            rt.check_exactness(resample, rng="seed", **SMALL)
        with pytest.raises(TypeError, match="n_samples"):
            rt.check_exactness(resample, **{**SMALL, "n_samples": 1.5})


class TestVerdicts:
    def test_exact_resample_passes_and_report_is_complete(self):
        rep = rt.check_exactness(resample, expected_acceptance=0.0, **SMALL)
        assert rep.passed, rep
        names = [t.name for t in rep.tests]
        assert names[:6] == ["s_ks", "s_chi2", "s_chi2_fine", "rperp_ks", "rperp_chi2", "rperp_chi2_fine"]
        assert {"dir0_ks", "dir1_chi2", "joint_chi2", "acceptance_binomial", "energy_two_sample", "contract"} <= set(names)
        assert rep.n_samples == rep.n_valid == 20_000 and rep.acceptance_rate == 0.0
        assert 0 < rep.detectable_ks_distance < 0.05 and rep.elapsed_seconds > 0
        d = json.loads(json.dumps(rep.to_dict()))
        assert d["passed"] is True and len(d["tests"]) == len(rep.tests)
        assert "s_ks" in str(rep) and rep.test("s_ks").pvalue == d["tests"][0]["pvalue"]

    def test_independent_rmc_passes_with_its_exact_acceptance(self):
        from scipy.stats import norm
        exact = 2 * norm.cdf(-0.25)
        rep = rt.check_exactness(make_reflection, K=1, expected_acceptance=exact, **SMALL)
        assert rep.passed, rep
        lo, hi = rep.acceptance_ci
        assert lo <= exact <= hi

    def test_wrong_acceptance_claim_fails_binomial(self):
        rep = rt.check_exactness(make_reflection, K=1, expected_acceptance=0.75, **SMALL)
        assert not rep.passed and not rep.test("acceptance_binomial").passed

    def test_overdispersed_rule_fails(self):
        rep = rt.check_exactness(Overdispersed(1.05), **SMALL)
        assert not rep.passed
        assert not rep.test("rperp_ks").passed or not rep.test("rperp_chi2").passed

    @pytest.mark.parametrize("delta", [0.0, 1e-300, 1e-12, 1e-6])
    def test_degenerate_and_tiny_delta(self, delta):
        rep = rt.check_exactness(resample, delta=delta, expected_acceptance=0.0, **SMALL)
        assert rep.passed, rep

    def test_two_sample_test_can_be_switched_off(self):
        rep = rt.check_exactness(resample, **{**SMALL, "two_sample_size": 0})
        assert rep.passed and "energy_two_sample" not in [t.name for t in rep.tests]

    def test_dim_one(self):
        rep = rt.check_exactness(resample, dim=1, **SMALL)
        assert rep.passed and "rperp_ks" not in [t.name for t in rep.tests]

    def test_reproducible_and_seed_sensitive(self):
        a = rt.check_exactness(resample, rng=3, **SMALL)
        b = rt.check_exactness(resample, rng=3, **SMALL)
        c = rt.check_exactness(resample, rng=4, **SMALL)
        assert a.counts.equal(b.counts) and not a.counts.equal(c.counts)
        assert [t.pvalue for t in a.tests] == [t.pvalue for t in b.tests]
        g = rt.check_exactness(resample, rng=np.random.default_rng(1), **SMALL)
        assert rt.check_exactness(resample, rng=g.seed, **SMALL).counts.equal(g.counts)

    def test_chunks_run_separately_merge_to_the_run(self):
        cfg = _config(resample, 4, 0.5, 8, 20_000, 1e-3, 5, None, 1.0, 5_000, None, 512, 200, None, 0.01,
                      "numpy", None, None, None, 1, False)
        node = build_node(cfg)
        whole, _ = collect_counts(resample, cfg, node)
        parts = [run_chunk_numpy(resample, node, s) for s in reversed(chunk_plan(20_000, 5_000, 5, 200))]
        assert ExactnessCounts.merge_all(parts[::-1]).equal(whole)


def _broken(kind):
    def verifier(children, mu_draft, mu_target, sigma, rng):
        n, K, d = children.shape
        states = children[:, 0, :].copy()
        acc = np.ones(n, bool)
        idx = np.zeros(n, np.int64)
        if kind == "shape":
            return result(states[:, :-1], acc, idx)
        if kind == "nan":
            states[::100] = np.nan
        if kind == "index":
            idx[::100] = K
        if kind == "fake_child":
            states[::100] += 1e-9
        if kind == "mismatch":
            acc[::100] = False
        if kind == "missing":
            return (states, acc, idx)
        return result(states, acc, idx)
    return verifier


class TestContract:
    @pytest.mark.parametrize("kind, violation", [
        ("shape", "shape"), ("nan", "non_finite"), ("index", "index_range"), ("fake_child", "not_a_copy"),
        ("mismatch", "accepted_index_mismatch"), ("missing", "missing_field"),
    ])
    def test_broken_verifier_fails_naming_the_problem(self, kind, violation):
        rep = rt.check_exactness(_broken(kind), delta=0.0, **SMALL)
        assert not rep.passed
        contract = rep.test("contract")
        assert not contract.passed and violation in rep.violations and violation in contract.detail
        if kind in ("shape", "missing"):
            assert rep.n_valid == 0
        else:  # only the broken rows are excluded; the rest is a correct delta = 0 rule
            assert rep.n_valid == rep.n_samples - rep.violations[violation]
            assert all(t.passed for t in rep.tests if t.name != "contract")

    def test_verifier_exception_propagates(self):
        with pytest.raises(ZeroDivisionError):
            rt.check_exactness(Named(resample, interrupt_at=1, exc=ZeroDivisionError), **SMALL)
