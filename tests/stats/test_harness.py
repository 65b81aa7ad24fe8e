"""check_exactness: argument validation, verdicts on hand-written rules, broken contracts, reproducibility."""
import json

import numpy as np
import pytest

import rass_theory as rt
from rass_theory.stats.chunks import collect_counts, run_chunk_numpy, run_plan
from rass_theory.stats.config import build_node, harness_config
from rass_theory.stats.streaming import ExactnessCounts

from _stats_stubs import Named, Overdispersed, make_reflection, reflection_acceptance, resample, result

CELL = dict(K=4, delta=0.5, dim=8)
SMALL = dict(n_samples=20_000, chunk_size=10_000, n_bins=512, two_sample_size=200, rng=1, **CELL)


class TestValidation:
    @pytest.mark.parametrize("kw, name", [
        ({"K": 0}, "K"), ({"delta": -1.0}, "delta"), ({"delta": float("nan")}, "delta"), ({"dim": 0}, "dim"),
        ({"n_samples": 1}, "n_samples"), ({"alpha": 0.0}, "alpha"), ({"alpha": 1.5}, "alpha"),
        ({"sigma": -1.0}, "sigma"), ({"chunk_size": 0}, "chunk_size"), ({"n_bins": 3}, "n_bins"),
        ({"n_directions": 9}, "n_directions"), ({"backend": "cuda"}, "backend"),
        ({"false_pass_rate": 1.0}, "false_pass_rate"), ({"expected_acceptance": 1.5}, "expected_acceptance"),
        ({"device": "cpu"}, "device"), ({"checkpoint_every": 0}, "checkpoint_every"),
        ({"two_sample_size": -1}, "two_sample_size"), ({"dtype": "float16"}, "dtype"), ({"dtype": ()}, "dtype"),
        ({"dtype": ("float32", "float32")}, "dtype"), ({"dtype": "bfloat16"}, "dtype"),
    ])
    def test_bad_argument_names_itself(self, kw, name):
        with pytest.raises(ValueError, match=name):
            rt.check_exactness(resample, **{**SMALL, **kw})

    def test_bad_grid_arguments(self):
        with pytest.raises(ValueError, match="K"):
            rt.check_exactness(resample, K=0, n_samples=1000)
        with pytest.raises(ValueError, match="delta"):
            rt.check_exactness(resample, delta=-2.0, n_samples=1000)
        with pytest.raises(ValueError, match=r"cells\[0\]"):
            rt.certify(resample, [(4, 0.5)], show=False)

    def test_type_errors(self):
        with pytest.raises(TypeError, match="verifier"):
            rt.check_exactness("rass", **SMALL)
        with pytest.raises(TypeError, match="rng"):
            rt.check_exactness(resample, **{**SMALL, "rng": "seed"})
        with pytest.raises(TypeError, match="n_samples"):
            rt.check_exactness(resample, **{**SMALL, "n_samples": 1.5})
        with pytest.raises(TypeError, match="dtype"):
            rt.check_exactness(resample, **{**SMALL, "dtype": 3})


class TestVerdicts:
    def test_exact_resample_passes_and_report_is_complete(self):
        rep = rt.check_exactness(resample, expected_acceptance=0.0, **SMALL)
        assert rep.passed, rep
        names = [t.name for t in rep.tests]
        assert names[:6] == ["s_ks", "s_chi2", "s_chi2_fine", "rperp_ks", "rperp_chi2", "rperp_chi2_fine"]
        assert {"dir0_ks", "diag_chi2", "joint_chi2", "joint_s_dir0_chi2", "xcov_s", "xcov_s2", "proj_ks",
                "indep_half", "indep_next", "repeats", "acceptance_binomial", "acceptance_bound",
                "energy_two_sample", "s_hi4", "large_delta:s_hi4", "float32:s_ks", "float32:xcov_s",
                "contract"} <= set(names)
        assert rep.n_samples == rep.n_valid == 20_000 and rep.acceptance_rate == 0.0
        assert rep.correction_fraction == 1.0 and rep.dtypes == ("float64", "float32")
        assert rep.groups[0][0] == 0.5 and 9000 < rep.groups[0][1] < 11000
        assert 0 < rep.detectable_ks_distance < 0.06 and rep.elapsed_seconds > 0
        d = json.loads(json.dumps(rep.to_dict()))
        assert d["passed"] is True and len(d["tests"]) == len(rep.tests)
        assert "s_ks" in str(rep) and rep.test("s_ks").pvalue == d["tests"][0]["pvalue"]
        assert "took the correction branch" in rep.summary() and "50% of rows at delta=0.5" in rep.summary()

    def test_independent_rmc_passes_with_its_exact_acceptance(self):
        rep = rt.check_exactness(make_reflection, expected_acceptance=reflection_acceptance,
                                 **{**SMALL, "K": 1})
        assert rep.passed, rep
        lo, hi = rep.acceptance_ci
        assert lo <= reflection_acceptance(1, 0.5) <= hi
        assert all(abs(a - e) < 0.03 for _, n, a, e in rep.groups)

    def test_wrong_acceptance_claim_fails_binomial(self):
        rep = rt.check_exactness(make_reflection, expected_acceptance=0.75, **{**SMALL, "K": 1})
        assert not rep.passed and not rep.test("acceptance_binomial").passed

    def test_acceptance_above_the_bound_fails_without_a_declaration(self):
        def accept_child0(children, mu_draft, mu_target, sigma, rng):
            n = children.shape[0]
            return result(children[:, 0].copy(), np.ones(n, bool), np.zeros(n, np.int64))

        rep = rt.check_exactness(accept_child0, **{**SMALL, "delta": 0.0})
        assert "acceptance_binomial" not in [t.name for t in rep.tests]
        assert not rep.test("acceptance_bound").passed and not rep.passed

    def test_overdispersed_rule_fails(self):
        rep = rt.check_exactness(Overdispersed(1.05), **SMALL)
        assert not rep.passed
        assert not rep.test("rperp_ks").passed or not rep.test("rperp_chi2").passed

    @pytest.mark.parametrize("delta", [0.0, 1e-300, 1e-12, 1e-6])
    def test_degenerate_and_tiny_delta(self, delta):
        rep = rt.check_exactness(resample, expected_acceptance=0.0, **{**SMALL, "delta": delta})
        assert rep.passed, rep

    def test_switches(self):
        rep = rt.check_exactness(resample, **{**SMALL, "two_sample_size": 0, "dtype": "float64", "sigma": 2.0})
        assert rep.passed and "energy_two_sample" not in [t.name for t in rep.tests]
        assert not any(t.name.startswith("float32:") for t in rep.tests) and rep.sigma == 2.0

    def test_dim_one(self):
        rep = rt.check_exactness(resample, **{**SMALL, "dim": 1})
        assert rep.passed and "rperp_ks" not in [t.name for t in rep.tests]

    def test_reproducible_and_seed_sensitive(self):
        a = rt.check_exactness(resample, **{**SMALL, "rng": 3})
        b = rt.check_exactness(resample, **{**SMALL, "rng": 3})
        c = rt.check_exactness(resample, **{**SMALL, "rng": 4})
        assert a.counts.equal(b.counts) and not a.counts.equal(c.counts)
        assert [t.pvalue for t in a.tests] == [t.pvalue for t in b.tests]
        g = rt.check_exactness(resample, **{**SMALL, "rng": np.random.default_rng(1)})
        assert rt.check_exactness(resample, **{**SMALL, "rng": g.seed}).counts.equal(g.counts)

    def test_random_default_seed_is_printed(self, capsys):
        rep = rt.check_exactness(resample, **{**SMALL, "rng": None})
        assert f"random seed {rep.seed}" in capsys.readouterr().err

    def test_chunks_run_separately_merge_to_the_run(self):
        cfg = harness_config(resample, 4, 0.5, 8, n_samples=20_000, rng=5, chunk_size=5_000, n_bins=512,
                             two_sample_size=200, checkpoint_every=1)
        node = build_node(cfg)
        whole, _ = collect_counts(resample, cfg, node)
        specs = run_plan(cfg)
        parts = {s: run_chunk_numpy(resample, node, s) for s in reversed(specs)}
        for p in range(2):
            merged = ExactnessCounts.merge_all(parts[s] for s in specs if s.pass_index == p)
            assert merged.equal(whole[p])


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
            idx[::100] = -1
        if kind == "missing":
            return (states, acc, idx)
        return result(states, acc, idx)
    return verifier


class TestContract:
    @pytest.mark.parametrize("kind, violation", [
        ("shape", "shape"), ("nan", "non_finite"), ("index", "index_range"), ("fake_child", "not_a_copy"),
        ("mismatch", "uncorrected_copy"), ("missing", "missing_field"),
    ])
    def test_broken_verifier_fails_naming_the_problem(self, kind, violation):
        rep = rt.check_exactness(_broken(kind), **{**SMALL, "delta": 0.0})
        assert not rep.passed
        contract = rep.test("contract")
        assert not contract.passed and violation in rep.violations and violation in contract.detail
        if kind in ("shape", "missing"):
            assert rep.n_valid == 0
        else:
            assert rep.n_valid == rep.n_samples - rep.counts.violation_dict()[violation]

    def test_writing_into_the_inputs_is_a_named_violation(self):
        def writes(children, mu_draft, mu_target, sigma, rng):
            children[:, 0] = mu_target
            return resample(children, mu_draft, mu_target, sigma, rng)

        rep = rt.check_exactness(writes, **SMALL)
        assert not rep.passed and "mutated_input" in rep.violations
        assert "read-only" in rep.test("contract").detail

    def test_verifier_failing_on_small_batches_or_float32_names_them(self):
        def picky(children, mu_draft, mu_target, sigma, rng):
            if children.shape[0] < 3:
                raise RuntimeError("batch too small")
            if children.dtype == np.float32:
                raise TypeError("float32 unsupported")
            return resample(children, mu_draft, mu_target, sigma, rng)

        rep = rt.check_exactness(picky, **SMALL)
        detail = rep.test("contract").detail
        assert not rep.passed and rep.violations["raised"] == 2 * (1 + 2) + 20_000
        assert "batch of 1 row(s) (float64 inputs)" in detail and "batch of 2 row(s)" in detail
        assert "float32 inputs" in detail and "float32 unsupported" in detail

    def test_interrupt_propagates(self):
        with pytest.raises(KeyboardInterrupt):
            rt.check_exactness(Named(resample, interrupt_at=1), **SMALL)


class TestBackendDispatch:
    """``rt.check_exactness`` / ``rt.certify`` (``rass_theory.scale.check``) pick the chunk runner of
    ``backend``; the stats harness imports no backend above it and runs NumPy unless handed one."""

    def test_public_names_are_the_dispatcher(self):
        from rass_theory.scale import check

        assert rt.check_exactness is check.check_exactness and rt.certify is check.certify
        assert check.chunk_stream("numpy") is None and check.chunk_stream("cuda") is None
        assert check.chunk_stream("torch") is not None and check.chunk_stream("dask") is not None

    @pytest.mark.parametrize("backend", ["torch", "dask"])
    def test_stats_harness_alone_runs_numpy_only(self, backend):
        from rass_theory.stats import harness

        with pytest.raises(ValueError, match=r"rass_theory\.scale\.check"):
            harness.check_exactness(resample, **{**SMALL, "backend": backend})
        with pytest.raises(ValueError, match=r"rass_theory\.scale\.check"):
            harness.certify(resample, [(4, 0.5, 8)], show=False, rng=1, n_samples=2000, backend=backend)

    def test_an_explicit_chunk_stream_is_used(self):
        from rass_theory.stats import harness

        seen = []

        def stream(verifier, node, specs, cfg):
            for spec in specs:
                seen.append(spec.index)
                yield run_chunk_numpy(verifier, node, spec)

        kw = {**SMALL, "dtype": "float64"}
        rep = harness.check_exactness(resample, **kw, chunk_stream=stream)
        assert seen == [0, 1] and rep.counts.equal(rt.check_exactness(resample, **kw).counts)
        with pytest.raises(TypeError, match="chunk_stream must be callable"):
            harness.check_exactness(resample, **kw, chunk_stream=3)
