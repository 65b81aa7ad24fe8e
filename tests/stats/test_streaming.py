"""Mergeable counts and the seeded chunk plan."""
import numpy as np
import pytest

from rass_theory.stats.harness import run_chunk_numpy
from rass_theory.stats.node import SyntheticNode, chunk_plan, chunk_seed
from rass_theory.stats.streaming import VIOLATION_KINDS, ExactnessCounts

from _stats_stubs import resample


@pytest.fixture
def node():
    return SyntheticNode.build(4, 0.5, 8, n_bins=256, entropy=7)


class TestNode:
    def test_geometry(self, node):
        assert np.isclose(np.linalg.norm(node.direction), 1.0)
        np.testing.assert_allclose(node.directions @ node.direction, 0.0, atol=1e-14)
        np.testing.assert_allclose(node.directions @ node.directions.T, np.eye(node.n_directions), atol=1e-14)
        assert np.isclose(np.linalg.norm(node.mu_target - node.mu_draft) / node.sigma, 0.5, rtol=1e-14)

    def test_delta_zero_and_dim_one(self):
        n0 = SyntheticNode.build(2, 0.0, 3, entropy=1)
        assert np.array_equal(n0.mu_draft, n0.mu_target) and np.isclose(np.linalg.norm(n0.direction), 1.0)
        n1 = SyntheticNode.build(2, 1.0, 1, entropy=1)
        assert n1.n_directions == 0 and n1.r_edges.size == 0

    def test_edges_are_equiprobable_quantiles(self, node):
        from scipy import stats
        q = np.arange(1, node.n_bins) / node.n_bins
        np.testing.assert_allclose(stats.norm.cdf(node.z_edges), q, atol=1e-13)
        np.testing.assert_allclose(stats.chi2.cdf(node.r_edges, 7), q, atol=1e-12)

    @pytest.mark.parametrize("kw, name", [({"n_directions": 8}, "n_directions"), ({"n_bins": 4}, "n_bins"),
                                          ({"sigma": 0.0}, "sigma")])
    def test_bad_arguments(self, kw, name):
        with pytest.raises(ValueError, match=name):
            SyntheticNode.build(4, 0.5, 8, **kw)


class TestChunkPlan:
    def test_seeds_do_not_depend_on_the_number_of_chunks(self):
        a = chunk_plan(1000, 100, 5, 250)
        b = chunk_plan(2000, 100, 5, 250)
        for sa, sb in zip(a, b):
            assert sa.seed.generate_state(4).tolist() == sb.seed.generate_state(4).tolist()
        assert chunk_seed(5, 3).spawn_key == (1, 3)

    def test_keep_and_resume_start(self):
        plan = chunk_plan(1050, 100, 0, 250)
        assert [s.n for s in plan][-1] == 50 and sum(s.n for s in plan) == 1050
        assert [s.keep for s in plan[:4]] == [100, 100, 50, 0]
        assert [s.index for s in chunk_plan(1050, 100, 0, 250, start=7)] == [7, 8, 9, 10]


class TestCounts:
    def test_split_merge_equals_whole(self, node):
        """Counts of chunks merged in order equal the counts of the same rows binned at once."""
        plan = chunk_plan(3000, 1000, 11, 1500)
        parts = [run_chunk_numpy(resample, node, s) for s in plan]
        merged = ExactnessCounts.merge_all(parts)
        # the same rows, recomputed as one batch from the per-chunk states
        zs, acc = [], []
        for s in plan:
            rng_c = np.random.default_rng(np.random.SeedSequence(s.seed.entropy, spawn_key=s.seed.spawn_key + (0,)))
            children = rng_c.standard_normal((s.n, node.K, node.dim)) * node.sigma + node.mu_draft
            rng_v = np.random.default_rng(np.random.SeedSequence(s.seed.entropy, spawn_key=s.seed.spawn_key + (1,)))
            res = resample(children, np.tile(node.mu_draft, (s.n, 1)), np.tile(node.mu_target, (s.n, 1)), node.sigma, rng_v)
            zs.append(node.standardise(res.states))
            acc.append(res.accepted)
        z = np.concatenate(zs)
        whole = ExactnessCounts.from_chunk(node, z, np.ones(len(z), bool), np.concatenate(acc),
                                           np.zeros(len(VIOLATION_KINDS)), (), 1500)
        assert merged.equal(whole)
        assert merged.n_rows == 3000 and merged.subsample.shape == (1500, 8)
        # associativity
        assert parts[0].merge(parts[1]).merge(parts[2]).equal(parts[0].merge(parts[1].merge(parts[2])))

    def test_array_round_trip(self, node):
        c = run_chunk_numpy(resample, node, chunk_plan(500, 500, 3, 100)[0])
        back = ExactnessCounts.from_arrays(c.to_arrays())
        assert back.equal(c)

    def test_merge_rejects_other_shapes(self, node):
        other = ExactnessCounts.empty(SyntheticNode.build(4, 0.5, 8, n_bins=128))
        with pytest.raises(ValueError, match="s_counts"):
            ExactnessCounts.empty(node).merge(other)
        with pytest.raises(TypeError, match="other"):
            ExactnessCounts.empty(node).merge(3)


def test_fast_normal_binning_equals_searchsorted(node, rng):
    x = np.concatenate([rng.standard_normal(100_000) * 3, node.z_edges, np.nextafter(node.z_edges, -np.inf),
                        [-40.0, 40.0, -8.3, 8.3, 0.0]])
    assert np.array_equal(node.bin_normal(x), node.bin(x, node.z_edges))
