"""speculative_sample: validation, honest call counting, lazy/full equivalence, exactness of runs."""
import importlib.util

import numpy as np
import pytest

from rass_theory.diffusion import GaussianMixture, TreeShape, plain_sample, speculative_sample
from rass_theory.diffusion import check_trajectories, plain_kernel
from rass_theory.diffusion.exactness import compare_to_plain
from rass_theory.verifiers import VerifierResult


BACKENDS = ["numpy"] + (["torch"] if importlib.util.find_spec("torch") else [])


@pytest.fixture(scope="module")
def gm16():
    return GaussianMixture.random(dim=16, n_components=5, seed=0)


def always_reject(children, mu_draft, mu_target, sigma, rng):
    """Exact but useless: ignore the drafts, return a fresh target draw."""
    sigma = np.broadcast_to(np.asarray(sigma, float), (children.shape[0],))
    states = mu_target + sigma[:, None] * rng.standard_normal(mu_target.shape)
    n = children.shape[0]
    return VerifierResult(states, np.zeros(n, bool), np.full(n, -1))


def accept_first(children, mu_draft, mu_target, sigma, rng):
    """Known-wrong: always commit the first draft (draft-only sampling)."""
    n = children.shape[0]
    return VerifierResult(children[:, 0].copy(), np.ones(n, bool), np.zeros(n, np.int64))


_NUMPY_ONLY = {"expansion", "draft"}     # the torch sampler has no such options


class TestValidation:
    @pytest.mark.parametrize("backend", BACKENDS)
    @pytest.mark.parametrize("kw,match", [
        (dict(K=0), "K"), (dict(L=0), "L"), (dict(n_samples=0), "n_samples"), (dict(n_steps=0), "n_steps"),
        (dict(churn=-0.1), "churn"), (dict(churn=float("inf")), "churn"), (dict(K=(2, 2), L=3), "L=3"),
        (dict(prefetch="sibling"), "prefetch"), (dict(protocol="edm"), "protocol"),
        (dict(expansion="eager"), "expansion"), (dict(draft="cheap"), "draft"),
    ])
    def test_value_errors(self, gm16, kw, match, backend):
        """Both backends (``backend="torch"`` runs ``speculative_sample_torch``) reject the same input."""
        if backend == "torch" and _NUMPY_ONLY & set(kw):
            pytest.skip("NumPy-only option")
        args = dict(K=2, L=2, n_samples=4, n_steps=10, churn=0.06, rng=0, backend=backend)
        args.update(kw)
        with pytest.raises(ValueError, match=match):
            speculative_sample(gm16, "dgrs", **args)

    def test_type_errors(self, gm16):
        with pytest.raises(TypeError, match="verifier"):
            speculative_sample(gm16, 3.0, K=1, L=2, n_samples=4)
        with pytest.raises(TypeError, match="K"):
            speculative_sample(gm16, "dgrs", K=1.5, L=2, n_samples=4)
        with pytest.raises(TypeError, match="target"):
            speculative_sample(object(), "dgrs", K=1, L=2, n_samples=4)

    def test_rmc_needs_chain(self, gm16):
        with pytest.raises(ValueError, match="rmc"):
            speculative_sample(gm16, "rmc", K=2, L=2, n_samples=4)

    def test_draft_model_dim(self, gm16):
        with pytest.raises(ValueError, match="dim"):
            speculative_sample(gm16, "dgrs", K=1, L=2, n_samples=4, draft=GaussianMixture.random(8, 5, 0))

    @pytest.mark.parametrize("bad,match", [
        (lambda c, md, mt, s, r: object(), "states"),
        (lambda c, md, mt, s, r: VerifierResult(md[:, :2], np.zeros(len(md), bool), np.full(len(md), -1)), "shape"),
        (lambda c, md, mt, s, r: VerifierResult(c[:, 0] + 1.0, np.ones(len(md), bool), np.zeros(len(md), np.int64)),
         "exactly"),
        (lambda c, md, mt, s, r: VerifierResult(mt, np.zeros(len(md), bool), np.zeros(len(md), np.int64)), "-1"),
        (lambda c, md, mt, s, r: VerifierResult(c[:, 0], np.ones(len(md), bool), np.full(len(md), 5)), "child_index"),
        (lambda c, md, mt, s, r: VerifierResult(mt * np.nan, np.zeros(len(md), bool), np.full(len(md), -1)), "finite"),
    ])
    def test_contract_breakers(self, gm16, bad, match):
        with pytest.raises((TypeError, ValueError), match=match):
            speculative_sample(gm16, bad, K=2, L=2, n_samples=4, n_steps=6, rng=0)


class TestCounting:
    def test_always_reject_is_plain_plus_initial_call(self, gm16):
        run = speculative_sample(gm16, always_reject, K=2, L=3, n_samples=5, rng=0)
        # initial evaluation + one call per round, one committed step per round
        np.testing.assert_array_equal(run.target_calls, 1 + 28)
        np.testing.assert_array_equal(run.rounds.committed, 1)
        assert run.speedup == pytest.approx(28 / 29) and run.speedup_se == 0

    def test_L1_first_round_needs_no_call(self, gm16):
        run = speculative_sample(gm16, always_reject, K=1, L=1, n_samples=3, rng=0)
        np.testing.assert_array_equal(run.target_calls, 28)

    @pytest.mark.parametrize("L,calls", [(3, 1 + 10), (4, 1 + 7), (5, 1 + 6), (40, 1 + 1)])
    def test_accept_all_commits_L_per_round(self, gm16, L, calls):
        run = speculative_sample(gm16, accept_first, K=1, L=L, n_samples=3, rng=0)
        np.testing.assert_array_equal(run.target_calls, calls)
        assert run.rounds.committed.sum() == 3 * 28

    def test_identical_draft_model_accepts_everything(self, gm16):
        """Draft model = target: delta = 0 at every node, every round commits L; no initial call."""
        run = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=4, rng=0, draft=gm16.perturbed(0.0))
        np.testing.assert_array_equal(run.target_calls, 10)
        assert np.all(run.nodes.delta == 0) and np.all(run.nodes.accepted)

    def test_frozen_first_root_is_exact(self, gm16):
        run = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=20, rng=0)
        first = (run.nodes.step == 0) & (run.nodes.depth == 0)
        assert first.sum() == 20 and np.all(run.nodes.delta[first] == 0) and np.all(run.nodes.accepted[first])

    def test_budget_bookkeeping_and_widths(self, gm16):
        run = speculative_sample(gm16, "dgrs", K=(3, 2, 1), L=None, n_samples=6, rng=0)
        assert run.shape == TreeShape((3, 2, 1))
        assert run.target_nodes_per_round == 1 + 3 + 6 and run.drafted_nodes_per_round == 3 + 6 + 6
        assert set(np.unique(run.nodes.K[run.nodes.depth == 1])) <= {2}
        assert run.rounds.committed.sum() == 6 * 28


class TestRuns:
    def test_reproducible(self, gm16):
        a = speculative_sample(gm16, "dgrs", K=2, L=2, n_samples=8, rng=5)
        b = speculative_sample(gm16, "dgrs", K=2, L=2, n_samples=8, rng=5)
        np.testing.assert_array_equal(a.samples, b.samples)
        np.testing.assert_array_equal(a.target_calls, b.target_calls)

    def test_lazy_and_full_same_law(self, gm16):
        """Same speedup and depth-0 acceptance within SE (different random streams)."""
        a = speculative_sample(gm16, "dgrs", K=3, L=3, n_samples=150, rng=1, expansion="lazy")
        b = speculative_sample(gm16, "dgrs", K=3, L=3, n_samples=150, rng=2, expansion="full",
                               max_floats_in_memory=16 * 2000)
        assert abs(a.speedup - b.speedup) / np.hypot(a.speedup_se, b.speedup_se) < 4.5
        ra, rb = a.acceptance_by_depth()[1], b.acceptance_by_depth()[1]
        na, nb = np.sum(a.nodes.depth == 1), np.sum(b.nodes.depth == 1)
        p = (ra * na + rb * nb) / (na + nb)
        assert abs(ra - rb) / np.sqrt(p * (1 - p) * (1 / na + 1 / nb)) < 4.5

    def test_speedup_se_matches_replicates(self, gm16):
        """The delta-method SE is the spread of speedups over independent replicates."""
        from scipy import stats

        n_rep = 8
        reps = [speculative_sample(gm16, "rmc", K=1, L=3, n_samples=40, rng=100 + i) for i in range(n_rep)]
        sp = np.array([r.speedup for r in reps])
        se = np.mean([r.speedup_se for r in reps])
        ratio = sp.std(ddof=1) / se
        # sample sd of n_rep draws: (n_rep-1) s^2/sigma^2 ~ chi2_{n_rep-1}; two-sided 0.1% band
        lo, hi = np.sqrt(stats.chi2.ppf([0.0005, 0.9995], n_rep - 1) / (n_rep - 1))
        assert lo < ratio < hi


class TestExactness:
    """Whole-run exactness at d = 16, 600 trajectories: final samples against an independent plain
    replicate, and every committed step (``check_trajectories``, P9 section 7)."""

    ALPHA = 1e-3

    @pytest.mark.parametrize("verifier,K,L", [("rmc", 1, 3), ("dgrs", 3, 3)])
    def test_exact_rules_pass(self, gm16, verifier, K, L):
        run = speculative_sample(gm16, verifier, K=K, L=L, n_samples=600, rng=11, return_trajectories=True)
        ref = plain_sample(gm16, 600, rng=12)
        comp = compare_to_plain(run.samples, ref, gm16.means, alpha=self.ALPHA, n_permutations=199, rng=13,
                                detectable=False)
        assert comp.passed, comp
        steps = check_trajectories(run.trajectories, plain_kernel(gm16), run.draft_means, run.depths,
                                   alpha=self.ALPHA, rng=14)
        assert steps.passed, steps.summary()

    def test_known_wrong_rule_fails(self, gm16):
        """Draft-only sampling shrinks the within-component spread; the radius test sees it, and the
        step-by-step check sees the residuals' shift along the draft-to-target direction."""
        run = speculative_sample(gm16, accept_first, K=1, L=3, n_samples=600, rng=11, return_trajectories=True)
        ref = plain_sample(gm16, 600, rng=12)
        comp = compare_to_plain(run.samples, ref, gm16.means, alpha=self.ALPHA, n_permutations=199, rng=13,
                                detectable=False)
        assert not comp.passed
        steps = check_trajectories(run.trajectories, plain_kernel(gm16), run.draft_means, run.depths,
                                   alpha=self.ALPHA, rng=14)
        assert not steps.passed


@pytest.mark.slow
class TestExactnessD512:
    # the threshold rule is checked at d = 512 by bench/gm_speedup_table.py (snapped-grid policy):
    # the built-in threshold() solves one optimisation per distinct delta, too slow for a test
    @pytest.mark.parametrize("verifier,K,L", [("rmc", 1, 3), ("dgrs", 4, 3), ("rass", 4, 3)])
    def test_exact_rules_pass_d512(self, verifier, K, L):
        gm = GaussianMixture.random(dim=512, n_components=5, seed=0)
        run = speculative_sample(gm, verifier, K=K, L=L, n_samples=1000, rng=21, return_trajectories=True)
        ref = plain_sample(gm, 1000, rng=22)
        comp = compare_to_plain(run.samples, ref, gm.means, alpha=1e-3, n_permutations=499, rng=23)
        assert comp.passed, comp
        steps = check_trajectories(run.trajectories, plain_kernel(gm), run.draft_means, run.depths, rng=24)
        assert steps.passed, steps.summary()

    def test_cheap_draft_model_exact(self):
        gm = GaussianMixture.random(dim=512, n_components=5, seed=0)
        run = speculative_sample(gm, "dgrs", K=2, L=3, n_samples=1000, rng=31, draft=gm.perturbed(0.02, seed=1))
        ref = plain_sample(gm, 1000, rng=32)
        assert compare_to_plain(run.samples, ref, gm.means, alpha=1e-3, rng=33).passed


class TestThresholdInRuns:
    def test_snapped_policy_choice(self):
        from rass_theory.diffusion._contract import THRESHOLD_GRID, snapped_threshold_verifier

        v = snapped_threshold_verifier()
        # the policy is chosen at the grid point below delta: same object inside one cell
        assert v.policy_for(1, 0.30) is v.policy_for(1, 0.26)
        assert v.policy_for(1, 0.30) is not v.policy_for(1, 0.55)
        assert v.policy_for(1, 50.0) is v.policy_for(1, float(THRESHOLD_GRID[-1]))

    def test_threshold_run_k1(self, gm16):
        run = speculative_sample(gm16, "threshold", K=1, L=2, n_samples=20, rng=0)
        assert run.verifier == "threshold" and run.samples.shape == (20, 16)
        assert run.rounds.committed.sum() == 20 * 28
