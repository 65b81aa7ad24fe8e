"""The chunk runner's reused buffers and the blocked frame give the values of fresh, unblocked arrays."""
from __future__ import annotations

import numpy as np
import pytest

from rass_theory.stats import node as N
from rass_theory.stats.node import SyntheticNode, unit_directions


@pytest.mark.parametrize("n, d", [(1, 3), (9, 8), (1001, 8), (4099, 5)])
def test_unit_directions_into_a_buffer_equal_fresh_ones(n, d):
    fresh = unit_directions(np.random.default_rng(3), n, d)
    buf = np.full((n, d), np.nan)
    into = unit_directions(np.random.default_rng(3), n, d, out=buf)
    assert into is buf and np.array_equal(fresh, into)
    assert np.allclose(np.linalg.norm(fresh, axis=1), 1.0)
    if n > 1:   # neighbours never share a pool vector
        assert not np.array_equal(np.abs(fresh[0]), np.abs(fresh[1]))


def test_node_draw_into_buffers_equals_a_fresh_draw():
    node = SyntheticNode.build(3, 1.0, 7, entropy=4, n_bins=256)
    n = 5000
    a = node.draw(np.random.default_rng(8), n)
    out = (np.full((n + 1, 7), np.nan), np.full((n, 7), np.nan))
    b = node.draw(np.random.default_rng(8), n, out=out)
    for x, y in ((a.mu_draft, b.mu_draft), (a.mu_target, b.mu_target), (a.sigma, b.sigma), (a.group, b.group)):
        assert np.array_equal(x, y)
    assert np.shares_memory(b.mu_draft, out[1]) and np.shares_memory(b.mu_target, out[0])


def test_blocked_frame_equals_the_row_formulas_including_coincident_means(monkeypatch):
    """Rows across several blocks, some with ``mu_target == mu_draft`` (the fallback direction):
    ``e``, ``delta`` and the anchor components ``ea = e @ anchors.T`` row by row."""
    monkeypatch.setattr(N, "FRAME_BLOCK_VALUES", 64)   # 256-row blocks (the floor) over 1,000 rows
    node = SyntheticNode.build(2, 1.0, 6, entropy=5, n_bins=256)
    rows = node.draw(np.random.default_rng(1), 1000)
    mt = rows.mu_target.copy()
    coincide = np.zeros(1000, bool)
    coincide[[0, 255, 256, 700, 999]] = True
    mt[coincide] = rows.mu_draft[coincide]
    fallback = np.random.default_rng(2).standard_normal((1000, 6))
    fallback /= np.linalg.norm(fallback, axis=1, keepdims=True)
    f = node.frame(rows.mu_draft, mt, rows.sigma, fallback)
    diff = mt - rows.mu_draft
    norm = np.sqrt(np.einsum("nd,nd->n", diff, diff))
    e = diff / np.where(norm == 0, 1.0, norm)[:, None]
    e[coincide] = fallback[coincide]
    assert np.array_equal(f.e, e)
    assert np.array_equal(f.delta, norm / rows.sigma)
    assert np.allclose(f.ea, (e @ node.anchors.T).T, rtol=0, atol=1e-15)
    assert np.all(f.delta[coincide] == 0)
