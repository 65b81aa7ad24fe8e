"""Issue 19: recorded regimes, designed sample sizes, calls in sequence, exact cross-covariance nulls,
where a raising verifier breaks, and ``rass_theory.testing.assert_exact``."""
import numpy as np
import pytest
from scipy import stats

import rass_theory as rt
from rass_theory.mutants import MUTANTS
from rass_theory.stats import tests as T
from rass_theory.stats import family as F
from rass_theory.stats.config import harness_config
from rass_theory.stats.family import family_size
from rass_theory.stats.node import SyntheticNode
from rass_theory.stats.looks import INTERIM_SHARE
from rass_theory.stats.power import detectable_ks_distance, samples_for_distance
from rass_theory.stats.regime import MAX_GROUPS, regime_from_trace
from rass_theory.testing import assert_exact, stated_power

from _stats_stubs import resample

FAST = dict(K=4, delta=1.0, dim=8, n_samples=6_000, chunk_size=6_000, n_bins=256, two_sample_size=0, rng=3)


def _trace(n=5000, seed=0):
    g = np.random.default_rng(seed)
    return {"delta": np.exp(g.normal(0.0, 1.5, n)), "sigma": np.exp(g.uniform(-2, 2, n)),
            "mu_ratio": np.exp(g.uniform(np.log(30), np.log(9000), n)), "K": np.full(n, 3)}


class TestRegime:
    def test_trace_groups_and_joint_resampling(self):
        reg = regime_from_trace(_trace())
        assert len(reg.deltas) <= MAX_GROUPS and reg.Ks == (3,)
        assert abs(np.log(reg.deltas[0]) - np.median(np.log(_trace()["delta"]))) < 0.5   # median group named
        node = SyntheticNode.build(4, 1.0, 8, regime=reg, entropy=1)
        rows = node.draw(np.random.default_rng(0), 20_000)
        rho = np.linalg.norm(rows.mu_draft, axis=1) / rows.sigma
        # sigma and ||mu||/sigma come from the trace (ranges of the trace, not of the default law)
        assert rows.sigma.min() >= np.exp(-2) - 1e-12 and rho.min() >= 30 * (1 - 1e-9)
        assert stats.ks_2samp(rho, _trace()["mu_ratio"]).pvalue > 1e-4
        assert "regime from dict" in node.describe_regime() and "from the trace" in node.describe_regime()

    def test_a_recorded_run_and_its_delta_trace(self):
        from rass_theory import diffusion
        tgt = diffusion.GaussianMixture.random(dim=16, n_components=3, seed=0)
        run = diffusion.speculative_sample(tgt, "rass", K=3, L=2, n_samples=30, n_steps=8, churn=0.06, rng=0,
                                           record_trace=True)
        for source in (run, diffusion.DeltaTrace.from_run(run)):
            reg = regime_from_trace(source)
            assert reg.group.size == run.nodes.delta.size and len(reg.deltas) <= MAX_GROUPS
        assert regime_from_trace(run).Ks == (3,)
        rep = rt.check_exactness(resample, regime=run, K=3, dim=16, n_samples=3000, chunk_size=3000, n_bins=256,
                                 two_sample_size=0, rng=0)
        assert rep.passed and "regime from SpeculativeResult.nodes" in rep.regime

    def test_delta_only_trace_keeps_the_default_sigma_and_mu_laws(self):
        reg = regime_from_trace({"delta": [0.5, 1.0, 2.0, 8.0]})
        assert reg.sigma is None and reg.rho is None
        assert "not recorded" in reg.describe()

    def test_check_exactness_with_regime_passes_and_says_so(self):
        rep = rt.check_exactness(resample, regime=_trace(), **{k: v for k, v in FAST.items() if k != "delta"})
        assert rep.passed and "regime from dict" in rep.regime and "regime from" in str(rep)

    def test_default_grid_with_a_run_like_trace_uses_its_K(self):
        from rass_theory.stats.grid import default_cells
        cells = default_cells(resample, regime=regime_from_trace(_trace()))
        assert {c["K"] for c in cells} == {3}

    @pytest.mark.parametrize("bad, match", [(3.0, "regime must be"), ({"delta": []}, "at least one"),
                                            ({"delta": [1.0, -1.0]}, "delta must be finite and >= 0"),
                                            ({"delta": [1.0, 2.0], "sigma": [1.0]}, "sigma has 1 values"),
                                            ({"delta": [1.0], "sigma": [0.0]}, "sigma must be finite and > 0")])
    def test_bad_regime(self, bad, match):
        with pytest.raises((ValueError, TypeError), match=match):
            rt.check_exactness(resample, regime=bad, **FAST)

    def test_checkpoint_resume_with_regime(self, tmp_path):
        kw = dict(FAST, n_samples=4_000, chunk_size=1_000, regime=_trace())
        ref = rt.check_exactness(resample, **kw)
        path = tmp_path / "r.npz"
        rt.check_exactness(resample, checkpoint=path, **kw)
        again = rt.check_exactness(resample, checkpoint=path, **kw)
        assert again.resumed_from_chunk == 8 and again.counts.equal(ref.counts)
        with pytest.raises(ValueError, match="fingerprint|configuration"):   # another regime, same file
            rt.check_exactness(resample, checkpoint=path, **dict(kw, regime=_trace(seed=1)))


class TestDetect:
    def test_designed_n_is_printed_and_used(self, capsys):
        # the designed run has interim looks, so its final Holm runs at 0.99 alpha and n is designed there
        rep = rt.check_exactness(resample, detect=0.05, **{k: v for k, v in FAST.items() if k != "n_samples"})
        cfg = harness_config(resample, 4, 1.0, 8, n_samples=10, rng=3, chunk_size=6_000, n_bins=256, two_sample_size=0)
        level = 1e-3 * (1 - INTERIM_SHARE)
        n = samples_for_distance(0.05, level, family_size(cfg), 0.01, 256)
        assert rep.n_looks >= 1 and n > samples_for_distance(0.05, 1e-3, family_size(cfg), 0.01, 256)
        assert rep.n_samples == n and rep.detectable_ks_distance <= 0.05
        assert rep.detectable_ks_distance == detectable_ks_distance(rep.n_valid, level, family_size(cfg), 0.01, 256)
        err = capsys.readouterr().err
        assert f"n = {n:,}" in err and f"level {level:g}" in err

    def test_grid_designs_the_power_cell_at_the_final_level(self, capsys):
        cells = [dict(K=2, delta=1.0, dim=8, n_samples=2_000), dict(K=4, delta=1.0, dim=8, power=True)]
        rep = rt.certify(resample, cells, show=False, detect=0.05, chunk_size=6_000, n_bins=256,
                         two_sample_size=0, rng=3, dtype="float64")
        level = 1e-3 * (1 - INTERIM_SHARE)
        n = samples_for_distance(0.05, level, rep.n_tests, 0.01, 256)
        assert rep.cells[1].n_samples == n and rep.cells[1].n_looks >= 1
        assert f"level {level:g}" in capsys.readouterr().err

    def test_without_looks_n_is_designed_at_alpha(self):
        rep = rt.check_exactness(resample, detect=0.05, stop_early=False,
                                 **{k: v for k, v in FAST.items() if k != "n_samples"})
        cfg = harness_config(resample, 4, 1.0, 8, n_samples=10, rng=3, chunk_size=6_000, n_bins=256, two_sample_size=0)
        assert rep.n_looks == 0 and rep.n_samples == samples_for_distance(0.05, 1e-3, family_size(cfg), 0.01, 256)

    @pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1e-4, float("nan")])
    def test_bad_detect(self, bad):
        with pytest.raises(ValueError, match="detect"):
            rt.check_exactness(resample, detect=bad, **FAST)


@pytest.mark.parametrize("name, kind", [("reseeds_its_generator", "rng_not_advanced"),
                                        ("draws_from_a_copy_of_rng", "rng_not_advanced"),
                                        ("result_aliases_buffer", "result_aliased"),
                                        ("float64_states_for_float32_inputs", "states_dtype")])
def test_calls_in_sequence_contract(name, kind):
    rep = rt.check_exactness(MUTANTS[name](4), **FAST)
    assert not rep.passed and kind in rep.test("contract").detail


def test_consecutive_calls_are_independent_for_an_exact_rule():
    rep = rt.check_exactness(rt.verifiers.rass(), **FAST)
    assert rep.passed and rep.test("indep_calls").pvalue > 1e-3 and "1000 pairs" in rep.test("indep_calls").detail


def test_a_verifier_raising_on_tiny_delta_names_the_regime():
    exact = rt.verifiers.rass()

    def fragile(children, mu_draft, mu_target, sigma, rng):
        d = np.linalg.norm(np.asarray(mu_target, float) - np.asarray(mu_draft, float), axis=1)
        if np.any(d / np.asarray(sigma, float) < 0.005):
            raise ZeroDivisionError("delta too small")
        return exact(children, mu_draft, mu_target, sigma, rng)

    rep = rt.check_exactness(fragile, **FAST)
    detail = rep.test("contract").detail
    assert not rep.passed and "raises on tiny delta (< 0.01)" in detail and "not on large delta" in detail


class TestStudentisedCrossCovariance:
    def test_exact_null_at_small_n(self):
        """At n = 30 rows the studentised statistic is chi^2(d) exactly: KS of 2000 replicates."""
        g = np.random.default_rng(5)
        d, n, stat = 6, 30, []
        for _ in range(2000):
            e = g.standard_normal((n, d))
            e /= np.linalg.norm(e, axis=1)[:, None]
            y = g.standard_normal((n, d))
            t = np.einsum("nd,nd->n", y, e)
            zp = y - t[:, None] * e
            w = t * t
            M = w.sum() * np.eye(d) - (e * w[:, None]).T @ e
            stat.append(T.studentised_form_test(t @ zp, M).statistic)
        assert stats.kstest(stat, stats.chi2(d).cdf).pvalue > 1e-3


def test_family_size_is_read_from_the_code():
    """The size m of the Holm family (what proofs/S1 quotes) comes from the harness itself."""
    cfg = harness_config(resample, 4, 0.5, 8, n_samples=1000, rng=0)
    rep = rt.check_exactness(resample, 4, 0.5, 8, n_samples=1000, chunk_size=1000, rng=0)
    assert family_size(cfg) == len([t for t in rep.tests if t.name != "contract"])
    assert len(F.pass_test_names(cfg)) < family_size(cfg)


class TestAssertExact:
    def test_raises_naming_the_failing_tests(self):
        with pytest.raises(AssertionError, match=r"rng_not_advanced|indep_calls") as info:
            assert_exact(MUTANTS["reseeds_its_generator"](4), **FAST)
        assert "failing test(s)" in str(info.value) and "seed 3" in str(info.value)

    def test_passes_deterministically(self):
        opts = {k: v for k, v in FAST.items() if k != "rng"}
        a, b = assert_exact(resample, **opts), assert_exact(resample, **opts)
        assert a.seed == b.seed and [t.pvalue for t in a.tests] == [t.pvalue for t in b.tests]
        assert a.alpha == 1e-6

    def test_refuses_a_random_seed_and_states_power(self):
        with pytest.raises(ValueError, match="rng"):
            assert_exact(resample, rng=None, **{k: v for k, v in FAST.items() if k != "rng"})
        assert stated_power(1e-3) <= 3e-3 < stated_power(1e-6) < 3.5e-3
