"""The one law engine (rass_theory.exact.laws) on torch against NumPy, mpmath and closed forms."""
import numpy as np
import pytest
import torch
from scipy import special

from rass_theory.backend import NUMPY, get_backend
from rass_theory.exact import batch
from rass_theory.exact import dgrs as exact_dgrs
from rass_theory.exact import laws
from rass_theory.optimize.policies import ThresholdRankPolicy

TORCH = get_backend(torch.zeros(1))


def both(x):
    """The same float64 values as a NumPy array and a torch tensor."""
    x = np.asarray(x, dtype=np.float64)
    return x, torch.tensor(x)


class TestNormalPieces:
    def test_log_tail_difference_matches_mpmath_in_both_tails(self):
        mpmath = pytest.importorskip("mpmath")
        mpmath.mp.dps = 50
        a = [-40.0, -3.0, -0.5, 0.2, 5.0, 30.0]
        b = [x + h for x, h in zip(a, [1.0, 0.5, 2.0, 1e-3, 0.1, 1.0])]
        ref = [float(mpmath.log(mpmath.ncdf(-x) - mpmath.ncdf(-y) if x > 0 else mpmath.ncdf(y) - mpmath.ncdf(x)))
               for x, y in zip(a, b)]
        (an, at), (bn, bt) = both(a), both(b)
        for nx, x, y in ((NUMPY, an, bn), (TORCH, at, bt)):
            np.testing.assert_allclose(np.asarray(laws._log_diff_tails(nx, x, y)), ref, rtol=1e-12)

    def test_centered_mass_matches_mpmath_for_tiny_and_wide_intervals(self):
        mpmath = pytest.importorskip("mpmath")
        mpmath.mp.dps = 50
        m = [0.0, 0.3, -2.0, 4.0, 7.5, -9.0]
        h = [1e-9, 1e-3, 0.02, 0.5, 3.0, 0.01]
        ref = [float(mpmath.ncdf(mpmath.mpf(x) + y) - mpmath.ncdf(mpmath.mpf(x) - y)) for x, y in zip(m, h)]
        for nx, conv in ((NUMPY, np.asarray), (TORCH, torch.tensor)):
            got = np.asarray(laws.centered_mass(nx, conv(np.array(m)), conv(np.array(h))))
            np.testing.assert_allclose(got, ref, rtol=1e-13)


class TestSelectedLaw:
    @pytest.mark.parametrize("K", [1, 2, 4, 7])
    def test_rank_law_torch_equals_numpy_and_batch(self, K, rng):
        n = 50
        w = rng.dirichlet(np.ones(K), size=n)
        if K > 1:
            w[:, 0] = np.where(rng.random(n) < 0.3, 0.0, w[:, 0])   # exact zeros are allowed
        w /= w.sum(axis=1, keepdims=True)
        delta = rng.uniform(0.01, 3, n)
        s = rng.normal(0, 3, n)
        ln, lt = laws.rank_law(w), laws.rank_law(torch.tensor(w))
        st = torch.tensor(s)[:, None]
        lr_t = lt.log_ratio(st)[:, 0].numpy()
        np.testing.assert_allclose(lr_t, ln.log_ratio(s[:, None])[:, 0], rtol=1e-13, atol=1e-14)
        ref = batch.selected_logpdf(w, delta, s) + 0.5 * s ** 2 + 0.5 * np.log(2 * np.pi)
        np.testing.assert_allclose(lr_t, ref, rtol=1e-10, atol=1e-12)
        G = lt.cdf_excess(st)[:, 0].numpy() + special.ndtr(s)
        np.testing.assert_allclose(G, batch.selected_cdf(w, delta, s), rtol=1e-10, atol=1e-15)

    def test_threshold_law_matches_policy(self):
        K, t = 4, 0.7
        w = np.array([0.1, 0.2, 0.3, 0.4])
        pol = ThresholdRankPolicy(K, t, w)
        s = np.linspace(-4, 4, 81)
        delta = np.full(s.size, 1.0)
        law = laws.threshold_law(torch.tensor(np.tile(w, (s.size, 1))), torch.full((s.size,), t, dtype=torch.float64))
        st = torch.tensor(s)[:, None]
        logpdf = law.log_ratio(st)[:, 0].numpy() - 0.5 * s ** 2 - 0.5 * np.log(2 * np.pi)
        np.testing.assert_allclose(logpdf, pol.selected_logpdf(delta, s), rtol=1e-10)
        G = law.cdf_excess(st)[:, 0].numpy() + special.ndtr(s)
        np.testing.assert_allclose(G, pol.selected_cdf(delta, s), rtol=1e-9, atol=1e-14)


class TestResidualSampler:
    """The inverse-CDF map u -> s is deterministic: torch and NumPy give the same draws."""

    @pytest.mark.parametrize("K,delta", [(2, 0.05), (4, 0.5), (4, 2.5), (8, 1.0)])
    def test_matches_numpy_at_optimal_weights(self, K, delta, rng):
        from rass_theory.optimize import optimal_rank_weights

        w = optimal_rank_weights(K, delta).weights
        n = 400
        u = rng.random(n)
        got = laws.sample(laws.rank_law(torch.tensor(w)), torch.full((n,), delta, dtype=torch.float64),
                          torch.tensor(u)).numpy()
        np.testing.assert_allclose(got, laws.sample(laws.rank_law(w), np.full(n, delta), u), rtol=0, atol=1e-11)
        np.testing.assert_allclose(got, batch.sample_residual(w, np.full(n, delta), u), rtol=0, atol=1e-10)

    def test_random_weights_and_deltas(self, rng):
        n, K = 600, 3
        w = rng.dirichlet(np.ones(K), size=n)
        d = rng.uniform(0.01, 5, n)
        u = rng.random(n)
        got = laws.sample(laws.rank_law(torch.tensor(w)), torch.tensor(d), torch.tensor(u)).numpy()
        np.testing.assert_allclose(got, laws.sample(laws.rank_law(w), d, u), rtol=0, atol=1e-11)

    def test_float32_inputs_are_computed_in_float64(self, rng):
        from rass_theory.optimize import optimal_rank_weights

        K, delta, n = 4, 1.0, 400
        w = optimal_rank_weights(K, delta).weights
        u = rng.random(n).astype(np.float32)
        got = laws.sample(laws.rank_law(torch.tensor(w, dtype=torch.float32)), torch.full((n,), delta),
                          torch.tensor(u))
        assert got.dtype == torch.float64
        ref = laws.sample(laws.rank_law(w.astype(np.float32).astype(np.float64)), np.full(n, delta),
                          u.astype(np.float64))
        np.testing.assert_allclose(got.numpy(), ref, rtol=0, atol=1e-11)


class TestDGRS:
    @pytest.mark.parametrize("K", [1, 2, 4, 8])
    def test_levels_acceptance_and_sampler_match_numpy(self, K, rng):
        d = np.concatenate([[1e-7, 1e-3], rng.uniform(0.01, 8, 30)])
        lt = laws.DGRSLaw(K, torch.tensor(d))
        acc = 1.0 - lt.P[:, K].numpy()
        ref = np.array([exact_dgrs.acceptance(K, float(x)) for x in d])
        np.testing.assert_allclose(acc, ref, rtol=1e-9, atol=1e-15)
        s = rng.normal(0, 2, d.size)
        for k in range(1, K + 1):
            p = lt.accept(k, torch.tensor(s)).numpy()
            np.testing.assert_allclose(p, exact_dgrs.batch_accept_prob(k, d, s), rtol=1e-12, atol=1e-14)
        u = rng.random(d.size)
        got = lt.sample(torch.tensor(u)).numpy()
        np.testing.assert_allclose(got, laws.DGRSLaw(K, d).sample(u), rtol=0, atol=1e-11)
        np.testing.assert_allclose(got, exact_dgrs.batch_sample_final_residual(K, d, u), atol=1e-10)


class TestFrame:
    def test_rescaling_is_identical_on_both_backends(self):
        """A displacement of (1e300, -1e300), one of 1e-170 and a zero one: same unit direction and
        finite delta on torch as on NumPy (rass_theory.frame rescales by the largest entry)."""
        from rass_theory.verifiers import _tensors
        from rass_theory.verifiers._core import prepare

        mt = np.array([[1e300, -1e300], [30.0, 0.0], [1e-170, 1e-170], [0.0, 0.0]])
        md, ch = np.zeros((4, 2)), np.zeros((4, 3, 2))
        bn = prepare(ch, md, mt, 1.0, np.random.default_rng(0))
        bt = _tensors.prepare(torch.tensor(ch), torch.tensor(md), torch.tensor(mt), 1.0, torch.Generator())
        assert np.all(np.isfinite(bt.delta.numpy()))
        np.testing.assert_allclose(bt.delta.numpy(), bn.delta, rtol=1e-15, atol=0)
        np.testing.assert_allclose(bt.direction.numpy(), bn.direction, rtol=0, atol=1e-16)


class TestIndexing:
    def test_row_slots_and_first_true_match_a_loop_on_both_backends(self):
        rng = np.random.default_rng(11)
        mask = rng.random((40, 25)) < 0.15
        mask[3] = False                                   # a row without True entries
        mask[5] = True                                    # a row with more than `count`
        flags = rng.random(mask.shape) < 0.5
        rows, cols = np.nonzero(mask)
        for nx, conv in ((NUMPY, np.asarray), (TORCH, torch.as_tensor)):
            cell, valid, flag = (np.asarray(x) for x in nx.row_slots(
                conv(rows), conv(cols), 40, 4, conv(flags[rows, cols])))
            first = np.asarray(nx.first_true(conv(mask), 4))
            for i in range(40):
                want = np.flatnonzero(mask[i])[:4]
                k = want.size
                assert valid[i, :k].all() and not valid[i, k:].any()
                np.testing.assert_array_equal(cell[i, :k], want)
                assert (cell[i, k:] == 0).all()
                np.testing.assert_array_equal(flag[i, :k], flags[i, want])
                assert not flag[i, k:].any()
                hit = mask[i, first[i]]                       # padding: False entries
                np.testing.assert_array_equal(np.sort(first[i][hit]), want)

    def test_count_below_a_shared_row_equals_the_row_wise_count(self):
        grid = np.linspace(-3.0, 3.0, 61)[None, :]
        values = np.array([-np.inf, -3.0, -2.95, 0.0, 0.05, 3.0, 3.5, np.inf, np.nan])
        want = np.array([(grid[0] < v).sum() for v in values])
        np.testing.assert_array_equal(NUMPY.count_below(grid, values), want)
        np.testing.assert_array_equal(NUMPY.count_below(np.repeat(grid, values.size, 0), values), want)
        np.testing.assert_array_equal(TORCH.count_below(torch.as_tensor(grid), torch.as_tensor(values)).numpy(), want)
