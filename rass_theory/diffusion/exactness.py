"""Two-sample tests of a whole speculative run against plain sampling, with stated power.

* :func:`energy_distance_test` -- energy distance with a permutation p-value (whole state).
* :func:`occupancy_test` -- chi-square homogeneity of nearest-component occupancy.
* :func:`compare_to_plain` -- both, on independent replicates, with a Bonferroni verdict.

Samples compared must come from independent random streams (different seeds); cells that share
streams are never pooled.  See ``proofs/P9-tree-exactness.md`` section 5.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from .._validation import as_generator, check_positive_int, check_probability

__all__ = ["TwoSampleResult", "EnergyTestResult", "OccupancyTestResult", "RadialTestResult",
           "BonferroniComparison", "RunComparison", "check_sample_pair", "energy_distance_test",
           "occupancy_test", "radial_test", "compare_to_plain"]

_Z80 = stats.norm.ppf(0.8)


@dataclass(frozen=True)
class TwoSampleResult:
    """What every two-sample test result starts with: the ``statistic`` and its ``pvalue`` (floats)."""

    statistic: float
    pvalue: float


@dataclass(frozen=True)
class EnergyTestResult(TwoSampleResult):
    """Energy-distance permutation test.

    Attributes
    ----------
    statistic : float
        ``n m / (n + m) * E_n`` with the V-statistic energy distance ``E_n``.
    pvalue : float
        ``(k + 1) / (B + 1)``, ``k`` permuted statistics ``>=`` the observed one.
    n_permutations : int
    null_quantile : float
        ``(1 - alpha)`` quantile of the permutation null.
    detectable_mean_shift : float
        Euclidean norm of the smallest pure mean shift of one sample (random direction) that the
        test detects with 80% power at ``alpha``, estimated by shifting random splits of the
        pooled sample (20 splits, so about +-0.09 in power); ``nan`` when not requested.
    """

    n_permutations: int
    null_quantile: float
    detectable_mean_shift: float
    name: str = "energy"


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


class BonferroniComparison:
    """Several tests of one pair of samples, combined by Bonferroni.

    Subclasses are frozen dataclasses with an ``alpha`` field and a ``tests`` property (the
    results, each with a ``pvalue``).

    Notes
    -----
    With ``T`` tests, ``pvalue = min(1, T min_t p_t)``; ``passed`` when it exceeds ``alpha``.
    """

    @property
    def pvalue(self) -> float:
        """Bonferroni-combined p-value ``min(1, T min_t p_t)``."""
        return float(min(1.0, len(self.tests) * min(t.pvalue for t in self.tests)))

    @property
    def passed(self) -> bool:
        return self.pvalue > self.alpha


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


def check_sample_pair(x, y, *, min_rows: int = 2):
    """Two samples as float64 arrays of shapes ``(n, dim)`` and ``(m, dim)``.

    Raises ``ValueError`` unless both are 2-d with the same ``dim``, finite, and have at least
    ``min_rows`` rows each.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError(f"samples must be 2-d arrays (n, dim), got shapes {x.shape} and {y.shape}")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"samples must have the same dim (the same number of columns), got {x.shape[1]} "
                         f"and {y.shape[1]}")
    if x.shape[0] < min_rows or y.shape[0] < min_rows:
        raise ValueError(f"each sample needs at least {min_rows} rows, got {x.shape[0]} and {y.shape[0]}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("samples must be finite")
    return x, y


def _pairwise(z):
    sq = np.einsum("nd,nd->n", z, z)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (z @ z.T)
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2, out=d2)


def energy_distance_test(x, y, *, n_permutations: int = 499, alpha: float = 0.05, rng=None,
                         batch: int = 100, detectable: bool = True) -> EnergyTestResult:
    """Energy-distance two-sample test with a permutation p-value.

    Parameters
    ----------
    x, y : array_like, shapes (n, d) and (m, d)
    n_permutations : int
    alpha : float
        Level at which the detectable effect is stated.
    rng : seed or Generator (permutations only)
    batch : int
        Permutations evaluated per matrix product.
    detectable : bool
        Estimate the detectable mean shift (costs about 500 cross-block evaluations).

    Notes
    -----
    ``E_n = 2/(nm) sum_{ij} |x_i - y_j| - 1/n^2 sum |x_i - x_j| - 1/m^2 sum |y_i - y_j|``
    (Szekely & Rizzo).  With ``D`` the pooled distance matrix, row sums ``r`` and the indicator
    ``a`` of the first sample, ``S_xx = a^T D a``, ``S_xy = a^T r - S_xx`` and
    ``S_yy = 1^T r - S_xx - 2 S_xy``, so a batch of permutations costs one product ``D A``.
    """
    x, y = check_sample_pair(x, y)
    n_permutations = check_positive_int(n_permutations, "n_permutations")
    alpha = check_probability(alpha, "alpha")
    rng = as_generator(rng)
    n, m = x.shape[0], y.shape[0]
    N = n + m
    z = np.vstack([x, y])
    D = _pairwise(z)
    r = D.sum(axis=1)
    total = r.sum()
    scale = n * m / N

    def stat(A):                                  # A: (N, B) 0/1 indicators of the first sample
        sxx = np.einsum("nb,nb->b", A, D @ A)
        sxy = r @ A - sxx
        syy = total - sxx - 2 * sxy
        return scale * (2 * sxy / (n * m) - sxx / n ** 2 - syy / m ** 2)

    a0 = np.zeros((N, 1))
    a0[:n] = 1.0
    observed = float(stat(a0)[0])
    null = []
    for lo in range(0, n_permutations, batch):
        b = min(batch, n_permutations - lo)
        A = np.zeros((N, b))
        idx = np.argsort(rng.random((b, N)), axis=1)[:, :n]
        A[idx, np.arange(b)[:, None]] = 1.0
        null.append(stat(A))
    null = np.concatenate(null)
    pvalue = (np.count_nonzero(null >= observed) + 1) / (n_permutations + 1)
    q = float(np.quantile(null, 1 - alpha))
    shift = _shift_for_power(z, D, n, q, rng) if detectable else float("nan")
    return EnergyTestResult(observed, float(pvalue), n_permutations, q, float(shift))


def _shift_for_power(z, D, n, q, rng, *, power: float = 0.8, n_splits: int = 20) -> float:
    """Smallest mean shift ``m`` (random direction) detected with probability ``power``.

    The pooled sample is split at random into groups of the original sizes (a draw from the
    permutation null); the first group is shifted by ``m u`` and the statistic compared with
    the null quantile ``q``.  Cross distances after the shift are
    ``sqrt(D_ij^2 + 2 m (p_i - p_j) + m^2)`` with ``p = z u``, so no new distance matrix is needed.
    The same splits serve every ``m`` (common random numbers); ``m`` is found by bisection to
    1% relative precision.
    """
    N, d = z.shape
    m_ = N - n
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    proj = z @ u
    splits = []
    for _ in range(n_splits):
        perm = rng.permutation(N)
        a, b = np.sort(perm[:n]), np.sort(perm[n:])
        splits.append((a, b, D[np.ix_(a, a)].sum(), D[np.ix_(b, b)].sum()))
    scale = n * m_ / N

    def achieved(shift):
        hits = 0
        for a, b, sxx, syy in splits:
            block = D[np.ix_(a, b)]
            block *= block
            block += 2 * shift * (proj[a][:, None] - proj[b][None, :]) + shift * shift
            np.maximum(block, 0.0, out=block)
            sxy = np.sqrt(block, out=block).sum()
            hits += scale * (2 * sxy / (n * m_) - sxx / n ** 2 - syy / m_ ** 2) > q
        return hits / n_splits

    lo, hi = 0.0, 0.05 * float(np.sqrt(np.mean(D ** 2)))
    while achieved(hi) < power:
        lo, hi = hi, 2 * hi
        if hi > 1e6:
            return float("inf")
    while hi - lo > 0.01 * hi:
        mid = 0.5 * (lo + hi)
        if achieved(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


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
