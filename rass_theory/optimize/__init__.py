"""Optimal rank weights (convex program, certified) and value-aware selection policies.

Public entry points: :func:`optimal_rank_weights`, :func:`optimal_weights_table`,
:func:`optimal_weights_interpolator` and the :mod:`~rass_theory.optimize.policies` module.
"""
from . import policies
from .rank_weights import (
    OptimalWeightsInterpolator,
    OptimalWeightsResult,
    OptimalWeightsTable,
    optimal_rank_weights,
    optimal_weights_interpolator,
    optimal_weights_table,
)

__all__ = [
    "policies",
    "OptimalWeightsInterpolator",
    "OptimalWeightsResult",
    "OptimalWeightsTable",
    "optimal_rank_weights",
    "optimal_weights_interpolator",
    "optimal_weights_table",
]

