"""Two-sample tests of a whole speculative run against plain sampling, with stated power.

* :func:`energy_distance_test` -- energy distance with a permutation p-value (whole state; from
  :mod:`rass_theory.stats.two_sample`).
* :func:`occupancy_test` -- chi-square homogeneity of nearest-component occupancy.
* :func:`radial_test` -- KS test of the within-component radius.
* :func:`compare_to_plain` -- the three, on independent replicates, with a Bonferroni verdict.

Samples compared must come from independent random streams (different seeds); cells that share
streams are never pooled.  See ``proofs/P9-tree-exactness.md`` section 5.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from .._validation import as_generator, check_probability
from ..stats.two_sample import (
    BonferroniComparison,
    EnergyTestResult,
    TwoSampleResult,
    check_sample_pair,
    energy_distance_test,
)

__all__ = ["TwoSampleResult", "EnergyTestResult", "OccupancyTestResult", "RadialTestResult",
           "BonferroniComparison", "RunComparison", "check_sample_pair", "energy_distance_test",
           "occupancy_test", "radial_test", "compare_to_plain"]

_Z80 = stats.norm.ppf(0.8)


@dataclass(frozen=True)
class OccupancyTestResult(TwoSampleResult):
    """Chi-square homogeneity test of nearest-component occupancy (2 x C table).

    Attributes
    ----------
    statistic, pvalue : float
    counts : ndarray, shape (2, C)
    detectable_shift : float
        Smallest share ``Delta`` moved into any one component (taken proportionally from the
        others) that the test detects with 80% power at ``alpha`` (noncentral chi-square; the
        largest such ``Delta`` over components is reported, so every component is covered).
    """

    counts: np.ndarray
    detectable_shift: float
    name: str = "occupancy"


@dataclass(frozen=True)
class RadialTestResult(TwoSampleResult):
    """Two-sample KS test of the within-component radius ``||x - m_nearest|| / sqrt(d)``.

    Attributes
    ----------
    statistic, pvalue : float
    detectable_ks : float
        KS distance detected with about 80% power at ``alpha``:
        ``D_crit + z_{0.8} * 0.5 * sqrt(1/n + 1/m)`` (the empirical CDF difference at a fixed
        point has standard deviation at most ``0.5 sqrt(1/n + 1/m)``).
    """

    detectable_ks: float
    name: str = "radial"


@dataclass(frozen=True)
class RunComparison(BonferroniComparison):
    """The three tests; ``passed`` when the Bonferroni-combined p-value exceeds ``alpha``."""

    energy: EnergyTestResult
    occupancy: OccupancyTestResult
    radial: RadialTestResult
    alpha: float

    @property
    def tests(self):
        return (self.energy, self.occupancy, self.radial)


def occupancy_test(x, y, means, *, alpha: float = 0.05) -> OccupancyTestResult:
    """Chi-square test that two samples occupy the nearest-mean cells of ``means`` equally.

    Notes
    -----
    Pearson's chi-square on the ``2 x C`` table (empty columns dropped).  Detectable shift:
    with pooled shares ``p``, moving ``Delta`` into cell ``c`` gives the first group
    ``p + Delta (e_c - p_{-c}/(1 - p_c))``; the noncentrality is
    ``lambda = n_1 n_2 / (n_1 + n_2) * sum_c (p1_c - p2_c)^2 / pbar_c`` and the power
    ``P(chi2_{C-1}(lambda) > chi2_{C-1, 1-alpha})``.
    """
    x, y = check_sample_pair(x, y)
    means = np.asarray(means, dtype=np.float64)
    if means.ndim != 2 or means.shape[1] != x.shape[1]:
        raise ValueError(f"means must have shape (C, dim={x.shape[1]}), got {means.shape}")
    alpha = check_probability(alpha, "alpha")
    C = means.shape[0]
    msq = np.einsum("cd,cd->c", means, means)

    def cells(v):
        return np.argmin(msq[None, :] - 2 * v @ means.T, axis=1)

    counts = np.stack([np.bincount(cells(x), minlength=C), np.bincount(cells(y), minlength=C)])
    used = counts.sum(axis=0) > 0
    if used.sum() < 2:
        return OccupancyTestResult(0.0, 1.0, counts, float("nan"))
    table = counts[:, used]
    chi2, pvalue, dof, _ = stats.chi2_contingency(table, correction=False)
    n1, n2 = x.shape[0], y.shape[0]
    p = table.sum(axis=0) / table.sum()
    crit = stats.chi2.ppf(1 - alpha, dof)

    def power_gap(delta, c):
        others = p.copy()
        others[c] = 0.0
        p1 = p - delta * others / (1 - p[c])
        p1[c] = p[c] + delta
        pbar = (n1 * p1 + n2 * p) / (n1 + n2)
        lam = n1 * n2 / (n1 + n2) * np.sum((p1 - p) ** 2 / pbar)
        return stats.ncx2.sf(crit, dof, lam) - 0.8

    shifts = []
    for c in range(p.size):
        hi = 1 - p[c]
        if power_gap(hi, c) < 0:
            shifts.append(float("inf"))
        else:
            shifts.append(optimize.brentq(power_gap, 1e-12, hi, args=(c,), xtol=1e-8))
    return OccupancyTestResult(float(chi2), float(pvalue), counts, float(max(shifts)))


def radial_test(x, y, means, *, alpha: float = 0.05) -> RadialTestResult:
    """KS test on ``||x - m_nearest|| / sqrt(d)``: the within-component spread of the samples.

    The energy distance is dominated by between-component distances; this statistic looks at
    the scale inside components, where a wrong correction step shows first.
    """
    x, y = check_sample_pair(x, y)
    means = np.asarray(means, dtype=np.float64)
    if means.ndim != 2 or means.shape[1] != x.shape[1]:
        raise ValueError(f"means must have shape (C, dim={x.shape[1]}), got {means.shape}")
    alpha = check_probability(alpha, "alpha")
    msq = np.einsum("cd,cd->c", means, means)

    def radius(v):
        d2 = np.einsum("nd,nd->n", v, v)[:, None] - 2 * v @ means.T + msq[None, :]
        return np.sqrt(np.maximum(d2.min(axis=1), 0.0) / v.shape[1])

    res = stats.ks_2samp(radius(x), radius(y))
    n, m = x.shape[0], y.shape[0]
    crit = stats.kstwo.ppf(1 - alpha, round(n * m / (n + m))) if n * m / (n + m) >= 1 else 1.0
    detect = crit + _Z80 * 0.5 * np.sqrt(1 / n + 1 / m)
    return RadialTestResult(float(res.statistic), float(res.pvalue), float(detect))


def compare_to_plain(samples, reference, means, *, alpha: float = 0.01, n_permutations: int = 499,
                     rng=None, detectable: bool = True) -> RunComparison:
    """Test a run's final samples against an independent plain-sampling replicate.

    ``reference`` must come from a random stream independent of ``samples`` (another seed).
    Three tests (energy distance, occupancy, within-component radius), each at ``alpha / 3``
    for its stated detectable effect; the verdict is Bonferroni.
    """
    alpha = check_probability(alpha, "alpha")
    rng = as_generator(rng)
    a = alpha / 3
    energy = energy_distance_test(samples, reference, n_permutations=n_permutations, alpha=a, rng=rng,
                                  detectable=detectable)
    occ = occupancy_test(samples, reference, means, alpha=a)
    rad = radial_test(samples, reference, means, alpha=a)
    return RunComparison(energy, occ, rad, alpha)
