"""Speculative diffusion on a Gaussian-mixture target (proof ``proofs/P9-tree-exactness.md``).

Public names: :class:`GaussianMixture`, :func:`speculative_sample`, :func:`plain_sample`,
:class:`ChurnSchedule`, :class:`TreeShape`, :func:`matched_chain`, :func:`compare_to_plain`,
:func:`predict_speedup`, :class:`DeltaTrace`, :func:`expected_calls`; the plain kernel as an
object (:func:`plain_kernel`) and step-by-step checks of whole samplers
(:func:`check_trajectories`, :func:`check_sampler`, :mod:`.sampler_mutants`).

>>> from rass_theory import diffusion
>>> tgt = diffusion.GaussianMixture.random(dim=8, n_components=3, seed=0)
>>> run = diffusion.speculative_sample(tgt, "rmc", K=1, L=3, n_samples=50, n_steps=30, churn=0.06, rng=0)
>>> run.samples.shape, run.n_standard_steps
((50, 8), 28)
"""
from __future__ import annotations

from .check import TrajectoryCheckResult, TrajectoryTest, check_sampler, check_trajectories
from .exactness import (
    RunComparison,
    compare_to_plain,
    energy_distance_test,
    occupancy_test,
    radial_test,
)
from .kernel import PlainKernel, plain_kernel
from .mixture import GaussianMixture
from .plain import plain_sample
from .results import DRIFT_SOURCES, NodeRecord, RoundRecord, SpeculativeResult
from .schedule import PROTOCOLS, ChurnSchedule
from .speculative import PREFETCH_MODES, speculative_sample
from .trajectories import PlainSampleResult
from .theory import SpeedupPrediction, acceptance_curve, expected_calls, predict_speedup
from .traces import DeltaTrace
from .trees import BUDGETS, TreeShape, matched_chain

__all__ = [
    "BUDGETS",
    "DRIFT_SOURCES",
    "PREFETCH_MODES",
    "PROTOCOLS",
    "ChurnSchedule",
    "DeltaTrace",
    "GaussianMixture",
    "NodeRecord",
    "PlainKernel",
    "PlainSampleResult",
    "RoundRecord",
    "RunComparison",
    "SpeculativeResult",
    "SpeedupPrediction",
    "TrajectoryCheckResult",
    "TrajectoryTest",
    "TreeShape",
    "acceptance_curve",
    "check_sampler",
    "check_trajectories",
    "compare_to_plain",
    "energy_distance_test",
    "expected_calls",
    "matched_chain",
    "occupancy_test",
    "plain_kernel",
    "plain_sample",
    "predict_speedup",
    "radial_test",
    "speculative_sample",
]
