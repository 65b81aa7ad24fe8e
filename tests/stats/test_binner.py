"""The PIT binner (:class:`rass_theory.stats.node.EdgeBinner`) equals ``searchsorted(side="right")``."""
import numpy as np
import pytest

from rass_theory.stats.node import EdgeBinner, _edges


def _hard_values(edges, rng):
    """Every edge, its float64 neighbours, points at cell boundaries, far values and infinities."""
    e = np.asarray(edges)
    near = np.concatenate([e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf),
                           e + 1e-12, e - 1e-12, (e[1:] + e[:-1]) / 2])
    far = np.array([np.inf, -np.inf, 1e300, -1e300, 1e20, -1e20, 0.0, -0.0, e[0] - 1.0, e[-1] + 1.0])
    spread = rng.uniform(e[0] - 0.5, e[-1] + 0.5, 200_000)
    return np.concatenate([near, far, spread, rng.standard_normal(200_000)])


@pytest.mark.parametrize("n_bins,dim", [(256, 0), (4096, 0), (4096, 2), (4096, 8), (4096, 256), (16, 0)])
def test_equals_searchsorted(n_bins, dim):
    rng = np.random.default_rng(n_bins + dim)
    z, r = _edges(n_bins, max(dim, 1))
    edges = z if dim == 0 else np.sqrt(r)
    binner = EdgeBinner(edges)
    assert binner.table is not None
    x = _hard_values(edges, rng)
    assert np.array_equal(binner.bin(x), np.searchsorted(edges, x, side="right"))
    # shapes and the out= buffer
    X = rng.standard_normal((1000, 7)) * 2
    out = np.empty(X.shape, np.intp)
    res = binner.bin(X, out=out)
    assert res.shape == X.shape and np.array_equal(out, np.searchsorted(edges, X, side="right"))


def test_degenerate_edges_fall_back_to_searchsorted():
    for edges in (np.array([0.0]), np.array([0.0, 0.0, 1.0]), np.array([0.0, 1e-300, 1.0])):
        x = np.array([-1.0, 0.0, 1e-300, 0.5, 1.0, 2.0, np.inf])
        assert np.array_equal(EdgeBinner(edges).bin(x), np.searchsorted(edges, x, side="right"))
