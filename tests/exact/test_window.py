"""The engine's truncation window holds its stated bound for every K (issue 14: the old constants
"K Phi(-11.5) < 1e-27 for K <= 4096" and "(K + 1) Phi(-10) < 1e-20" were false for large K)."""
import mpmath as mp
import numpy as np
import pytest

from rass_theory.exact import batch
from rass_theory.exact._window import HALF_WIDTH, K_MAX_DEFAULT, TAIL_BOUND, half_width, window


def _tail(K, L):
    """(K + 1) Phi(-L) in 30-digit arithmetic."""
    with mp.workdps(30):
        return (K + 1) * mp.ncdf(-mp.mpf(L))


@pytest.mark.parametrize("K", [1, 2, 64, 1311, 1312, 1515, 1516, 4096, 10**6])
def test_bound_holds_for_every_K(K):
    L = half_width(K)
    assert _tail(K, L) <= TAIL_BOUND * (1 + 1e-12)
    assert (L == HALF_WIDTH) == (K <= K_MAX_DEFAULT)


def test_default_range_is_tight():
    """11.5 suffices exactly up to K = 1515: one more child breaks the bound at L = 11.5."""
    assert _tail(K_MAX_DEFAULT, HALF_WIDTH) <= TAIL_BOUND < _tail(K_MAX_DEFAULT + 1, HALF_WIDTH)


def test_window_contains_the_top_order_statistic():
    lo, hi = window(4096, 0.5)
    assert lo == -half_width(4096) and hi == pytest.approx(np.sqrt(2 * np.log(4096)) + half_width(4096))


def test_rass_engine_widens_the_search_grid_beyond_the_default_range():
    w = np.full(2000, 1.0 / 2000)
    ri = batch.residual_intervals(w, np.array([1.0]))
    assert ri.grid_lo[0] == -half_width(2000) < -HALF_WIDTH


def test_invalid_K():
    with pytest.raises(ValueError, match="K must be an integer >= 1"):
        half_width(0)
