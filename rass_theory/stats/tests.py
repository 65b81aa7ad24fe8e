"""Hypothesis tests on the harness's mergeable statistics.

* :func:`binned_ks_test` -- Kolmogorov-Smirnov distance of a PIT histogram at its bin edges.
* :func:`binned_chisquare_test` -- Pearson chi-square of a PIT histogram (coarse or fine bins).
* :func:`joint_chisquare_test` -- Pearson chi-square of the joint (s, ||z_perp||^2) histogram
  against the product of uniforms (marginals *and* independence).
* :func:`binomial_test` / :func:`clopper_pearson` -- exact tests on the acceptance count.
* :func:`energy_test` -- two-sample energy distance with a permutation p-value.
* :func:`holm` -- family-wise combination (statsmodels ``multipletests``, Holm).

All p-values are valid (super-uniform under the null); the binned KS p-value is conservative, see
:func:`binned_ks_test`.
"""
from __future__ import annotations

import gc
import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from .._validation import check_positive_int, check_probability
from .binomial import binomial_pvalue, binomial_sf

__all__ = ["TestStatistic", "binned_ks_test", "binned_chisquare_test", "joint_chisquare_test",
           "binomial_test", "clopper_pearson", "energy_test", "holm", "coarse_counts", "studentised_form_test",
           "chi2_sf"]


@dataclass(frozen=True)
class TestStatistic:
    """A statistic and its p-value (before any multiplicity correction)."""

    __test__ = False  # not a pytest test class

    statistic: float
    pvalue: float
    detail: str = ""


def binned_ks_test(counts) -> TestStatistic:
    """Kolmogorov-Smirnov test of a histogram of PIT values in equiprobable bins.

    Parameters
    ----------
    counts : array of int (B,)
        ``counts[b]`` = number of values whose PIT lies in ``[b/B, (b+1)/B)``.

    Returns
    -------
    TestStatistic
        ``statistic`` is ``D_B = max_j |F_n(j/B) - j/B|`` over the interior edges, ``pvalue`` is
        ``P(D_n >= D_B)`` under the exact finite-``n`` Kolmogorov law of the continuous
        statistic (:func:`kolmogorov_sf`).

    Notes
    -----
    The continuous KS statistic is ``D_n = sup_u |F_n(u) - u|``.  ``D_B`` is the same supremum over
    a subset of points (the bin edges), so ``D_B <= D_n`` for every sample and
    ``P(D_n >= t) >= P(D_B >= t)``: the p-value is *conservative* (valid, slightly too large) and
    needs no correction for binning.  The conservatism shrinks with ``B``: the grid maximum of a
    Brownian bridge falls short of its supremum by about ``0.58 / sqrt(B)`` (Broadie, Glasserman
    and Kou's continuity correction), 0.009 at ``B = 4096`` against a typical ``sqrt(n) D_n`` of
    0.9, so at ``B = 4096`` the test's actual size is within a few percent of its nominal level.
    An exact multinomial null was rejected: its tail at the 1e-5 levels a Holm family needs is out
    of reach of Monte Carlo and of the O(n^2 B) recursions at n = 1e6.
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        return TestStatistic(float("nan"), float("nan"), "no samples")
    B = counts.size
    ecdf = np.cumsum(counts[:-1]) / n
    grid = np.arange(1, B) / B
    D = float(np.max(np.abs(ecdf - grid))) if B > 1 else 0.0
    p = kolmogorov_sf(D, n)
    return TestStatistic(D, min(max(p, 0.0), 1.0), f"D={D:.3g} at n={n}, {B} bins")


def chi2_sf(x: float, df) -> float:
    """``scipy.stats.chi2.sf(x, df)``, the same float, at the cost of one ufunc call (``special.chdtrc``).

    ``chi2.sf`` is ``chdtrc(df, x)`` inside the support; outside it, 1 for ``x <= 0``, 0 for
    ``x = inf`` and NaN for NaN, as here.  A test evaluates some 25 chi-square tails per look,
    and the distribution object's argument handling costs 40x the tail itself.
    """
    x = float(x)
    if not df > 0 or math.isnan(x):
        return float(stats.chi2.sf(x, df))
    if x <= 0:
        return 1.0
    return 0.0 if math.isinf(x) else float(special.chdtrc(df, x))


#: Above this sample size the limiting Kolmogorov law replaces the exact finite-n one.
EXACT_KS_MAX_N = 10_000


def kolmogorov_sf(D: float, n: int) -> float:
    """``P(D_n >= D)`` for the continuous one-sample KS statistic (valid, possibly conservative).

    Exact finite-``n`` law (``scipy.stats.kstwo``) for ``n <= 10^4``; above, the limiting
    Kolmogorov law of ``sqrt(n) D_n`` (``scipy.stats.kstwobign``).  That branch is not claimed
    conservative: ``proofs/S1-harness-power.md`` S1.1(c) proves, through Massart's inequality
    ``P(D_n >= t) <= 2 exp(-2 n t^2)``, that it is valid up to a factor ``1 + 1.6e-5`` at every
    level ``<= 0.05`` (the only levels Holm uses at the harness's ``alpha``).
    """
    if not D > 0:
        return 1.0
    if n <= EXACT_KS_MAX_N:
        p = float(stats.kstwo.sf(D, n))
    else:
        p = float(special.kolmogorov(D * np.sqrt(n)))   # = stats.kstwobign.sf (its _sf), without the overhead
    return min(max(p, 0.0), 1.0)


def coarse_counts(counts, n_coarse: int):
    """Merge ``B`` equiprobable fine bins into ``n_coarse`` contiguous groups.

    Returns ``(coarse, probs)``: summed counts and the exact null probability of each group
    (its number of fine bins over ``B``).
    """
    counts = np.asarray(counts, dtype=np.int64)
    B = counts.size
    n_coarse = int(min(max(n_coarse, 1), B))
    bounds = np.round(np.linspace(0, B, n_coarse + 1)).astype(np.int64)
    coarse = np.add.reduceat(counts, bounds[:-1])
    probs = np.diff(bounds) / B
    return coarse, probs


#: Smallest sample at which each asymptotic chi-square test runs: its simulated false-reject rate is
#: within 1.5x of nominal at levels 1e-2 and 1e-3 from there on (``bench/results/harness_finite_n.md``,
#: ``bench/harness_finite_n.py``; coarse bins from 50, fine bins from 200, the 8 x 8 joint from 160,
#: row pairs from 25, gated more conservatively at :data:`MIN_CLT_ROWS`).
MIN_FINE_ROWS = 200
MIN_JOINT_ROWS = 160


def binned_chisquare_test(counts, n_coarse: int = 32, min_expected: float = 10, min_rows: int = 0) -> TestStatistic:
    """Pearson chi-square test of a PIT histogram after merging into ``n_coarse`` bins.

    Notes
    -----
    ``X^2 = sum_c (O_c - n p_c)^2 / (n p_c)`` with ``C - 1`` degrees of freedom; ``p_c`` is exact
    (a fraction of the equiprobable fine bins).  ``C`` is reduced to ``n // min_expected`` when the
    sample is small so every expected count is at least ``min_expected``, where the chi-square law
    is accurate (with thousands of degrees of freedom 5 suffices: the statistic is a sum of many
    nearly independent terms).  With ``n_coarse`` equal to the number of fine bins the test sees
    structure at the finest scale, e.g. the atoms of a low-precision lattice, that KS and coarse
    bins average away.
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        return TestStatistic(float("nan"), float("nan"), "no samples")
    if n < min_rows:
        return TestStatistic(float("nan"), float("nan"), f"fewer than {min_rows} samples: chi-square law not reached")
    C = int(min(n_coarse, max(2, int(n // min_expected)), counts.size))
    obs, probs = coarse_counts(counts, C)
    expected = n * probs
    stat = float(np.sum((obs - expected) ** 2 / expected))
    p = chi2_sf(stat, C - 1)
    return TestStatistic(stat, p, f"chi2={stat:.4g} on {C - 1} df")


def joint_chisquare_test(joint_counts, n_bins: int) -> TestStatistic:
    """Pearson chi-square of the joint ``(s, r)`` histogram against independent uniform PITs.

    ``joint_counts[a, b]`` counts rows with ``s_bin * J // n_bins == a`` and
    ``r_bin * J // n_bins == b``; under the null the cell probability is ``p_a p_b`` with
    ``p_a = #{fine bins b : b * J // n_bins == a} / n_bins``.  ``J^2 - 1`` degrees of freedom.
    """
    joint = np.asarray(joint_counts, dtype=np.int64)
    n = int(joint.sum())
    J = joint.shape[0]
    if n == 0:
        return TestStatistic(float("nan"), float("nan"), "no samples")
    if n < MIN_JOINT_ROWS * (J * J) // 64:
        return TestStatistic(float("nan"), float("nan"), f"fewer than {MIN_JOINT_ROWS} samples per 64 cells: "
                                                         f"chi-square law not reached")
    marg = np.bincount(np.arange(n_bins) * J // n_bins, minlength=J) / n_bins
    expected = n * np.outer(marg, marg)
    stat = float(np.sum((joint - expected) ** 2 / expected))
    df = J * J - 1
    return TestStatistic(stat, chi2_sf(stat, df), f"chi2={stat:.4g} on {df} df, {J}x{J} cells")


def binomial_test(k: int, n: int, p: float) -> TestStatistic:
    """Exact two-sided binomial test of ``k`` successes in ``n`` trials against ``p``.

    The statistic is the observed rate ``k / n``; the p-value is scipy's ``binomtest`` (the sum of
    the probabilities of outcomes no more likely than ``k``), computed without its per-call overhead
    by :func:`rass_theory.stats.binomial.binomial_pvalue` (the same float).
    """
    if n == 0:
        return TestStatistic(float("nan"), float("nan"), "no samples")
    return TestStatistic(k / n, binomial_pvalue(k, n, p), f"{k}/{n} accepted, exact {p:.6g}")


def clopper_pearson(k: int, n: int, level: float = 0.999):
    """Exact (Clopper-Pearson) two-sided confidence interval for a binomial proportion ``k / n``.

    Parameters
    ----------
    k, n : int
        Successes and trials, ``0 <= k <= n``.
    level : float
        Confidence level in ``(0, 1)``.

    Returns
    -------
    tuple of float
        ``(low, high)``; ``(0, 1)`` when ``n = 0``.

    Notes
    -----
    ``[B(a/2; k, n - k + 1), B(1 - a/2; k + 1, n - k)]`` with ``B`` the beta quantile and
    ``a = 1 - level``; the ends are 0 and 1 when ``k = 0`` and ``k = n``.
    """
    n = check_positive_int(n, "n", minimum=0)
    k = check_positive_int(k, "k", minimum=0, maximum=n)
    a = 1.0 - check_probability(level, "level")
    if n == 0:
        return (0.0, 1.0)
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return (lo, hi)


def _pairwise_distances(pooled: np.ndarray) -> np.ndarray:
    sq = np.einsum("nd,nd->n", pooled, pooled)
    d2 = sq[:, None] + sq[None, :] - 2.0 * pooled @ pooled.T
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2)


def energy_test(x, y, n_permutations: int = 9999, rng=None, *, stop_after: int | None = 20,
                batch: int = 256) -> TestStatistic:
    """Two-sample energy-distance test with a (sequential) permutation p-value.

    Parameters
    ----------
    x, y : ndarray (m, d) and (m', d)
    n_permutations : int
        Largest number of permutations.
    rng : numpy Generator or seed (the permutations' stream)
    stop_after : int or None, default 20
        Besag-Clifford stopping: stop at the ``h``-th permutation whose statistic reaches the
        observed one; ``None`` always runs all ``n_permutations``.

    Notes
    -----
    ``E = 2 mean ||X - Y|| - mean ||X - X'|| - mean ||Y - Y'||`` (V-statistic; Szekely and Rizzo
    2004), zero iff the laws agree.  With the pooled distance matrix ``D`` (size ``N``), label
    vector ``a`` (1 for the first sample, ``m`` ones), row sums ``r = D 1`` and ``T = 1' D 1``,
    ``E(a) = (2/(m m')) (a'r - a'Da) - a'Da/m^2 - (T - 2a'r + a'Da)/m'^2``, so a batch of
    permutations costs one matrix product (float32; the observed labelling goes through the same
    arithmetic so exchangeability is kept).

    p-value: if the ``h``-th exceedance (``E(a_perm) >= E(a_obs)``) happens at permutation ``L``,
    ``p = h / L`` (Besag and Clifford 1991, *Biometrika* 78, 301-304: a valid p-value for the
    sequential procedure); otherwise ``p = (1 + k) / (n_permutations + 1)`` with ``k < h``
    exceedances.  Under the null the run stops after about ``h / p`` permutations, so only an
    extreme statistic pays for the full ``n_permutations`` needed to reach small p-values.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    m1, m2 = x.shape[0], y.shape[0]
    if m1 < 2 or m2 < 2:
        return TestStatistic(float("nan"), float("nan"), "fewer than 2 states per sample")
    rng = np.random.default_rng(rng)
    pooled = np.concatenate([x, y])
    N = m1 + m2
    D = _pairwise_distances(pooled)
    r = D.sum(axis=1)
    T = r.sum()
    D32 = D.astype(np.float32)

    def stat_of(At, Dm):  # At: (P, N) 0/1 labels, m1 ones per row
        quad = np.einsum("pn,pn->p", At, At @ Dm, dtype=np.float64)
        ar = At @ r
        return 2.0 * (ar - quad) / (m1 * m2) - quad / m1**2 - (T - 2.0 * ar + quad) / m2**2

    a0 = np.zeros((2, N))
    a0[:, :m1] = 1.0
    observed = float(stat_of(a0, D)[0])
    obs32 = float(stat_of(a0.astype(np.float32), D32)[0])
    exceed, done = 0, 0
    h = None if stop_after is None else int(stop_after)
    while done < n_permutations:
        P = min(batch, n_permutations - done)
        keys = rng.random((P, N))  # the m1 smallest keys of each row: a uniform m1-subset
        kth = np.partition(keys, m1 - 1, axis=1)[:, m1 - 1:m1]
        At = (keys <= kth).astype(np.float32)
        hits = stat_of(At, D32) >= obs32
        if h is not None and exceed + int(hits.sum()) >= h:
            L = done + int(np.flatnonzero(hits)[h - exceed - 1]) + 1
            p = h / L
            return TestStatistic(observed, p, f"energy={observed:.4g}, m={m1}+{m2}, stopped at "
                                 f"{h} exceedances in {L} permutations (Besag-Clifford)")
        exceed += int(hits.sum())
        done += P
        batch = min(4 * batch, 4096)
    p = (1 + exceed) / (n_permutations + 1)
    return TestStatistic(observed, p, f"energy={observed:.4g}, m={m1}+{m2}, {exceed} of "
                         f"{n_permutations} permutations >= observed")


def holm(pvalues, alpha: float):
    """Holm step-down correction (statsmodels ``multipletests(method="holm")``).

    Returns ``(reject, p_adjusted)``; NaN p-values (tests that could not run) are treated as 1 in
    the family and reported as NaN.
    """
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=np.float64)
    if p.size == 0:
        return np.zeros(0, dtype=bool), np.zeros(0)
    filled = np.where(np.isnan(p), 1.0, p)
    # statsmodels' Holm branch calls gc.collect(), which costs ~0.5 s in a process holding many
    # objects (scipy, pytest); freezing the existing objects makes that collection trivial.
    frozen = gc.isenabled()
    if frozen:
        gc.freeze()
    try:
        reject, p_adj, _, _ = multipletests(filled, alpha=alpha, method="holm")
    finally:
        if frozen:
            gc.unfreeze()
    p_adj = np.where(np.isnan(p), np.nan, p_adj)
    return reject, p_adj


# ---------------------------------------------------------------------------------------------
# tests of the heterogeneous-batch statistics (proofs/S1-harness-power.md, section S1.7)
def bonferroni_min(pvalues) -> tuple:
    """``(min(1, m * min p), argmin)`` over the non-NaN ``pvalues`` (valid under any dependence)."""
    p = np.asarray(pvalues, dtype=np.float64)
    live = np.flatnonzero(~np.isnan(p))
    if live.size == 0:
        return float("nan"), -1
    k = int(live[np.argmin(p[live])])
    return float(min(1.0, live.size * p[k])), k


#: The chi-square approximations of the sums below are used only from this many rows (pairs) on.
MIN_CLT_ROWS = 200


def quadratic_form_test(vector, matrix, scale: float = 1.0, label: str = "") -> TestStatistic:
    """Chi-square test of a sum of independent zero-mean vectors with known covariance.

    Notes
    -----
    If ``m = sum_i X_i`` with independent ``E X_i = 0`` and ``sum_i Cov X_i = scale * M``, then
    ``Q = m' M^+ m / scale`` is asymptotically ``chi^2(rank M)`` (multivariate CLT; Lindeberg holds
    because every ``X_i`` has bounded fourth moments here).  Used for the cross-covariance of
    ``t = s - delta`` with ``z_perp`` (``X_i = t_i z_perp_i``, ``Cov = I - e_i e_i'``, scale 1) and of
    ``t^2 - 1`` with ``z_perp`` (scale 2).
    """
    v = np.asarray(vector, dtype=np.float64)
    M = np.asarray(matrix, dtype=np.float64)
    if np.trace(M) < MIN_CLT_ROWS:
        return TestStatistic(float("nan"), float("nan"), f"fewer than {MIN_CLT_ROWS} rows: chi-square law not reached")
    w, U = np.linalg.eigh(M)
    keep = w > w.max() * 1e-9
    proj = U[:, keep].T @ v
    stat = float(np.sum(proj * proj / w[keep]) / scale)
    df = int(keep.sum())
    return TestStatistic(stat, chi2_sf(stat, df), f"{label}chi2={stat:.4g} on {df} df")


def studentised_form_test(vector, matrix, label: str = "") -> TestStatistic:
    """Exact chi-square test of ``m = sum_i a_i P z_perp_i`` studentised by its covariance given the ``a_i``.

    Parameters
    ----------
    vector : ndarray (k,)
        ``m = sum_i a_i P z_perp_i`` with weights ``a_i`` that are functions of ``t_i`` only
        (``t_i`` or ``t_i^2 - 1``).
    matrix : ndarray (k, k)
        ``C = sum_i a_i^2 P Pi_i P'`` with ``Pi_i = I - e_i e_i'``.

    Notes
    -----
    Under an exact rule ``y_i ~ N(0, I)`` independently, so ``t_i = <e_i, y_i>`` and
    ``z_perp_i = Pi_i y_i ~ N(0, Pi_i)`` are independent.  Given every ``t_i`` the vector ``m`` is a
    sum of independent Gaussians: ``m | t ~ N(0, C)`` exactly, hence ``Q = m' C^+ m ~ chi^2(rank C)``
    at every ``n`` (conditionally, so also unconditionally).  No central limit theorem is involved
    (``proofs/S1-harness-power.md``, S1.8).  The rank is the number of eigenvalues above
    ``1e-9`` times the largest.
    """
    v = np.asarray(vector, dtype=np.float64)
    M = np.asarray(matrix, dtype=np.float64)
    if not np.trace(M) > 0:
        return TestStatistic(float("nan"), float("nan"), f"{label}no rows with weight")
    w, U = np.linalg.eigh(M)
    keep = w > w.max() * 1e-9
    proj = U[:, keep].T @ v
    stat = float(np.sum(proj * proj / w[keep]))
    df = int(keep.sum())
    return TestStatistic(stat, chi2_sf(stat, df), f"{label}chi2={stat:.4g} on {df} df (exact null)")


def independence_test(sums, pairs: int, n_bins: int, names=(), min_pairs: int | None = None) -> TestStatistic:
    """Known-marginal rank correlation of paired rows, all statistics in one chi-square.

    Notes
    -----
    With PITs binned into ``B`` equiprobable bins and centred, ``u = (b + 1/2)/B - 1/2`` has mean 0
    and variance ``v = (B^2 - 1)/(12 B^2)`` under the null.  For ``P`` row pairs ``(i, j)`` of
    independent rows, ``S = sum u_i u_j`` has mean 0 and variance ``P v^2``; the terms are
    uncorrelated even when pairs share a row (neighbours), and ``S`` of different statistics are
    uncorrelated (independent or sign-symmetric), so ``sum_q S_q^2 / (P v^2)`` is asymptotically
    ``chi^2(#stats)``.  ``S / (P v)`` is the Spearman correlation of the pairs against the null
    marginals.
    """
    s = np.asarray(sums, dtype=np.float64)
    floor = MIN_CLT_ROWS if min_pairs is None else int(min_pairs)
    if pairs < max(floor, 1) or s.size == 0:
        return TestStatistic(float("nan"), float("nan"), f"fewer than {floor} row pairs")
    v = (n_bins * n_bins - 1) / (12.0 * n_bins * n_bins)
    z = s / math.sqrt(pairs * v * v)
    stat = float(np.sum(z * z))
    rho = ", ".join(f"{nm} {x / (pairs * v):+.2e}" for nm, x in zip(names, s))
    return TestStatistic(stat, chi2_sf(stat, s.size),
                         f"chi2={stat:.4g} on {s.size} df over {pairs} pairs; rank corr {rho}")


def projection_ks_test(proj_counts) -> TestStatistic:
    """Binned KS of every fixed projection, Bonferroni over the projections."""
    tests = [binned_ks_test(c) for c in np.asarray(proj_counts)]
    p, k = bonferroni_min([t.pvalue for t in tests])
    if k < 0:
        return TestStatistic(float("nan"), float("nan"), "no samples")
    D = max(t.statistic for t in tests)
    return TestStatistic(D, p, f"max D={D:.3g} over {len(tests)} projections (worst #{k}: {tests[k].detail})")


def grouped_binomial_test(accepted, rows, probs, labels) -> TestStatistic:
    """Exact two-sided binomial test of the accepted count of every delta group, Bonferroni over groups.

    Groups with ``probs`` NaN (no declared acceptance) or no rows are left out.
    """
    ps, worst = [], ""
    for k, n, p, lab in zip(accepted, rows, probs, labels):
        if n == 0 or p is None or math.isnan(p):
            ps.append(float("nan"))
            continue
        ps.append(binomial_test(int(k), int(n), float(p)).pvalue)
    pval, i = bonferroni_min(ps)
    if i < 0:
        return TestStatistic(float("nan"), float("nan"), "no group with a declared acceptance")
    worst = f"worst group delta={labels[i]}: {accepted[i]}/{rows[i]} accepted vs exact {probs[i]:.6g}"
    rate = accepted[i] / rows[i]
    return TestStatistic(rate - probs[i], pval, worst)


def bound_exceedance_test(accepted, rows, bounds, labels) -> TestStatistic:
    """One-sided exact test that no group's acceptance exceeds ``acceptance_bound(K, delta)``.

    ``p_g = P(Binomial(n_g, b_g) >= k_g)`` (valid under any law whose acceptance is at most
    ``b_g``); Bonferroni over groups.  An exact verifier never exceeds the list-coupling bound
    (``proofs/P5-list-coupling-bound.md``).
    """
    ps = []
    for k, n, b in zip(accepted, rows, bounds):
        ps.append(float("nan") if n == 0 else binomial_sf(int(k) - 1, int(n), min(float(b), 1.0)))
    pval, i = bonferroni_min(ps)
    if i < 0:
        return TestStatistic(float("nan"), float("nan"), "no samples")
    rate = accepted[i] / rows[i]
    return TestStatistic(rate - bounds[i], pval, f"worst group delta={labels[i]}: acceptance {rate:.6g} "
                         f"vs bound {bounds[i]:.6g} ({accepted[i]}/{rows[i]})")


def poisson_excess_test(k: int, lam: float, label: str = "") -> TestStatistic:
    """One-sided ``P(Poisson(lam) >= k)`` (exactly 1 for ``k = 0``)."""
    if lam <= 0 and k == 0:
        return TestStatistic(0.0, 1.0, f"{label}0 observed")
    p = 1.0 if k == 0 else float(stats.poisson.sf(int(k) - 1, lam))
    return TestStatistic(float(k), p, f"{label}{k} observed, {lam:.3g} expected")
