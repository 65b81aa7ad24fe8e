"""The threshold verifier at per-row deltas: exact per row, one law on NumPy and torch (P8.5)."""
import time

import numpy as np
import pytest
from scipy import stats

from rass_theory import verifiers
from rass_theory.optimize.threshold_table import InterpolatedThresholdPolicy

K = 4
#: 300 distinct deltas (> the 32 shared residual tables, so the per-row sampler runs)
N_DELTAS = 300


def _per_row_deltas(rng, n):
    grid = np.sort(rng.uniform(0.05, 3.0, N_DELTAS))
    idx = rng.integers(0, N_DELTAS, n)
    return grid, idx


def _exact_mean_acceptance(grid, idx):
    pol = InterpolatedThresholdPolicy(K)
    acc = np.array([pol.acceptance(d) for d in grid])
    counts = np.bincount(idx, minlength=grid.size)
    return float(counts @ acc / idx.size), float(counts @ (acc * (1 - acc)) / idx.size)


def _frame(nodes, rng, n, d):
    grid, idx = _per_row_deltas(rng, n)
    delta = grid[idx]
    children, mu_d, mu_t, sigma, e = nodes.build(n, K, d, delta, rng, sigma=np.exp(rng.uniform(-1, 1, n)),
                                                 same_mean=False)
    return grid, idx, delta, children, mu_d, mu_t, sigma, e


def _check_law(nodes, states, mu_d, sigma, e, delta, d):
    s, r = nodes.coordinates(states, mu_d, sigma, e)
    assert stats.kstest(s - delta, "norm").pvalue > 1e-4
    assert stats.kstest(r, "chi2", args=(d - 1,)).pvalue > 1e-4


class TestNumPy:
    def test_exact_at_per_row_deltas(self, nodes):
        rng = np.random.default_rng(20261201)
        n, d = 60_000, 6
        grid, idx, delta, children, mu_d, mu_t, sigma, e = _frame(nodes, rng, n, d)
        v = verifiers.threshold()
        res = v(children, mu_d, mu_t, sigma, rng)
        mean, var = _exact_mean_acceptance(grid, idx)
        # rows are independent, each accepted w.p. a(delta_i): SE of the rate from the per-row variances
        z = (res.accepted.mean() - mean) / np.sqrt(var / n)
        assert abs(z) < 4.5, z
        _check_law(nodes, res.states, mu_d, sigma, e, delta, d)
        # accepted rows are exactly the selected children
        rows = np.flatnonzero(res.accepted)
        np.testing.assert_array_equal(res.states[rows], children[rows, res.child_index[rows]])

    def test_expected_acceptance_is_the_interpolated_policy(self):
        v = verifiers.threshold()
        pol = InterpolatedThresholdPolicy(K)
        assert v.expected_acceptance(K, 1.3) == pytest.approx(pol.acceptance(1.3), abs=1e-15)
        # the optimal policy stays available
        o = verifiers.threshold(parameters="optimal")
        # never better than the optimum, up to the rounding of two acceptances (~1e-16 each)
        assert -4e-16 <= o.expected_acceptance(K, 1.3) - v.expected_acceptance(K, 1.3) <= 1e-4

    def test_same_law_for_one_delta_and_many(self, nodes):
        """A batch of one delta and per-row batches use the same parameters (no batch dependence)."""
        v = verifiers.threshold()
        rng = np.random.default_rng(3)
        a = v.policy_for(K, 0.8)
        b = v.policy_for(K, 2.1)
        assert a is b  # one interpolated policy object per K
        t1, w1 = a.parameters(np.array([0.8]))
        t2, w2 = a.parameters(np.array([0.8, 2.1]))
        assert t1[0] == t2[0] and np.array_equal(w1[0], w2[0])
        children, mu_d, mu_t, sigma, e = nodes.build(20_000, K, 4, 0.8, rng)
        res = v(children, mu_d, mu_t, sigma, rng)
        exact = a.acceptance(0.8)
        assert abs(res.accepted.mean() - exact) / np.sqrt(exact * (1 - exact) / 20_000) < 4.5
        nodes.assert_target_law(res.states, mu_d, sigma, e, 0.8)      # one delta: the shared residual table

    def test_bad_parameters(self):
        with pytest.raises(ValueError, match="parameters must be one of"):
            verifiers.threshold(parameters="fast")

    def test_untabulated_K_falls_back_to_the_optimum(self, nodes):
        v = verifiers.threshold()
        import rass_theory as rt

        assert v.expected_acceptance(1, 0.7) == pytest.approx(rt.acceptance("rmc", 1, 0.7), abs=1e-12)

    def test_2000_distinct_deltas_under_10_seconds(self, nodes):
        rng = np.random.default_rng(5)
        n = 2000
        delta = rng.uniform(0.01, 5.0, n)
        children, mu_d, mu_t, sigma, e = nodes.build(n, K, 64, delta, rng, same_mean=False)
        v = verifiers.threshold()
        t0 = time.perf_counter()
        res = v(children, mu_d, mu_t, sigma, rng)
        assert time.perf_counter() - t0 < 10.0
        assert res.states.shape == (n, 64)


class TestTorch:
    def test_parameters_and_law_agree_with_numpy(self, rng):
        torch = pytest.importorskip("torch")
        from rass_theory.exact import laws
        from rass_theory.optimize.threshold import ThresholdRowLaw
        from rass_theory.torch import verifiers as tv

        n = 64
        delta = np.concatenate([[0.0, 0.1, 2.95, 9.0, 40.0], rng.uniform(0.0, 4.0, n - 5)])

        from rass_theory.backend import get_backend

        class _Batch:
            K = 4
            device = torch.device("cpu")
            delta_safe = torch.as_tensor(delta)
            s = delta_safe
            nx = get_backend(s)

        t_dev, w_dev = tv.threshold()._table_rows(_Batch)
        t_np, w_np = InterpolatedThresholdPolicy(K).parameters(delta)
        np.testing.assert_array_equal(np.isinf(t_dev.numpy()), np.isinf(t_np))
        fin = np.isfinite(t_np)
        np.testing.assert_allclose(t_dev.numpy()[fin], t_np[fin], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(w_dev.numpy(), w_np, atol=1e-14)
        s = rng.normal(0.5, 2.0, (n, 9))
        law_t = laws.threshold_law(w_dev, t_dev)
        law_n = ThresholdRowLaw(t_np, w_np)
        st = torch.as_tensor(s)
        logpdf_t = (law_t.log_ratio(st) - 0.5 * st * st - 0.5 * np.log(2 * np.pi)).numpy()
        np.testing.assert_allclose(logpdf_t, law_n.logpdf(s), rtol=1e-9, atol=1e-9)
        G = law_t.cdf_excess(st).numpy() + __import__("scipy.special").special.ndtr(s)
        np.testing.assert_allclose(G, law_n.cdf(s), atol=1e-12)

    def test_exact_at_per_row_deltas(self, nodes):
        torch = pytest.importorskip("torch")
        from rass_theory.torch import verifiers as tv

        rng = np.random.default_rng(20261202)
        n, d = 40_000, 6
        grid, idx, delta, children, mu_d, mu_t, sigma, e = _frame(nodes, rng, n, d)
        v = tv.threshold()
        res = v(torch.as_tensor(children), torch.as_tensor(mu_d), torch.as_tensor(mu_t), torch.as_tensor(sigma),
                torch.Generator().manual_seed(7))
        mean, var = _exact_mean_acceptance(grid, idx)
        z = (res.accepted.double().mean().item() - mean) / np.sqrt(var / n)
        assert abs(z) < 4.5, z
        _check_law(nodes, res.states.numpy(), mu_d, sigma, e, delta, d)
        assert v.expected_acceptance(K, 1.3) == pytest.approx(verifiers.threshold().expected_acceptance(K, 1.3),
                                                              abs=1e-15)

    def test_untabulated_K_uses_the_rass_member(self, nodes):
        """One meaning on both back ends: an untabulated K uses ``t = +inf`` with the interpolated
        optimal RASS weights of each delta (it solved the optimal policy per distinct delta before:
        12 s each at K = 12, 251 s for 20 rows)."""
        torch = pytest.importorskip("torch")
        from rass_theory.optimize.rank_weights import optimal_weights_interpolator
        from rass_theory.torch import verifiers as tv

        rng = np.random.default_rng(1)
        children, mu_d, mu_t, sigma, e = nodes.build(10, 9, 3, 1.0, rng)
        v = tv.threshold()
        res = v(*(torch.as_tensor(a) for a in (children, mu_d, mu_t)), sigma, torch.Generator())
        assert res.states.shape == (10, 3)
        t, w = v.parameters_at(9, 1.0)
        assert t == np.inf and np.array_equal(w, optimal_weights_interpolator(9)(1.0)[0])
        assert v.expected_acceptance(9, 1.0) == pytest.approx(
            rt_acceptance("rass", 9, 1.0, weights=w), abs=1e-12)

    @pytest.mark.parametrize("backend", ["numpy", "torch"])
    def test_untabulated_K_with_distinct_deltas_is_fast_and_exact(self, nodes, backend):
        """K = 12, 20,000 distinct deltas: seconds, the target law, the RASS member's acceptance."""
        from rass_theory.optimize.rank_weights import optimal_weights_interpolator

        rng = np.random.default_rng(12)
        n, k, d = 20_000, 12, 3
        delta = np.exp(rng.uniform(np.log(0.02), np.log(6.0), n))
        children, mu_d, mu_t, sigma, e = nodes.build(n, k, d, delta, rng, same_mean=False)
        v = verifiers.threshold()
        t0 = time.perf_counter()
        if backend == "torch":
            torch = pytest.importorskip("torch")
            res = v(*(torch.as_tensor(a) for a in (children, mu_d, mu_t)), sigma, torch.Generator().manual_seed(3))
            states, accepted = res.states.numpy(), res.accepted.numpy()
        else:
            res = v(children, mu_d, mu_t, sigma, np.random.default_rng(3))
            states, accepted = res.states, res.accepted
        assert time.perf_counter() - t0 < 60
        _check_law(nodes, states, mu_d, sigma, e, delta, d)
        w = optimal_weights_interpolator(k)
        # the exact mean acceptance over the rows' deltas, estimated on every 50th row
        acc = np.array([rt_acceptance("rass", k, x, weights=w(x)[0]) for x in delta[::50]])
        mean = acc.mean()
        z = (accepted.mean() - mean) / np.sqrt(acc.var() / acc.size + mean * (1 - mean) / n)
        assert abs(z) < 4.5, z


def rt_acceptance(*args, **kwargs):
    import rass_theory as rt

    return rt.acceptance(*args, **kwargs)


@pytest.mark.slow
class TestHarness:
    """The whole-state harness on its heterogeneous rows (per-row deltas and sigmas, float32 pass)."""

    def test_numpy(self):
        import rass_theory as rt

        rep = rt.check_exactness(verifiers.threshold(), K=4, delta=1.0, dim=8, n_samples=200_000, rng=20261201)
        assert rep.passed, [(t.name, t.pvalue) for t in rep.tests]

    def test_torch(self):
        pytest.importorskip("torch")
        import rass_theory as rt
        from rass_theory.torch import verifiers as tv

        rep = rt.check_exactness(tv.threshold(), K=4, delta=1.0, dim=8, n_samples=200_000, rng=20261202,
                                 backend="torch")
        assert rep.passed, [(t.name, t.pvalue) for t in rep.tests]
