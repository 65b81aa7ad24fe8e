"""Experiment for issue 19: how much of the harness's row statistics a compiled kernel saves.

Not part of the toolkit (it needs ``pip install numba``, which the project does not depend on).
It compiles two numba kernels and times them against the NumPy code they would replace, on the
states of one 100,000-row chunk (``resample``, K = 2, dim 8) and one 20,000-row chunk (K = 4,
dim 256), CPU seconds, minimum of 5 runs, one thread:

* ``row_pass_axes``: the whole of ``stats.rowstats._row_pass`` for a cell whose fixed projections
  are the coordinate axes and whose cross-covariance basis is the identity (``dim < 16``):
  ``y = (x - mu_target) / sigma``, ``t``, ``r``, the test directions' projections, the projection
  histogram and the cross-covariance sums and matrix, in one loop over rows;
* ``bin_count``: ``EdgeBinner.bin`` and ``np.bincount`` of one statistic fused (the five
  one-dimensional statistics of ``counts_from_rows`` each pay both).

It checks that the histograms are identical and prints the largest deviation of ``t``, ``r``, the
directions and the sums from the NumPy values (rounding only: the loop sums in another order).

``OMP_NUM_THREADS=1 python bench/numba_row_pass.py``
"""
from __future__ import annotations

import numpy as np

try:
    from numba import njit
except ImportError as exc:  # pragma: no cover - an experiment, not a dependency
    raise SystemExit("this experiment needs numba: pip install numba") from exc

from _common import cpu_best

REPEATS = 5


@njit(nogil=True, boundscheck=False)
def _bin(x, table, inv_h, offset, top, ext):
    """``searchsorted(edges, x, "right")`` by :class:`~rass_theory.stats.node.EdgeBinner`'s table."""
    c = x * inv_h + offset
    c = min(max(c, 0.0), top)
    v = np.intp(table[np.intp(c)])
    if v >= 0:
        return v
    b = -v - 1
    if x < ext[b]:
        b -= 1
    if x >= ext[b + 1]:
        b += 1
    return b


@njit(nogil=True, boundscheck=False)
def bin_count(x, table, inv_h, offset, top, ext, bins, counts):
    for i in range(x.shape[0]):
        b = _bin(x[i], table, inv_h, offset, top, ext)
        bins[i] = b
        counts[b] += 1


@njit(nogil=True, boundscheck=False)
def row_pass_axes(states, mt, sigma, e, anchors, ea, norms, table, inv_h, offset, top, ext, n_bins,
                  t, r, dirs, proj_counts, xs, xm, w_sum):
    n, d = states.shape
    nd = anchors.shape[0]
    y = np.empty(d)
    xm0, xm1 = xm[0], xm[1]
    for i in range(n):
        s = sigma[i]
        ti = 0.0
        yy = 0.0
        for q in range(d):
            yq = (states[i, q] - mt[i, q]) / s
            y[q] = yq
            ti += yq * e[i, q]
            yy += yq * yq
            proj_counts[q * n_bins + _bin(yq, table, inv_h, offset, top, ext)] += 1
        t[i] = ti
        r[i] = max(yy - ti * ti, 0.0)
        for j in range(nd):
            ay = 0.0
            for q in range(d):
                ay += y[q] * anchors[j, q]
            dirs[j, i] = (ay - ea[j, i] * ti) / norms[j, i]
        t2 = ti * ti
        c1 = t2 - 1.0
        w2 = c1 * c1
        w_sum[0] += t2
        w_sum[1] += w2
        for a in range(d):
            xs[0, a] += ti * y[a] - t2 * e[i, a]
            xs[1, a] += c1 * y[a] - c1 * ti * e[i, a]
            f0, f1 = t2 * e[i, a], w2 * e[i, a]
            for b in range(d):
                xm0[a, b] -= f0 * e[i, b]
                xm1[a, b] -= f1 * e[i, b]


def _chunk(K, dim, n):
    import rass_theory as rt
    from rass_theory.stats import chunks as C, config as CF

    v = rt.verifiers.resample()
    cfg = CF.harness_config(v, K, 1.0, dim, n_samples=n, chunk_size=n, rng=0, dtype="float64", two_sample_size=0)
    node = CF.build_node(cfg)
    rows, children = C.draw_chunk(node, C.run_plan(cfg)[0])
    states = np.asarray(v(children, rows.mu_draft, rows.mu_target, rows.sigma, np.random.default_rng(1)).states,
                        dtype=np.float64)
    return node, node.frame(rows.mu_draft, rows.mu_target, rows.sigma, C.fallback_directions(rows, node)), states


def main():
    from rass_theory.stats import rowstats as R
    from rass_theory.stats.node import N_PROJECTION_BINS, _binner
    from rass_theory.stats.streaming import _field_shapes

    for K, dim, n in ((2, 8, 100_000), (4, 256, 20_000)):
        node, frame, states = _chunk(K, dim, n)
        valid = np.ones(n, bool)

        def fresh():
            return {k: np.zeros(s, dt) for k, (s, dt) in _field_shapes(node).items()}

        numpy_s = cpu_best(lambda: R._row_pass(node, frame, states, valid, fresh()), REPEATS)
        out = fresh()
        t, r, dirs, _ = (np.array(a, copy=True) for a in R._row_pass(node, frame, states, valid, out))
        print(f"K={K} dim={dim} n={n}: _row_pass (NumPy) {1e3 * numpy_s:.1f} ms")
        b = _binner(N_PROJECTION_BINS, 0)
        args = (b.table, b.inv_h, b.offset, float(b.n_cells - 1), b.ext)
        if dim < 16:   # the axes-and-identity kernel only
            kt, kr, kd = np.empty(n), np.empty(n), np.empty((node.n_directions, n))
            pc = np.zeros(dim * N_PROJECTION_BINS, np.int64)
            xs, xm, ws = np.zeros((2, dim)), np.zeros((2, dim, dim)), np.zeros(2)
            A, norms = np.ascontiguousarray(frame.anchors), frame._norms()

            def kernel():
                for a_ in (pc, xs, xm, ws):
                    a_[...] = 0
                row_pass_axes(states, frame.mu_target, frame.sigma, frame.e, A, frame.ea, norms, *args,
                              N_PROJECTION_BINS, kt, kr, kd, pc, xs, xm, ws)

            kernel()   # compile
            kernel_s = cpu_best(kernel, REPEATS)
            kernel()
            xmat = xm + ws[:, None, None] * np.eye(dim)
            print(f"  row_pass_axes (numba) {1e3 * kernel_s:.1f} ms ({kernel_s / numpy_s:.2f}x); histogram identical: "
                  f"{np.array_equal(pc.reshape(dim, -1), out['proj_counts'])}; max |diff| t {np.abs(kt - t).max():.1e}, "
                  f"r {np.abs(kr - r).max():.1e}, dirs {np.abs(kd - dirs).max():.1e}, "
                  f"xcov sums {np.abs(xs - out['xcov_sums']).max():.1e}, "
                  f"matrix {np.abs(xmat - out['xcov_matrix']).max():.1e} (entries ~{np.abs(xmat).max():.0e})")
        zb = _binner(node.n_bins, 0)
        zargs = (zb.table, zb.inv_h, zb.offset, float(zb.n_cells - 1), zb.ext)
        bins, counts = np.empty(n, np.intp), np.zeros(node.n_bins, np.int64)
        numpy_bin = cpu_best(lambda: np.bincount(zb.bin(t), minlength=node.n_bins), REPEATS)
        bin_count(t, *zargs, bins, counts)   # compile
        fused = cpu_best(lambda: bin_count(t, *zargs, bins, counts), REPEATS)
        counts[:] = 0
        bin_count(t, *zargs, bins, counts)
        ref = zb.bin(t)
        same = np.array_equal(bins, ref) and np.array_equal(counts, np.bincount(ref, minlength=node.n_bins))
        print(f"  one statistic's bins and counts ({node.n_bins} bins): NumPy {1e3 * numpy_bin:.2f} ms, "
              f"numba {1e3 * fused:.2f} ms ({fused / numpy_bin:.2f}x), identical: {same}")


if __name__ == "__main__":
    main()
