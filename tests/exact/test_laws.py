"""Tests for rass_theory.exact.laws: the one law engine (NumPy and torch) and nx.find_root."""
import numpy as np
import pytest
from scipy import special

from rass_theory.backend import NUMPY, get_backend
from rass_theory.exact import batch, laws
from rass_theory.exact import order_stats as ost

torch = pytest.importorskip("torch")


def _rows(rng, n, K):
    return rng.dirichlet(np.ones(K), size=n), np.exp(rng.uniform(np.log(0.05), np.log(3.0), n))


class TestFindRoot:
    def test_numpy_and_torch_agree_to_rounding(self):
        k = np.array([0.5, 2.0, 3.0, 1e4])
        a, b = np.zeros(4), np.full(4, 10.0)
        x_np = NUMPY.find_root(lambda x, c: np.exp(x) - 1.0 - c, a, b, args=(k,))
        tnx = get_backend(torch.zeros(1))
        x_t = tnx.find_root(lambda x, c: torch.exp(x) - 1.0 - c, torch.tensor(a), torch.tensor(b),
                            args=(torch.tensor(k),)).numpy()
        np.testing.assert_allclose(x_np, np.log1p(k), rtol=4e-16, atol=0)
        np.testing.assert_allclose(x_t, np.log1p(k), rtol=1e-15, atol=0)

    def test_invalid_bracket_returns_the_better_end(self):
        from rass_theory.backend._torch import fixed_find_root

        x = NUMPY.find_root(lambda x: x + 5.0, np.array([0.0]), np.array([1.0]))
        assert x[0] == 0.0
        tnx = get_backend(torch.zeros(1))
        assert tnx.find_root(lambda x: x + 5.0, torch.zeros(1), torch.ones(1))[0] == 0.0
        assert fixed_find_root(lambda x: x + 5.0, torch.zeros(1), torch.ones(1))[0] == 0.0

    def test_accelerator_iteration_on_cpu_tensors(self):
        """The fixed-count iteration accelerators run (CPU tensors take the NumPy path) reaches
        the roots to rounding, also from given end values."""
        from rass_theory.backend._torch import fixed_find_root

        k = torch.tensor([0.5, 2.0, 3.0, 1e4], dtype=torch.float64)
        a, b = torch.zeros(4, dtype=torch.float64), torch.full((4,), 10.0, dtype=torch.float64)

        def fun(x, c):
            return torch.exp(x) - 1.0 - c

        x = fixed_find_root(fun, a, b, args=(k,))
        np.testing.assert_allclose(x.numpy(), np.log1p(k.numpy()), rtol=1e-15, atol=0)
        x_v = fixed_find_root(fun, a, b, args=(k,), values=(fun(a, k), fun(b, k)))
        np.testing.assert_array_equal(x_v.numpy(), x.numpy())

    @pytest.mark.parametrize("tol", [4 * np.finfo(float).eps, 1e-9])
    def test_chandrupatla_is_scipys_iteration(self, tol, rng):
        """The lean Chandrupatla loop gives scipy's iterates bit for bit: roots, statuses, brackets."""
        from scipy.optimize.elementwise import find_root

        from rass_theory.backend import chandrupatla

        n = 3000
        c, p = rng.uniform(-3, 3, n), rng.uniform(0.5, 3, n)
        a, b = c - rng.uniform(0, 4, n), c + rng.uniform(0, 4, n)
        b[:20] = c[:20] - 0.1                                  # no sign change: status -1
        a[20:25] = c[20:25]                                    # a root at an end: f = 0

        def f(x, c, p):
            return np.sinh(p * (x - c)) + 0.3 * (x - c) ** 3

        ref = find_root(f, (a, b), args=(c, p), tolerances=dict(xatol=tol, xrtol=tol, fatol=0.0, frtol=0.0),
                        maxiter=200)
        got = chandrupatla(f, a, b, args=(c, p), xatol=tol, xrtol=tol, maxiter=200)
        np.testing.assert_array_equal(got.x, np.asarray(ref.x))
        np.testing.assert_array_equal(got.status, np.asarray(ref.status))
        np.testing.assert_array_equal(got.lo, np.asarray(ref.bracket[0]))
        np.testing.assert_array_equal(got.hi, np.asarray(ref.bracket[1]))
        np.testing.assert_array_equal(got.f_lo, np.asarray(ref.f_bracket[0]))
        assert (got.status[:20] == -1).all() and got.success[20:].all()
        assert got.nfev == int(np.max(ref.nfev))


class TestRankLaw:
    @pytest.mark.parametrize("K", [1, 2, 5])
    def test_matches_batch_laws_on_both_backends(self, K, rng):
        W, d = _rows(rng, 40, K)
        s = rng.uniform(-12.0, 14.0, (40, 1))
        ref_lr = (batch.selected_logpdf(W, d, s[:, 0]) + 0.5 * s[:, 0] ** 2 + 0.5 * np.log(2 * np.pi))[:, None]
        ref_ce = ost.mixture_cdf_excess(W, s)
        for arr in (np.asarray, torch.tensor):
            law = laws.rank_law(arr(W))
            lr = np.asarray(law.log_ratio(arr(s)))
            ce = np.asarray(law.cdf_excess(arr(s)))
            np.testing.assert_allclose(lr, ref_lr, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(ce, ref_ce, rtol=1e-10, atol=1e-16)

    @pytest.mark.parametrize("threshold", [False, True])
    def test_grid_form_equals_pointwise_form(self, threshold, rng):
        W, _ = _rows(rng, 30, 4)
        grid = np.linspace(-11.5, 14.5, 300)
        t = np.where(rng.random(30) < 0.2, np.inf, rng.uniform(-2.0, 3.0, 30))
        law = laws.threshold_law(W, t) if threshold else laws.rank_law(W)
        np.testing.assert_allclose(law.log_ratio_grid(grid), law.log_ratio(np.broadcast_to(grid, (30, 300))),
                                   rtol=1e-13, atol=1e-13)

    def test_threshold_law_at_infinite_threshold_is_rass(self, rng):
        W, _ = _rows(rng, 20, 3)
        s = rng.uniform(-8.0, 8.0, (20, 5))
        a, b = laws.rank_law(W), laws.threshold_law(W, np.full(20, np.inf))
        np.testing.assert_allclose(b.log_ratio(s), a.log_ratio(s), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(b.cdf_excess(s), a.cdf_excess(s), rtol=1e-12, atol=1e-16)


class TestResidualIntervals:
    """The one public crossing search: crossings, signs and masses per row."""

    @pytest.mark.parametrize("K", [2, 5, 16])
    def test_crossings_masses_and_flags(self, K, rng):
        W, d = _rows(rng, 60, K)
        law = laws.rank_law(W)
        bounds, positive, mass = laws.residual_intervals(law, d)
        k = np.count_nonzero(np.isfinite(bounds), axis=1)
        for i in range(60):
            c = bounds[i, 1:k[i] + 1]
            assert np.all(np.diff(c) > 0)
            # machine-precision crossings: log f - log g vanishes there to rounding of its terms
            h = d[i] * c - 0.5 * d[i] ** 2 - law.take(np.array([i])).log_ratio(c[None, :])[0]
            assert np.all(np.abs(h) <= 64 * np.finfo(float).eps * (1.0 + d[i] * np.abs(c) + d[i] ** 2))
            # alternating signs on the k + 1 intervals, none on the padding
            flags = positive[i]
            assert not np.any(flags[k[i] + 1:]) and np.all(flags[1:k[i] + 1] != flags[:k[i]])
            assert np.all(mass[i][~flags] == 0) and np.all(mass[i] >= 0)
        # the masses sum to TV: the sampler's (1e-9-accurate) crossings give the same total
        np.testing.assert_allclose(mass.sum(1), laws.residual_mass(law, d), rtol=1e-13, atol=1e-17)
        np.testing.assert_allclose(mass.sum(1), batch.residual_intervals(W, d).total, rtol=1e-11, atol=1e-16)

    def test_nearly_uniform_weights_keep_relative_accuracy(self):
        """Weights read as w/S with exact deviations: at delta = 1e-8 the TV has relative accuracy
        1e-12 although sum(w) = 1 only to rounding (the old per-row scan's guarantee)."""
        K, delta = 2, 1e-8
        w = 0.5 + delta * 0.3 * np.array([-0.25, 0.25])
        tv = laws.residual_mass(laws.rank_law(w), np.array([delta]))[0]
        # the mpmath value at 60 digits (tv_oracle of tests/exact/test_rass_exact.py); reading the
        # weights unnormalised gives 3.6144228007e-09 (relative error 4e-9)
        ref = batch.residual_intervals(w, np.array([delta])).total[0]
        assert tv == pytest.approx(3.614422814620051e-09, rel=1e-12) and ref == pytest.approx(tv, rel=1e-12)


class TestSample:
    @pytest.mark.parametrize("K", [2, 4, 8])
    def test_same_uniforms_same_draws_as_the_per_row_sampler(self, K, rng):
        W, d = _rows(rng, 400, K)
        u = rng.random(400)
        new = laws.sample(laws.rank_law(W), d, u)
        # the reference: the same search on a grid four times finer (other brackets, same draws)
        ref = batch.sample_residual(W, d, u, spacing=batch.grid_spacing(K) / 4)
        np.testing.assert_allclose(new, ref, rtol=0, atol=1e-11)
        new_t = laws.sample(laws.rank_law(torch.tensor(W)), torch.tensor(d), torch.tensor(u)).numpy()
        np.testing.assert_allclose(new_t, new, rtol=0, atol=1e-11)

    def test_shared_law_groups_rows_and_matches(self, rng):
        w = np.array([0.05, 0.15, 0.3, 0.5])
        d = rng.choice([0.3, 1.0, 2.5], 600)
        u = rng.random(600)
        new = laws.sample(laws.rank_law(w), d, u)
        np.testing.assert_allclose(new, batch.sample_residual(w, d, u, spacing=batch.grid_spacing(4) / 4), rtol=0, atol=1e-11)
        assert np.all(np.diff(new[d == 1.0][np.argsort(u[d == 1.0])]) >= 0)     # monotone in u

    def test_threshold_residual_matches_the_generic_sampler_on_both_backends(self, rng):
        """Per-row thresholds, the jump of g at t inside a grid cell: same draws as the generic
        per-row sampler (which knows nothing of the jump) and as torch."""
        from rass_theory.optimize.policies import ThresholdRankPolicy

        K, m = 4, 80
        t = rng.uniform(-0.5, 2.0, m)
        W = rng.dirichlet(np.ones(K), size=m)
        d, u = rng.uniform(0.05, 3.0, m), rng.random(m)
        new = laws.sample(laws.threshold_law(W, t), d, u)
        pols = [ThresholdRankPolicy(K, t[i], W[i]) for i in range(m)]

        def per_row(name):
            def fn(x):
                return np.stack([getattr(pols[i], name)(np.zeros(1), x[i]) for i in range(m)])
            return fn

        ref = batch.sample_residual_generic(per_row("selected_logpdf"), per_row("selected_cdf"), d, u)
        np.testing.assert_allclose(new, ref, rtol=0, atol=1e-9)
        new_t = laws.sample(laws.threshold_law(torch.tensor(W), torch.tensor(t)), torch.tensor(d), torch.tensor(u))
        np.testing.assert_allclose(new_t.numpy(), new, rtol=0, atol=1e-11)

    @pytest.mark.parametrize("threshold", [False, True])
    def test_scan_blocks_of_rows_give_the_draws_of_one_block(self, threshold, rng):
        """More rows than one scan block (``_SCAN_ENTRIES`` grid values): the same draws as rows
        sampled 100 at a time (one block each), to the rounding of the grid's matrix product."""
        n, K = 1500, 4
        W, d = _rows(rng, n, K)
        t = np.where(rng.random(n) < 0.2, np.inf, rng.uniform(-0.5, 2.5, n))
        u = rng.random(n)
        law = laws.threshold_law(W, t) if threshold else laws.rank_law(W)
        assert n * 150 > laws._SCAN_ENTRIES                  # several blocks (>= 150 grid points)
        whole = laws.sample(law, d, u)
        parts = np.concatenate([laws.sample(law.take(np.arange(i, i + 100)), d[i:i + 100], u[i:i + 100])
                                for i in range(0, n, 100)])
        np.testing.assert_allclose(whole, parts, rtol=0, atol=1e-12)

    def test_accelerator_branches_match_the_host_branches(self, rng, monkeypatch):
        """The sync-free branches (no host reads, no row indexing, fixed-count root finder), run
        on CPU tensors by patching the torch namespace: the NumPy draws to the fixed
        iterations' accuracy (crossings to ~1e-12, roots to ~1e-13 here)."""
        from rass_theory.backend import _torch as T

        n, K = 300, 4
        W, d = _rows(rng, n, K)
        t = np.where(rng.random(n) < 0.2, np.inf, rng.uniform(-1.0, 2.5, n))
        u = rng.random(n)
        ref = [laws.sample(laws.threshold_law(W, t), d, u), laws.sample(laws.rank_law(W), d, u)]

        def fixed(fun, a, b, *, args=(), bisections=8, steps=24, values=None, **_):
            return T.fixed_find_root(fun, a, b, args=args, bisections=bisections, steps=steps, values=values)

        for name, value in (("maybe_any", lambda m: True), ("host_max", lambda x: None),
                            ("rows_where", lambda m: None), ("unique_rows", lambda k: None), ("find_root", fixed)):
            monkeypatch.setattr(T.TorchBackend, name, staticmethod(value))
        tt = torch.tensor
        got = [laws.sample(laws.threshold_law(tt(W), tt(t)), tt(d), tt(u)).numpy(),
               laws.sample(laws.rank_law(tt(W)), tt(d), tt(u)).numpy()]
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=0, atol=1e-9)

    def test_a_law_with_closed_form_crossings_skips_the_scan(self, rng):
        """The optional ``crossings(delta)`` of the protocol: given the crossings, the same draws."""
        W, d = _rows(rng, 200, 3)
        u = rng.random(200)
        inner = laws.rank_law(W)
        calls = []

        class WithCrossings:
            K, nx = inner.K, inner.nx

            def __init__(self, law):
                self.law = law

            def log_ratio(self, s):
                return self.law.log_ratio(s)

            def cdf_excess(self, s):
                return self.law.cdf_excess(s)

            def take(self, rows):
                return WithCrossings(self.law.take(rows))

            def keys(self):
                return self.law.keys()

            def crossings(self, delta):
                calls.append(delta.shape[0])
                whi = np.maximum(delta, np.sqrt(2 * np.log(3))) + 11.5
                return laws._grid_crossings(self.law, delta, whi)

        np.testing.assert_allclose(laws.sample(WithCrossings(inner), d, u), laws.sample(inner, d, u), rtol=0, atol=0)
        assert calls == [200]


class TestScanCut:
    """The crossing scan stops at ``s_cut = delta/2 + log_ratio_max/delta`` (``laws._scan_widths``):
    right of it ``h > 0`` because ``g <= K phi``, so the scan finds the same events on the same
    grid points as the whole grid."""

    @pytest.mark.parametrize("K", [2, 3, 4, 8])
    def test_log_ratio_never_exceeds_log_K(self, K, rng):
        W = rng.dirichlet(np.full(K, 0.3), size=200)
        t = np.where(rng.random(200) < 0.3, np.inf, rng.uniform(-3.0, 4.0, 200))
        s = np.linspace(-11.5, 20.0, 800)[None, :] + np.zeros((200, 1))
        for law in (laws.rank_law(W), laws.threshold_law(W, t)):
            assert law.log_ratio_max == pytest.approx(np.log(K))
            assert np.max(law.log_ratio(s)) <= law.log_ratio_max + 1e-12

    @pytest.mark.parametrize("threshold", [False, True])
    def test_same_crossings_as_the_whole_grid(self, threshold, rng, monkeypatch):
        n, K = 1200, 4
        W = rng.dirichlet(np.full(K, 0.5), size=n)
        d = np.exp(rng.uniform(np.log(1e-3), np.log(12.0), n))
        t = np.where(rng.random(n) < 0.2, np.inf, rng.uniform(-0.5, 2.5, n))
        law = laws.threshold_law(W, t) if threshold else laws.rank_law(W)
        widths = []
        real = laws._scan_widths
        monkeypatch.setattr(laws, "_scan_widths", lambda *a: widths.append(real(*a)) or widths[-1])
        cut = laws.residual_intervals(law, d)
        assert widths[0] is not None and widths[0].min() < widths[0].max()   # rows of several widths
        monkeypatch.setattr(laws, "_scan_widths", lambda *a: None)
        whole = laws.residual_intervals(law, d)
        for a, b in zip(cut, whole):
            if threshold:          # elementwise arithmetic: bit for bit
                np.testing.assert_array_equal(a, b)
            else:                  # the grid's matrix product rounds by block shape
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)

    def test_tiny_and_zero_deltas_keep_the_whole_grid(self):
        law = laws.rank_law(np.array([0.1, 0.2, 0.3, 0.4]))
        s2 = np.linspace(-11.5, 14.5, 200)[None, :]
        assert laws._scan_widths(NUMPY, law, np.array([1e-3, 0.0]), s2) is None
        w = laws._scan_widths(NUMPY, law, np.array([1e-3, 2.0]), s2)
        assert w[0] == 200 and s2[0, w[1] - 2] >= 1.0 + np.log(4) / 2 > s2[0, w[1] - 3]


class TestInverseCdfProbe:
    """The residual's inverse CDF starts from the probe ``x_g`` (the interval's mass spread over
    ``F``'s); where the probe lies above the root the bracket is ``[x_f, x_g]``."""

    @pytest.mark.parametrize("K", [2, 3, 5])
    def test_probe_above_the_root_gives_the_same_draws(self, K, rng, monkeypatch):
        n = 500
        W = rng.dirichlet(np.full(K, 0.5), size=n)
        d = np.exp(rng.uniform(np.log(1e-3), np.log(12.0), n))
        u = rng.random(n)
        law = laws.rank_law(W)
        plain = laws.sample(law, d, u)
        real = laws._f_quantile
        calls = []

        def probe_at_b(nx, delta, a, mass):       # the second call is the probe: push it to b
            calls.append(1)
            x = real(nx, delta, a, mass)
            return x if len(calls) % 2 else x + 50.0

        monkeypatch.setattr(laws, "_f_quantile", probe_at_b)
        np.testing.assert_allclose(laws.sample(law, d, u), plain, rtol=0, atol=1e-12)
        assert len(calls) >= 2

    def test_draws_solve_the_residual_cdf(self, rng):
        """``R(x) = u TV`` per row, ``R`` from the closed-form interval masses.

        An interval whose ``D`` difference is negative gets mass 0, as in the engine."""
        n, K = 400, 4
        W = rng.dirichlet(np.full(K, 0.5), size=n)
        t = np.where(rng.random(n) < 0.3, np.inf, rng.uniform(-0.5, 2.5, n))
        d = np.exp(rng.uniform(np.log(1e-2), np.log(8.0), n))
        u = rng.random(n)
        law = laws.threshold_law(W, t)
        x = laws.sample(law, d, u)
        bounds, positive, mass = laws.residual_intervals(law, d)
        tv = mass.sum(1)
        R = np.zeros(n)
        for i in range(n):
            sub = law.take(np.array([i]))
            for j in np.flatnonzero(positive[i]):
                a, b = bounds[i, j], min(bounds[i, j + 1], x[i])
                if b > a:
                    hi = laws.cdf_difference(sub, np.array([b]), d[i:i + 1])[0]
                    lo = 0.0 if a == -np.inf else laws.cdf_difference(sub, np.array([a]), d[i:i + 1])[0]
                    R[i] += max(hi - lo, 0.0)     # an interval's mass is clamped at 0, as the engine's
        np.testing.assert_allclose(R, u * tv, rtol=1e-9, atol=1e-15)


def test_a_dip_next_to_the_jump_lists_each_crossing_once(monkeypatch):
    """A threshold in or next to the grid cell of a dip (about one row in 250): the dip is
    searched on the continuous piece beside the jump only, so each crossing is listed once, and
    the total mass equals quadrature of ``(f - g)_+``.  Before, ``t`` and the crossing right of it
    came twice (the masses were exact all the same: the duplicates came in pairs)."""
    from scipy import integrate

    W = np.array([[0.06, 0.39, 0.05, 0.5]])
    delta = np.array([2.2])
    real, moved = laws._dip_pieces, []

    def counted(nx, brackets, on, rows, lo, a, hi, sign):
        out = real(nx, brackets, on, rows, lo, a, hi, sign)
        moved.append(int(np.count_nonzero((out[0] != lo) | (out[1] != hi))))
        return out

    monkeypatch.setattr(laws, "_dip_pieces", counted)
    for t0 in np.linspace(1.45, 2.6, 24):
        law = laws.threshold_law(W, np.array([t0]))
        bounds, positive, mass = laws.residual_intervals(law, delta)
        pts = bounds[0][np.isfinite(bounds[0])]
        assert np.all(np.diff(pts) > 1e-7)
        hs = delta[0] * pts - 0.5 * delta[0] ** 2 - law.log_ratio(pts[None, :])[0]
        assert np.all((np.abs(hs) < 1e-9) | (pts == t0))       # crossings, or the jump itself

        def r(x):
            lr = law.log_ratio(np.array([[x]]))[0, 0]
            return max(np.exp(-0.5 * (x - delta[0]) ** 2) - np.exp(-0.5 * x * x + lr), 0.0) / np.sqrt(2 * np.pi)

        cuts = sorted({-11.5, t0, 14.0} | {float(v) for v in pts})
        quad = sum(integrate.quad(r, a, np.nextafter(b, -np.inf), epsabs=1e-15, epsrel=1e-13, limit=200)[0]
                   for a, b in zip(cuts[:-1], cuts[1:]) if b > a)
        assert mass.sum() == pytest.approx(quad, rel=1e-11, abs=1e-15)
    assert sum(moved) >= 1                     # the sweep meets the case it is about
