"""Two-sample tests for whole runs on learned models: speculative vs plain samples, same kernel.

Three tests with stated power, combined by Bonferroni in :func:`compare_samples`:

* energy distance (permutation p-value; detectable mean shift at 80 % power estimated by
  :func:`rass_theory.diffusion.energy_distance_test`);
* a classifier two-sample test (C2ST): a logistic regression on quadratic-free features trained on
  half of the pooled sample, its held-out accuracy tested against 1/2 (exact binomial);
* per-coordinate (per-pixel) two-sample Kolmogorov--Smirnov tests, Bonferroni over coordinates.

Only NumPy/scipy/scikit-learn: no torch needed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import as_generator, check_probability
from ..diffusion.exactness import BonferroniComparison, TwoSampleResult, check_sample_pair, energy_distance_test

__all__ = ["C2STResult", "MarginalTestResult", "SampleComparison", "classifier_two_sample_test",
           "marginal_ks_test", "compare_samples"]

_Z80 = stats.norm.ppf(0.8)


@dataclass(frozen=True)
class C2STResult(TwoSampleResult):
    """Classifier two-sample test.

    Attributes
    ----------
    statistic : float
        Held-out accuracy of the classifier (1/2 under the null).
    pvalue : float
        One-sided exact binomial p-value of ``n_test * accuracy`` correct out of ``n_test``.
    n_test : int
    detectable_accuracy : float
        True accuracy the test detects with 80 % power at ``alpha`` (normal approximation):
        ``1/2 + (z_{1-alpha} / 2 + z_{0.8} sqrt(a (1 - a))) / sqrt(n_test)`` solved for ``a``.
    name : str
    """

    n_test: int
    detectable_accuracy: float
    name: str = "c2st"


@dataclass(frozen=True)
class MarginalTestResult(TwoSampleResult):
    """Per-coordinate two-sample KS tests, Bonferroni over coordinates.

    Attributes
    ----------
    statistic : float
        Largest KS distance over coordinates.
    pvalue : float
        ``min(1, d * min_j p_j)``.
    worst : int
        Coordinate of the smallest p-value.
    detectable_ks : float
        A KS distance (in any one coordinate) the test detects with probability ``>= 0.8`` at
        ``alpha``: ``c + r(n, 0.1) + r(m, 0.1)`` with ``c = sqrt(log(2 d / alpha)(n + m) / (2 n m))``
        (Massart's bound on the two-sample Kolmogorov tail) and the DKW--Massart radii
        ``r(n, b) = sqrt(log(2 / b) / (2 n))``; distribution-free, hence conservative.
    name : str
    """

    worst: int
    detectable_ks: float
    name: str = "marginal_ks"


def classifier_two_sample_test(x, y, *, alpha: float = 0.05, rng=None) -> C2STResult:
    """C2ST with a logistic regression (Lopez-Paz & Oquab 2017).

    Balanced halves: ``min(n, m)`` rows of each sample, shuffled, split 50/50 into train and test.
    Features are the coordinates standardised on the training half.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x, y = check_sample_pair(x, y, min_rows=10)
    alpha = check_probability(alpha, "alpha")
    rng = as_generator(rng)
    n = min(x.shape[0], y.shape[0])
    xa = x[rng.permutation(x.shape[0])[:n]]
    ya = y[rng.permutation(y.shape[0])[:n]]
    z = np.vstack([xa, ya])
    lab = np.r_[np.zeros(n), np.ones(n)]
    perm = rng.permutation(2 * n)
    tr, te = perm[: n], perm[n:]
    scaler = StandardScaler().fit(z[tr])
    clf = LogisticRegression(max_iter=2000, C=1.0).fit(scaler.transform(z[tr]), lab[tr])
    correct = int((clf.predict(scaler.transform(z[te])) == lab[te]).sum())
    n_te = te.size
    p = float(stats.binomtest(correct, n_te, 0.5, alternative="greater").pvalue)
    za = stats.norm.ppf(1 - alpha)
    lo, hi = 0.5, 1.0
    for _ in range(60):                               # solve the power equation for a
        a = 0.5 * (lo + hi)
        if (a - 0.5) * math.sqrt(n_te) >= 0.5 * za + _Z80 * math.sqrt(a * (1 - a)):
            hi = a
        else:
            lo = a
    return C2STResult(correct / n_te, p, n_te, hi)


def marginal_ks_test(x, y, *, alpha: float = 0.05) -> MarginalTestResult:
    """Per-coordinate two-sample KS tests (per pixel for images), Bonferroni over coordinates."""
    x, y = check_sample_pair(x, y, min_rows=10)
    alpha = check_probability(alpha, "alpha")
    d = x.shape[1]
    res = [stats.ks_2samp(x[:, j], y[:, j]) for j in range(d)]
    pv = np.array([r.pvalue for r in res])
    n, m = x.shape[0], y.shape[0]
    c = math.sqrt(math.log(2 * d / alpha) * (n + m) / (2 * n * m))
    det = c + math.sqrt(math.log(2 / 0.1) / (2 * n)) + math.sqrt(math.log(2 / 0.1) / (2 * m))
    return MarginalTestResult(float(max(r.statistic for r in res)), float(min(1.0, d * pv.min())),
                              int(np.argmin(pv)), det)


@dataclass(frozen=True)
class SampleComparison(BonferroniComparison):
    """Energy, C2ST and marginal KS tests of one pair of samples; ``passed`` by Bonferroni at ``alpha``."""

    energy: object
    c2st: C2STResult
    marginal: MarginalTestResult
    alpha: float

    @property
    def tests(self):
        return (self.energy, self.c2st, self.marginal)


def compare_samples(x, y, *, alpha: float = 0.01, n_permutations: int = 499, rng=None,
                    detectable: bool = True) -> SampleComparison:
    """Run the three tests, each at ``alpha / 3`` for its stated detectable effect.

    ``x`` and ``y`` must come from independent random streams (e.g. a speculative run and a plain
    run with different seeds).
    """
    x, y = check_sample_pair(x, y, min_rows=10)
    alpha = check_probability(alpha, "alpha")
    rng = as_generator(rng)
    a = alpha / 3
    energy = energy_distance_test(x, y, n_permutations=n_permutations, alpha=a, rng=rng, detectable=detectable)
    return SampleComparison(energy, classifier_two_sample_test(x, y, alpha=a, rng=rng),
                            marginal_ks_test(x, y, alpha=a), alpha)
