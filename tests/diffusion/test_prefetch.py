"""Root-drift prefetching, evaluate_leaves, the torch dispatch and P9's predictability condition."""
import sys
import types

import numpy as np
import pytest

from rass_theory.diffusion import GaussianMixture, check_trajectories, plain_kernel, plain_sample, speculative_sample
from rass_theory.diffusion._walk import _nearest
from rass_theory.diffusion.exactness import compare_to_plain
from rass_theory.diffusion.schedule import ChurnSchedule
from rass_theory.verifiers import VerifierResult, get_verifier


@pytest.fixture(scope="module")
def gm16():
    return GaussianMixture.random(dim=16, n_components=5, seed=0)


def always_reject(children, mu_draft, mu_target, sigma, rng):
    sigma = np.broadcast_to(np.asarray(sigma, float), (children.shape[0],))
    n = children.shape[0]
    return VerifierResult(mu_target + sigma[:, None] * rng.standard_normal(mu_target.shape), np.zeros(n, bool),
                          np.full(n, -1))


class Spy:
    """Exact verifier (D-GRS) that records what it was given."""

    def __init__(self, K):
        self.inner = get_verifier("dgrs", K)
        self.calls = []

    def __call__(self, children, mu_draft, mu_target, sigma, rng):
        res = self.inner(children, mu_draft, mu_target, sigma, rng)
        self.calls.append((children.copy(), mu_draft.copy(), np.asarray(res.states).copy(),
                           np.asarray(res.accepted).copy()))
        return res


class TestValidation:
    @pytest.mark.parametrize("kw,match", [
        (dict(prefetch="sibling"), r"prefetch must be one of \['nearest', 'parent', 'none'\]"),
        (dict(protocol="authors"), r"protocol must be one of \['default', 'paper'\]"),
        (dict(backend="jax"), r"backend must be one of \['numpy', 'torch'\]"),
    ])
    def test_unknown_names_list_valid_ones(self, gm16, kw, match):
        with pytest.raises(ValueError, match=match):
            speculative_sample(gm16, "dgrs", K=2, L=2, n_samples=4, **kw)

    def test_plain_protocol_and_backend(self, gm16):
        with pytest.raises(ValueError, match="protocol must be one of"):
            plain_sample(gm16, 4, protocol="authors")
        with pytest.raises(ValueError, match="backend must be one of"):
            plain_sample(gm16, 4, backend="jax")

    def test_evaluate_leaves_needs_frozen_draft(self, gm16):
        with pytest.raises(ValueError, match="evaluate_leaves=True needs draft='frozen'.*cannot use it"):
            speculative_sample(gm16, "dgrs", K=2, L=2, n_samples=4, evaluate_leaves=True, draft=gm16.perturbed(0.1))

    def test_evaluate_leaves_type(self, gm16):
        with pytest.raises(TypeError, match="evaluate_leaves"):
            speculative_sample(gm16, "dgrs", K=2, L=2, n_samples=4, evaluate_leaves="yes")


class TestNearestSibling:
    def test_nearest_index_ties_to_lower(self):
        y = np.zeros((2, 3))
        kids = np.array([[[1.0, 0, 0], [0, 0.5, 0], [0, -0.5, 0]], [[2.0, 0, 0], [3.0, 0, 0], [0.1, 0, 0]]])
        np.testing.assert_array_equal(_nearest(kids, y), [1, 2])

    @pytest.mark.parametrize("expansion", ["lazy", "full"])
    def test_next_drift_is_nearest_childs_velocity(self, gm16, expansion):
        """After a correction at depth 0 of an L >= 2 tree, the next round drafts with u(nearest child)."""
        sch = ChurnSchedule(30, 0.06)
        spy = Spy(3)
        run = speculative_sample(gm16, spy, K=3, L=3, n_samples=1, n_steps=30, rng=4, expansion=expansion)
        # walk the spy's log: a call is a round start when the round record says so
        rounds = run.rounds
        starts = np.cumsum(np.concatenate([[0], rounds.committed[:-1]]))
        checked = 0
        log = iter(spy.calls)
        calls_per_round = []
        for r in range(len(rounds.committed)):
            calls_per_round.append([next(log) for _ in range(rounds.committed[r])])
        for r in range(len(calls_per_round) - 1):
            last_children, _, last_state, last_acc = calls_per_round[r][-1]
            if rounds.drift_source[r + 1] != "nearest":
                continue
            assert not last_acc[0]
            k_next = rounds.start_step[r + 1]
            child = last_children[0, _nearest(last_children, last_state)[0]]
            mu_d = calls_per_round[r + 1][0][1][0]
            x = last_state[0]
            v_f = (mu_d - sch.a[k_next] * x) / sch.b[k_next]
            np.testing.assert_allclose(v_f, gm16.velocity(child[None], sch.s[k_next])[0], rtol=1e-9, atol=1e-9)
            checked += 1
        assert checked >= 2 and starts[-1] < 28

    @pytest.mark.parametrize("expansion", ["lazy", "full"])
    def test_sources_follow_round_endings(self, gm16, expansion):
        run = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=40, rng=2, expansion=expansion)
        r = run.rounds
        traj_first = np.r_[True, r.trajectory[1:] != r.trajectory[:-1]]
        assert set(r.drift_source[r.start_step == 0]) == {"initial"}
        assert set(r.drift_source) <= {"initial", "nearest", "parent"} and "nearest" in set(r.drift_source)
        assert not r.root_call.any() and traj_first.sum() >= 1

    def test_parent_and_none_sources(self, gm16):
        p = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=20, rng=2, prefetch="parent")
        assert set(p.rounds.drift_source) == {"initial", "parent"}
        n = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=20, rng=2, prefetch="none")
        assert set(n.rounds.drift_source) == {"initial", "root"}
        assert np.all(n.rounds.root_call == (n.rounds.drift_source == "root"))
        root = n.nodes.depth == 0
        assert np.all(n.nodes.delta[root] == 0)          # the root's velocity is exact every round


class TestCounting:
    @pytest.mark.parametrize("prefetch", ["nearest", "parent", "none"])
    @pytest.mark.parametrize("leaves", [False, True])
    def test_calls_are_rounds_plus_root_calls_plus_initial(self, gm16, prefetch, leaves):
        run = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=30, rng=6, prefetch=prefetch,
                                 evaluate_leaves=leaves)
        r = run.rounds
        per_traj = np.bincount(r.trajectory, weights=r.called.astype(float) + r.root_call, minlength=30)
        np.testing.assert_array_equal(run.target_calls, 1 + per_traj)

    def test_none_always_reject_costs_two_calls_per_round(self, gm16):
        run = speculative_sample(gm16, always_reject, K=2, L=3, n_samples=3, rng=0, prefetch="none")
        # initial + first round's batch + 26 rounds of (root call + batch) + the last round (depth 1:
        # its root call makes the root exact, so nothing is left to evaluate in a batch)
        np.testing.assert_array_equal(run.target_calls, 1 + 1 + 26 * 2 + 1)

    def test_nearest_adds_no_calls(self, gm16):
        """Same verifier log: 'nearest' and 'parent' cost the same for an always-reject verifier."""
        a = speculative_sample(gm16, always_reject, K=2, L=3, n_samples=3, rng=0, prefetch="nearest")
        b = speculative_sample(gm16, always_reject, K=2, L=3, n_samples=3, rng=0, prefetch="parent")
        np.testing.assert_array_equal(a.target_calls, b.target_calls)

    def test_committed_leaf_gives_exact_root(self, gm16):
        run = speculative_sample(gm16, "dgrs", K=2, L=2, n_samples=40, rng=3, evaluate_leaves=True)
        src = run.nodes.source
        leaf_rounds = (src == "leaf") & (run.nodes.depth == 0)
        assert leaf_rounds.any() and np.all(run.nodes.delta[leaf_rounds] == 0)
        assert run.target_nodes_per_round == 1 + 2 + 4

    @pytest.mark.parametrize("prefetch", ["nearest", "parent", "none"])
    def test_lazy_and_full_same_calls_in_law(self, gm16, prefetch):
        a = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=300, rng=1, prefetch=prefetch, expansion="lazy",
                               evaluate_leaves=True)
        b = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=300, rng=2, prefetch=prefetch, expansion="full",
                               evaluate_leaves=True)
        assert abs(a.speedup - b.speedup) / np.hypot(a.speedup_se, b.speedup_se) < 4.5


class TestEstimators:
    def test_mean_of_ratios(self, gm16):
        run = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=50, rng=0)
        r = 28 / run.target_calls
        assert run.speedup_mean_of_ratios == pytest.approx(r.mean())
        assert run.speedup_mean_of_ratios_se == pytest.approx(r.std(ddof=1) / np.sqrt(50))
        assert run.speedup_mean_of_ratios >= run.speedup        # Jensen
        assert run.speedup == pytest.approx(28 / run.target_calls.mean())


class TestTorchDispatch:
    def test_speculative_and_plain_forward_every_argument(self, gm16, monkeypatch):
        seen = {}
        fake = types.ModuleType("rass_theory.diffusion.torch_sampler")
        fake.speculative_sample_torch = lambda target, verifier, **kw: seen.setdefault("spec", (verifier, kw))
        fake.plain_sample_torch = lambda target, **kw: seen.setdefault("plain", kw)
        monkeypatch.setitem(sys.modules, "rass_theory.diffusion.torch_sampler", fake)
        import rass_theory.diffusion as diff

        monkeypatch.setattr(diff, "torch_sampler", fake, raising=False)
        speculative_sample(gm16, "rass", K=2, L=3, n_samples=5, n_steps=30, churn=0.06, rng=1, prefetch="parent",
                           protocol="paper", evaluate_leaves=True, backend="torch", device="cpu", dtype="float32")
        v, kw = seen["spec"]
        assert v == "rass" and kw == dict(K=2, L=3, n_samples=5, n_steps=30, churn=0.06, rng=1, kind="sde",
                                          prefetch="parent", protocol="paper", evaluate_leaves=True, device="cpu",
                                          dtype="float32", record_trace=True, return_trajectories=False)
        plain_sample(gm16, 5, 30, 0.06, rng=1, protocol="paper", backend="torch", device="cpu")
        assert seen["plain"] == dict(n_samples=5, n_steps=30, churn=0.06, rng=1, kind="sde", protocol="paper",
                                     device="cpu", dtype=None, return_trajectories=False)


def peeking(children, mu_draft, mu_target, sigma, rng):
    """NOT predictable: the draft velocity is chosen after seeing child 0's noise.

    ``mu_peek = a y + b u_peek`` with ``u_peek = u_f + (children[:, 0] - mu_draft) / (2 b)``: the
    verifier is told the children were drawn around a mean that moved halfway towards child 0.
    """
    return get_verifier("dgrs", children.shape[1])(children, mu_draft + 0.5 * (children[:, 0] - mu_draft),
                                                   mu_target, sigma, rng)


class TestPredictability:
    """P9 section 3: only velocities fixed before the children are drawn keep the run exact.

    d = 16, 2,000 trajectories, default protocol, alpha = 1e-3: the peeking rule's final
    samples fail the two-sample check (radius p ~ 1e-290 in the measured run), and so do its
    committed steps (``check_trajectories``), while frozen drift under every prefetch mode passes
    both.
    """

    ALPHA = 1e-3

    def _check(self, gm, verifier, prefetch, seed):
        run = speculative_sample(gm, verifier, K=1, L=3, n_samples=2000, rng=seed, prefetch=prefetch,
                                 return_trajectories=True)
        ref = plain_sample(gm, 2000, rng=seed + 1)
        final = compare_to_plain(run.samples, ref, gm.means, alpha=self.ALPHA, n_permutations=199, rng=seed + 2,
                                 detectable=False)
        steps = check_trajectories(run.trajectories, plain_kernel(gm), run.draft_means, run.depths,
                                   alpha=self.ALPHA, rng=seed + 3)
        return final, steps

    def test_peeking_velocity_is_rejected(self, gm16):
        final, steps = self._check(gm16, peeking, "nearest", 1)
        assert not final.passed and not steps.passed

    @pytest.mark.parametrize("prefetch", ["nearest", "parent", "none"])
    def test_frozen_and_prefetched_drift_pass(self, gm16, prefetch):
        final, steps = self._check(gm16, "dgrs", prefetch, 1)
        assert final.passed and steps.passed, steps.summary()
