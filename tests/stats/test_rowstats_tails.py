"""The far-tail counts of ``counts_from_rows`` equal the direct count of every tail (:data:`TAILS`).

The row statistics here are drawn three times too wide, so that thousands of rows lie beyond 4 and
5 sd and every tail count is far from zero; invalid rows and large-delta rows are mixed in.
"""
from __future__ import annotations

import numpy as np

from rass_theory.stats.chunks import draw_chunk, fallback_directions
from rass_theory.stats.node import SyntheticNode, chunk_plan
from rass_theory.stats.rowstats import _r_tail_edges, counts_from_rows
from rass_theory.stats.streaming import LARGE_DELTA, TAILS, VIOLATION_KINDS


def test_tail_counts_equal_direct_counts():
    node = SyntheticNode.build(3, 1.0, 8, entropy=5)
    spec = chunk_plan(20_000, 20_000, 5, 0)[0]
    rows, _ = draw_chunk(node, spec)
    frame = node.frame(rows.mu_draft, rows.mu_target, rows.sigma, fallback_directions(rows, node))
    g = np.random.default_rng(20261202)
    y = 3.0 * g.standard_normal((spec.n, node.dim))
    states = rows.mu_target + rows.sigma[:, None] * y
    valid = g.random(spec.n) > 0.1
    c = counts_from_rows(node, frame, states, valid, np.ones(spec.n, bool), rows.group,
                         np.zeros(len(VIOLATION_KINDS), np.int64))
    ys = frame.standardise(states)[valid]
    t = np.einsum("nd,nd->n", ys, frame.e[valid])
    r = np.einsum("nd,nd->n", ys, ys) - t * t
    dirs, diag = frame.take(np.flatnonzero(valid)).directions(ys, t)
    large = np.asarray(node.deltas)[rows.group[valid]] >= LARGE_DELTA
    values = {"t": t, "r": r, "dir0": dirs[0], "diag": diag}
    edges = dict(zip((4.0, 5.0), _r_tail_edges(node.dim)))
    for k, (name, stat, side, thr) in enumerate(TAILS):
        x = values[stat]
        beyond = x > edges[thr] if stat == "r" else (np.abs(x) > thr if side == 0 else side * x > thr)
        assert beyond.sum() > 50, name
        assert tuple(c.tail_counts[k]) == (beyond.sum(), (beyond & large).sum()), name
    assert tuple(c.tail_rows) == (valid.sum(), large.sum())
