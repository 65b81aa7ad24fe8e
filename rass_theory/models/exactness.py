"""Two-sample tests for whole runs on learned models: speculative vs plain samples, same kernel.

Three tests with stated power, combined by Bonferroni in :func:`compare_samples`: energy distance
(permutation p-value, detectable mean shift at 80 % power), a classifier two-sample test (C2ST) and
per-coordinate (per-pixel) Kolmogorov--Smirnov tests.  None of them needs a model, so they live in
:mod:`rass_theory.stats.two_sample`; this module keeps their names where the learned-model runs
(``bench/digits_exactness.py``) look for them.
"""
from __future__ import annotations

from ..stats.two_sample import (
    C2STResult,
    MarginalTestResult,
    SampleComparison,
    classifier_two_sample_test,
    compare_samples,
    marginal_ks_test,
)

__all__ = ["C2STResult", "MarginalTestResult", "SampleComparison", "classifier_two_sample_test",
           "marginal_ks_test", "compare_samples"]
