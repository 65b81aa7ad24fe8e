"""Shared fixtures of the optimisation tests."""
import numpy as np
import pytest
from scipy.special import ndtr


def _grid_bound(K, delta):
    """List-coupling bound ``min_t Phi(t - delta) + 1 - Phi(t)^K`` on a dense grid (independent of the solver)."""
    t = np.linspace(-8, delta + 8, 200001)
    return float(np.min(ndtr(t - delta) + 1 - ndtr(t) ** K))


@pytest.fixture
def grid_bound():
    """The dense-grid bound ``(K, delta) -> float``, a check independent of ``rt.acceptance_bound``."""
    return _grid_bound
