"""Two-sample tests of two samples of states, with stated power; no model or sampler needed.

* :func:`check_sample_pair` -- the shared input check (2-d, same ``dim``, finite, enough rows).
* :func:`energy_distance_test` -- energy distance with a permutation p-value (whole state).
* :func:`classifier_two_sample_test` -- a classifier two-sample test (C2ST): a logistic regression
  trained on half of the pooled sample, its held-out accuracy tested against 1/2 (exact binomial).
* :func:`marginal_ks_test` -- per-coordinate (per-pixel) two-sample Kolmogorov--Smirnov tests,
  Bonferroni over coordinates.
* :func:`compare_samples` -- the three, each at ``alpha / 3``, with a Bonferroni verdict
  (:class:`BonferroniComparison`).

Samples compared must come from independent random streams (different seeds).  Only
NumPy/scipy/scikit-learn (scikit-learn imported inside the C2ST): no torch.  The diffusion runs
(:mod:`rass_theory.diffusion.exactness`) and the learned models (:mod:`rass_theory.models.exactness`)
use these; see ``proofs/P9-tree-exactness.md`` section 5.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import as_generator, check_positive_int, check_probability

__all__ = ["TwoSampleResult", "EnergyTestResult", "C2STResult", "MarginalTestResult", "BonferroniComparison",
           "SampleComparison", "check_sample_pair", "energy_distance_test", "classifier_two_sample_test",
           "marginal_ks_test", "compare_samples"]

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

    spread = float(np.sqrt(np.mean(D ** 2)))
    if spread == 0.0:                # one point repeated: every shift m > 0 gives a statistic > q = 0
        return 0.0
    lo, hi = 0.0, 0.05 * spread
    while achieved(hi) < power:
        lo, hi = hi, 2 * hi
        if hi > 1e6 * spread:          # relative to the data's scale (an absolute 1e6 was reached at once by data of scale 1e7)
            return float("inf")
    while hi - lo > 0.01 * hi:
        mid = 0.5 * (lo + hi)
        if achieved(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


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
