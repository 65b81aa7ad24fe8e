"""Heterogeneous nodes, the per-row frame, mergeable counts and the seeded chunk plan."""
import numpy as np
import pytest
from scipy import stats

from rass_theory.stats.chunks import call_batches, draw_chunk, run_chunk_numpy
from rass_theory.stats.node import SMALL_BATCHES, SyntheticNode, chunk_plan, chunk_seed, spread_deltas
from rass_theory.stats.streaming import ExactnessCounts

from _stats_stubs import resample


@pytest.fixture
def node():
    return SyntheticNode.build(4, 0.5, 8, n_bins=256, entropy=7)


class TestNode:
    def test_rows_are_heterogeneous_and_frames_exact(self, node):
        spec = chunk_plan(20_000, 20_000, 3, 0)[0]
        rows, children = draw_chunk(node, spec)
        assert rows.sigma.min() < 0.15 and rows.sigma.max() > 7
        norms = np.linalg.norm(rows.mu_draft, axis=1) / rows.sigma
        assert (norms == 0).mean() > 0.05 and norms.max() > 5000 and np.median(norms[norms > 0]) > 5
        frame = node.frame(rows.mu_draft, rows.mu_target, rows.sigma, None)
        deltas = np.asarray(node.deltas)[rows.group]
        # mu_target - mu_draft cancels ||mu_draft||/sigma: the error is a few ulps of the norm
        assert np.all(np.abs(frame.delta - deltas) <= 1e-12 * deltas + 1e-15 * (norms + 1.0))
        assert deltas.min() == 1e-3 and deltas.max() == 12.0
        assert np.mean(rows.group == 0) == pytest.approx(0.5, abs=0.02)
        assert set(np.unique(np.round(frame.delta, 9))) == set(node.deltas)
        np.testing.assert_allclose(np.linalg.norm(frame.e, axis=1), 1.0, rtol=1e-13)
        np.testing.assert_allclose(np.einsum("jnd,nd->jn", frame.v, frame.e), 0.0, atol=1e-13)
        np.testing.assert_allclose(np.linalg.norm(frame.v, axis=2), 1.0, rtol=1e-13)
        # the children are N(mu_draft, sigma^2 I) in every row: standardised they are N(0, I)
        z = (children - rows.mu_draft[:, None]) / rows.sigma[:, None, None]
        assert stats.kstest(z.ravel()[:100_000], "norm").pvalue > 1e-3

    def test_small_batches_share_sigma_and_keep_delta(self, node):
        spec = chunk_plan(1000, 1000, 3, 0)[0]
        assert spec.small_batches == SMALL_BATCHES
        rows, _ = draw_chunk(node, spec)
        for a, b in call_batches(spec)[:-1]:
            assert np.all(rows.sigma[a:b] == rows.sigma[a])
        frame = node.frame(rows.mu_draft, rows.mu_target, rows.sigma, None)
        deltas = np.asarray(node.deltas)[rows.group]
        norms = np.linalg.norm(rows.mu_draft, axis=1) / rows.sigma
        assert np.all(np.abs(frame.delta - deltas) <= 1e-12 * deltas + 1e-15 * (norms + 1.0))
        assert call_batches(spec) == [(0, 1), (1, 3), (3, 6), (6, 13), (13, 1000)]

    def test_bfloat16_nodes_are_exactly_representable(self, node):
        import torch
        rows = node.draw(np.random.default_rng(0), 2000, "bfloat16")
        for a in (rows.mu_draft, rows.mu_target, rows.sigma):
            back = torch.as_tensor(a).to(torch.bfloat16).to(torch.float64).numpy()
            assert np.array_equal(back, a)

    def test_spread_and_bad_arguments(self):
        tails = (4.5, 6.0, 8.0, 12.0)
        assert spread_deltas(0.5) == (1e-3, 3e-3, 1e-2, 0.25, 1.0, 2.0, 3.0) + tails
        assert spread_deltas(2.0) == (1e-3, 3e-3, 1e-2, 0.25, 1.0, 3.0, 4.0) + tails
        assert spread_deltas(0.0) == (1e-3, 3e-3, 1e-2, 0.25, 1.0, 2.0, 3.0) + tails
        for kw, name in (({"n_directions": 8}, "n_directions"), ({"n_bins": 4}, "n_bins"),
                         ({"sigma": 0.0}, "sigma"), ({"named_share": 0.0}, "named_share")):
            with pytest.raises(ValueError, match=name):
                SyntheticNode.build(4, 0.5, 8, **kw)

    def test_edges_are_equiprobable_quantiles(self, node):
        q = np.arange(1, node.n_bins) / node.n_bins
        np.testing.assert_allclose(stats.norm.cdf(node.z_edges), q, atol=1e-13)
        np.testing.assert_allclose(stats.chi2.cdf(node.r_edges, 7), q, atol=1e-12)


class TestChunkPlan:
    def test_seeds_do_not_depend_on_the_number_of_chunks(self):
        a = chunk_plan(1000, 100, 5, 250)
        b = chunk_plan(2000, 100, 5, 250)
        for sa, sb in zip(a, b):
            assert sa.seed.generate_state(4).tolist() == sb.seed.generate_state(4).tolist()
        assert chunk_seed(5, 3).spawn_key == (1, 3) and chunk_seed(5, 3, 1).spawn_key == (5, 1, 3)

    def test_keep_and_resume_start(self):
        plan = chunk_plan(1050, 100, 0, 250)
        assert [s.n for s in plan][-1] == 50 and sum(s.n for s in plan) == 1050
        assert [s.keep for s in plan[:4]] == [100, 100, 50, 0]
        assert [s.index for s in chunk_plan(1050, 100, 0, 250, start=7)] == [7, 8, 9, 10]
        assert plan[-1].small_batches == SMALL_BATCHES and chunk_plan(20, 20, 0, 0)[0].small_batches == ()


class TestCounts:
    def test_split_merge_equals_whole(self, node):
        plan = chunk_plan(3000, 1000, 11, 1500)
        parts = [run_chunk_numpy(resample, node, s) for s in plan]
        merged = ExactnessCounts.merge_all(parts)
        assert merged.n_rows == 3000 and merged.subsample.shape == (1500, 8)
        assert merged.s_counts.sum() == merged.r_counts.sum() == merged.diag_counts.sum() == 3000
        assert (merged.proj_counts.sum(axis=1) == 3000).all() and merged.group_rows.sum() == 3000
        assert merged.joint_counts.sum() == merged.joint_sd_counts.sum() == 3000
        np.testing.assert_allclose(merged.xcov_matrix, sum(p.xcov_matrix for p in parts))
        # trace of sum t^2 (I - e e') is 7 sum t^2: 3000 * 7 within 5 standard errors (Var t^2 = 2)
        assert abs(np.trace(merged.xcov_matrix[0]) - 3000 * 7) < 5 * 7 * np.sqrt(2 * 3000)
        # integer fields are associative bit for bit, running float sums up to rounding (the harness
        # always merges in chunk order, so resumed and distributed runs are still bit-identical)
        left, right = parts[0].merge(parts[1]).merge(parts[2]), parts[0].merge(parts[1].merge(parts[2]))
        for k, a in left.arrays.items():
            if a.dtype.kind == "i":
                assert np.array_equal(a, right.arrays[k]), k
            else:
                np.testing.assert_allclose(a, right.arrays[k], rtol=1e-12, atol=1e-9)

    def test_array_round_trip(self, node):
        c = run_chunk_numpy(resample, node, chunk_plan(500, 500, 3, 100)[0])
        back = ExactnessCounts.from_arrays(c.to_arrays(prefix="p0_"), node, prefix="p0_")
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


@pytest.mark.parametrize("K, dim, n", [(2, 8, 70_001), (4, 256, 300), (1, 1, 5)])
def test_blocked_children_are_one_draw(K, dim, n):
    """``draw_chunk`` draws the children block by block: the same values as one ``(n, K, dim)`` draw."""
    from rass_theory.stats.node import sub_seed

    node = SyntheticNode.build(K, 1.0, dim, entropy=3)
    spec = chunk_plan(n, n, 3, 0)[0]
    rows, children = draw_chunk(node, spec)
    ref = np.random.default_rng(sub_seed(spec.seed, 0)).standard_normal((n, K, dim))
    ref *= rows.sigma[:, None, None]
    ref += rows.mu_draft[:, None, :]
    assert np.array_equal(children, ref)
