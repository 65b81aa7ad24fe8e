"""The statistics of one chunk's committed states, each row in its own standardised frame.

:func:`counts_from_rows` turns ``y = (x - mu_draft)/sigma - delta e`` (``N(0, I)`` in every row
under an exact rule, see :mod:`rass_theory.stats.node`) into the additive
:class:`~rass_theory.stats.streaming.ExactnessCounts` of the chunk.  Proofs of the null laws:
``proofs/S1-harness-power.md`` (section "Heterogeneous batches and whole-state statistics").
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special, stats

from ._threads import single_blas_thread
from ._workspace import work_array
from .node import N_PROJECTION_BINS, _binner
from .streaming import INDEP_STATS, LARGE_DELTA, TAILS, VIOLATION_KINDS, ExactnessCounts, _field_shapes

__all__ = ["counts_from_rows", "sequence_sums", "REPEAT_EPS", "tail_probability", "pair_repeat_rate"]

#: Two values of one verifier call closer than this count as a repeat (float64 rounding of the
#: recomputed statistics is below 1e-13 for the harness's nodes).
REPEAT_EPS = 1e-11
#: Near-repeats are looked for among the first this many rows of each call (a reused draw repeats
#: in any window; the sort is the costliest per-row step of the statistics otherwise).
REPEAT_ROWS = 25_000


@functools.lru_cache(maxsize=32)
def _r_tail_edges(dim: int) -> tuple:
    return tuple(float(stats.chi2.isf(special.ndtr(-t), dim - 1)) if dim > 1 else math.inf for t in (4.0, 5.0))


def tail_probability(side: int, threshold: float) -> float:
    """Null probability of a far-tail count: ``Phi(-t)`` one-sided, ``2 Phi(-t)`` absolute."""
    p = float(special.ndtr(-threshold))
    return 2.0 * p if side == 0 else p


def pair_repeat_rate() -> float:
    """``P(|X - X'| < eps)`` for independent ``N(0, 1)``: ``2 eps / (2 sqrt(pi))`` to first order in ``eps``."""
    return 2.0 * REPEAT_EPS / (2.0 * math.sqrt(math.pi))


def _repeats(values: np.ndarray) -> int:
    if values.size < 2:
        return 0
    v = np.sort(values)
    return int(np.count_nonzero(np.diff(v) < REPEAT_EPS))


def _pit_centred(node, frame, states) -> dict:
    """Centred PITs ``u - 1/2`` of ``t``, ``||z_perp||^2`` and ``<v_0, y>`` (the :data:`INDEP_STATS`) per row."""
    B = node.n_bins
    y = frame.standardise(states)
    t = np.einsum("nd,nd->n", y, frame.e)
    out = {"s": (node.bin_normal(t) + 0.5) / B - 0.5}
    if node.dim > 1:
        r = np.maximum(np.einsum("nd,nd->n", y, y) - t * t, 0.0)
        out["rperp"] = (node.bin_rperp(r) + 0.5) / B - 0.5
        if node.n_directions:
            dirs, _ = frame.directions(y, t)
            out["dir0"] = (node.bin_normal(dirs[0]) + 0.5) / B - 0.5
    return out


def sequence_sums(node, frame, first, second, ok) -> tuple:
    """``(pairs, sums)``: matched rows of two calls on the same nodes, and ``sum (u - 1/2)(u' - 1/2)`` per statistic.

    ``first``, ``second``: states ``(m, dim)`` of the two calls (rows of ``frame``); ``ok``: rows
    valid in both.  Under an exact rule with a generator that advances, the two calls' outputs
    are independent given the nodes, so every sum has mean 0 and variance ``pairs v^2``
    (:func:`rass_theory.stats.tests.independence_test`).
    """
    sums = np.zeros(len(INDEP_STATS))
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return 0, sums
    sub = frame.take(idx)
    u1 = _pit_centred(node, sub, np.asarray(first, dtype=np.float64)[idx])
    u2 = _pit_centred(node, sub, np.asarray(second, dtype=np.float64)[idx])
    for q, name in enumerate(INDEP_STATS):
        if name in u1:
            sums[q] = float(np.dot(u1[name], u2[name]))
    return int(idx.size), sums


#: Rows per block of the row pass: the standardised states, their projections and the
#: cross-covariance terms of one block stay in cache (about 64k float64 values).
ROW_BLOCK_VALUES = 1 << 16


def _row_pass(node, frame, states, valid, out) -> tuple:
    """One blocked pass over the rows: the per-row statistics and the whole-state sums.

    Returns ``(t, r, dirs, diag)`` (``t = <e, y>``, ``r = ||y||^2 - t^2``, the test directions'
    projections ``(n_directions, n)`` and ``<w, y>``; zero on invalid rows, whose ``y`` is 0) and
    adds, over the valid rows, the projection histograms ``proj_counts`` (``<u_k, y>`` binned into
    :data:`N_PROJECTION_BINS` PIT bins, one ``bincount`` over ``bin + k * N_PROJECTION_BINS``; the
    coordinates of ``y`` themselves when the projections are the axes) and
    the cross-covariance sums ``xcov_sums`` / ``xcov_matrix`` into ``out``.  The standardised
    states ``y = (x - mu_target) / sigma`` exist one block at a time, so no ``(n, dim)`` float64
    temporary is made; every row's values are those of the unblocked formulas (the sums over rows
    differ only in their order).
    """
    n, d = valid.shape[0], node.dim
    nd = node.n_directions
    t, r = work_array("rows.t", n), work_array("rows.r", n)   # every entry is written below
    dirs = work_array("rows.dirs", (nd, n))
    U = node.projections.T                        # (d, P)
    P = U.shape[1]
    axes = P == d and np.array_equal(U, np.eye(d))   # the projections are y's coordinates: no product
    NB = N_PROJECTION_BINS
    binner = _binner(NB, 0)
    proj_offsets = np.arange(P, dtype=np.intp) * NB
    proj_counts = np.zeros(P * NB, np.int64)
    basis = node.xcov_basis                       # (k, d) orthonormal rows
    identity = basis.shape[0] == d and np.array_equal(basis, np.eye(d))
    k = basis.shape[0]
    xs, xm = np.zeros((2, k)), np.zeros((2, k, k))
    w_sum = np.zeros(2)
    if nd:
        A = frame.anchors.T                       # (d, nd)
    states = np.asarray(states)
    all_valid = bool(valid.all())
    rows = max(256, ROW_BLOCK_VALUES // max(d, P))
    m0 = min(rows, n)
    ybuf, pbuf = work_array("rows.y", (m0, d)), work_array("rows.proj_bins", (m0, P), np.intp)
    wbuf = work_array("rows.weighted", (2, k, m0))
    mt = frame.mu_draft if frame.mu_target is None else frame.mu_target
    for a in range(0, n, rows):
        b = min(n, a + rows)
        ok = valid[a:b]
        st = states[a:b]
        if not all_valid:
            st = np.where(ok[:, None], st, mt[a:b])
        y = frame.standardise(st, out=ybuf[:b - a], rows=slice(a, b))
        if not all_valid:
            y[~ok] = 0.0
        e = frame.e[a:b]
        tb = np.einsum("nd,nd->n", y, e)
        t[a:b] = tb
        r[a:b] = np.maximum(np.einsum("nd,nd->n", y, y) - tb * tb, 0.0)
        if nd:
            db = dirs[:, a:b]                     # (<a_j, y> - ea_ij t_i) / ||a_j - ea_ij e_i||, (nd, m)
            eab = frame.ea[:, a:b]
            np.multiply(eab, tb, out=db)
            np.subtract((y @ A).T, db, out=db)
            db /= frame._norms(slice(a, b))
        if not all_valid:
            y, e, tb = y[ok], e[ok], tb[ok]
        pb = binner.bin(y if axes else y @ U, out=pbuf[:y.shape[0]])
        pb += proj_offsets
        proj_counts += np.bincount(pb.reshape(-1), minlength=P * NB)
        # cross-covariance of t (and t^2 - 1) with P z_perp, and its exact covariance given the t's
        # sum_i c_i P(y_i - t_i e_i) = (c @ y) P^T - ((c t) @ e) P^T: two (2, m) @ (m, d) products
        pe = e if identity else e @ basis.T
        t2 = tb * tb
        c1 = t2 - 1.0
        cw = np.stack([tb, c1, t2, c1 * c1])      # the two statistics' coefficients and weights, (4, m)
        py = cw[:2] @ y
        xs += (py if identity else py @ basis.T) - np.stack([t2, c1 * tb]) @ pe
        w_sum += cw[2:].sum(axis=1)
        # sum_i w_i pe_i pe_i^T for both weights: the weighted rows built as (2, k, m) from one
        # contiguous transpose of pe (inner loops along the rows), then one (2k, m) @ (m, k) product
        wq = wbuf[:, :, :pe.shape[0]]
        np.multiply(np.ascontiguousarray(pe.T), cw[2:, None, :], out=wq)
        xm -= (wq.reshape(2 * k, -1) @ pe).reshape(2, k, k)
    out["proj_counts"] += proj_counts.reshape(P, NB)
    out["xcov_sums"] += xs
    for q in range(2):
        out["xcov_matrix"][q] = w_sum[q] * np.eye(k) + xm[q]
    if nd:
        diag = np.add(t, dirs[0], out=work_array("rows.diag", n))
        diag /= math.sqrt(2.0)
    else:
        diag = np.zeros(n)
    return t, r, dirs, diag


@single_blas_thread()
def counts_from_rows(node, frame, states, valid, accepted, group, violations, messages=(), keep=0,
                     calls=(), sequence=None) -> ExactnessCounts:
    """Counts of one chunk.

    Parameters
    ----------
    node : SyntheticNode
    frame : RowFrame
        Per-row frame of the inputs the verifier received.
    states : ndarray (n, dim)
        Committed states (any float dtype; invalid rows may hold anything).
    valid, accepted : bool arrays (n,)
    group : int array (n,)
        Delta group of each row.
    violations : int array (len(VIOLATION_KINDS),)
    messages : sequence of str
    keep : int
        The first ``keep`` rows (valid ones only) join the two-sample subsample.
    calls : sequence of (start, stop)
        Row ranges of the verifier calls; repeats and row-pair dependence are measured within
        each call (pairs ``(i, i + m/2)`` and ``(i, i + 1)`` of a call of ``m`` rows).
    sequence : (pairs, sums), optional
        The calls-in-sequence probe's :func:`sequence_sums`.
    """
    valid = np.asarray(valid, dtype=bool)
    accepted = np.asarray(accepted, dtype=bool)
    n, d = valid.shape[0], node.dim
    B, J = node.n_bins, node.n_joint_bins
    out = {k: np.zeros(shape, dt) for k, (shape, dt) in _field_shapes(node).items()}
    t, r, dirs, diag = _row_pass(node, frame, states, valid, out)
    vi = np.flatnonzero(valid)
    if vi.size == n:
        vi = slice(None)   # every row valid: views instead of fancy-index copies
    n_ok = int(valid.sum())

    def full(b):   # a statistic's bins on every row (0 on invalid ones: their pair terms are masked out)
        if isinstance(vi, slice):
            return b
        arr = np.zeros(n, b.dtype)
        arr[vi] = b
        return arr

    # bins of the one-dimensional statistics, in this thread's work arrays (rass_theory.stats._workspace)
    z_binner = _binner(B, 0)
    s_bin = z_binner.bin(t[vi], out=work_array("bins.s", n_ok, np.intp))
    out["s_counts"] += np.bincount(s_bin, minlength=B)
    bins = {"s": full(s_bin)}
    if d > 1:
        root = np.sqrt(np.maximum(r[vi], 0.0, out=work_array("bins.root", n_ok)), out=work_array("bins.root", n_ok))
        r_bin = _binner(B, d).bin(root, out=work_array("bins.rperp", n_ok, np.intp))   # SyntheticNode.bin_rperp
        out["r_counts"] += np.bincount(r_bin, minlength=B)
        s_coarse = s_bin * J // B
        s_coarse *= J
        out["joint_counts"] += np.bincount(s_coarse + (r_bin * J // B), minlength=J * J).reshape(J, J)
        bins["rperp"] = full(r_bin)
        for j in range(node.n_directions):
            b = z_binner.bin(dirs[j, vi], out=work_array("bins.dir0" if j == 0 else "bins.dir", n_ok, np.intp))
            out["dir_counts"][j] += np.bincount(b, minlength=B)
            if j == 0:
                out["joint_sd_counts"] += np.bincount(s_coarse + (b * J // B), minlength=J * J).reshape(J, J)
                bins["dir0"] = full(b)
        out["diag_counts"] += np.bincount(z_binner.bin(diag[vi], out=work_array("bins.dir", n_ok, np.intp)),
                                          minlength=B)

    # far tails, over all valid rows and over the large-delta ones
    r_tail = dict(zip((4.0, 5.0), _r_tail_edges(d)))
    large = np.asarray(node.deltas)[np.asarray(group)[vi]] >= LARGE_DELTA
    out["tail_rows"][:] = (n_ok, int(large.sum()))
    values = {"t": t[vi], "r": r[vi], "dir0": dirs[0, vi] if node.n_directions else None, "diag": diag[vi]}
    # one pass per statistic keeps the rows beyond its lowest threshold (about 1e-4 of them); every
    # tail is then counted on those few rows
    lowest = {"r": r_tail[4.0], "t": 4.0, "dir0": 4.0, "diag": 4.0}
    for stat, x in list(values.items()):
        if x is not None:
            far = np.flatnonzero((x if stat == "r" else np.abs(x)) > lowest[stat])
            values[stat] = (x[far], large[far])
    for k, (_, stat, side, thr) in enumerate(TAILS):
        if values[stat] is None or (stat == "r" and d == 1) or (stat == "diag" and not node.n_directions):
            continue
        x, big = values[stat]
        if stat == "r":
            beyond = x > r_tail[thr]
        elif side == 0:
            beyond = np.abs(x) > thr
        else:
            beyond = side * x > thr
        out["tail_counts"][k] = (np.count_nonzero(beyond), np.count_nonzero(beyond & big))

    # acceptance per delta group
    G = node.n_groups
    g = np.asarray(group)[vi]
    out["group_rows"] += np.bincount(g, minlength=G)
    out["group_accepted"] += np.bincount(g[accepted[vi]], minlength=G)

    # within-call repeats and row-pair dependence
    rate = pair_repeat_rate()
    pits = {}
    for a, b in calls:
        c = min(b, a + REPEAT_ROWS)           # the first REPEAT_ROWS rows of the call (a sort each)
        ok = valid[a:c]
        m = int(ok.sum())
        out["repeat_counts"][0] += _repeats(t[a:c][ok])
        out["repeat_expected"][0] += m * (m - 1) / 2 * rate
        if node.n_directions:
            out["repeat_counts"][1] += _repeats(dirs[0, a:c][ok])
            out["repeat_expected"][1] += m * (m - 1) / 2 * rate
        size = b - a
        if size < 2:
            continue
        h = (size + 1) // 2  # np.array_split / torch.chunk put the larger half first
        for p, (i0, j0, cnt) in enumerate(((a, a + h, size - h), (a, a + 1, size - 1))):
            both = valid[i0:i0 + cnt] & valid[j0:j0 + cnt]
            out["indep_pairs"][p] += int(both.sum())
            for q, name in enumerate(INDEP_STATS):
                if name not in bins:
                    continue
                if name not in pits:   # (bin + 1/2) / B - 1/2, the same three operations in place
                    u = np.add(bins[name], 0.5, out=work_array(f"pits.{name}", n))
                    u /= B
                    u -= 0.5
                    pits[name] = u
                u = pits[name]
                if cnt == both.size and both.all():
                    out["indep_sums"][p, q] += float(np.dot(u[i0:i0 + cnt], u[j0:j0 + cnt]))
                else:
                    out["indep_sums"][p, q] += float(np.sum((u[i0:i0 + cnt] * u[j0:j0 + cnt])[both]))

    if sequence is not None:
        out["seq_pairs"][0] = int(sequence[0])
        out["seq_sums"][:] = sequence[1]

    keep = int(min(max(keep, 0), n))
    head = np.flatnonzero(valid[:keep])
    subsample = frame.take(head).standardise(np.asarray(states)[head]).reshape(-1, d)
    n_accepted = int(np.count_nonzero(accepted[vi]))
    out["violations"] = np.asarray(violations, dtype=np.int64).reshape(len(VIOLATION_KINDS)).copy()
    return ExactnessCounts(n, n_ok, n_accepted, out, subsample, tuple(messages))
