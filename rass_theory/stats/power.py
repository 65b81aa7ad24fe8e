"""Stated power of the exactness harness: a sufficient detectable KS distance per tested statistic.

The harness tests each one-dimensional statistic with a binned Kolmogorov-Smirnov test inside a
Holm family.  :func:`detectable_ks_distance` is a sufficient (not the smallest) KS distance
between the statistic's true law and its null: at that distance or more the run is guaranteed to
reject with probability at least ``1 - false_pass_rate`` (proof ``proofs/S1-harness-power.md``, S1.2).
"""
from __future__ import annotations

import math

from .._validation import check_positive_int, check_probability

__all__ = ["dkw_radius", "detectable_ks_distance", "samples_for_distance"]


def dkw_radius(n: int, level: float) -> float:
    """Dvoretzky-Kiefer-Wolfowitz-Massart radius ``sqrt(log(2 / level) / (2 n))``.

    ``P(sup_u |F_n(u) - F(u)| > radius) <= level`` for every ``n >= 1`` and every continuous
    ``F`` (Massart 1990; the constant 2 is tight).
    """
    n = check_positive_int(n, "n")
    level = check_probability(level, "level")
    return math.sqrt(math.log(2.0 / level) / (2.0 * n))


def detectable_ks_distance(n: int, alpha: float, n_tests: int, false_pass_rate: float = 0.01,
                           n_bins: int | None = None) -> float:
    """A sufficient KS distance: the harness rejects it with probability ``>= 1 - false_pass_rate``.

    Parameters
    ----------
    n : int
        Samples entering each histogram (the run's valid rows).
    alpha : float
        Family-wise significance level of the run.
    n_tests : int
        Size of the Holm family.
    false_pass_rate : float, default 0.01
        The allowed probability ``beta`` of passing a rule that is that far off.
    n_bins : int, optional
        Equiprobable PIT bins of the histograms (``None``: continuous statistic).

    Returns
    -------
    float
        ``eps = sqrt(log(2 m / alpha) / (2 n)) + sqrt(log(2 / beta) / (2 n)) + 1 / B``.

    Notes
    -----
    Let ``G`` be the true law of the PIT ``u = F_0(T)`` and ``eps = sup_u |G(u) - u|``.

    1. Holm rejects every hypothesis whose raw p-value is ``<= alpha / m``; the KS p-value is
       ``<= alpha / m`` once ``D_B > c`` with ``c = sqrt(log(2 m / alpha) / (2 n))``, because the
       Kolmogorov tail is bounded by Massart's ``2 exp(-2 n c^2)``.
    2. ``G`` is monotone, so at the edge ``u_j`` of the bin holding the worst point
       ``|G(u_j) - u_j| >= eps - 1/B``.
    3. With probability ``>= 1 - beta``, ``|F_n(u_j) - G(u_j)| <= sqrt(log(2 / beta) / (2 n))``
       (DKW-Massart under ``G``).

    Hence ``D_B >= |F_n(u_j) - u_j| > c`` and the run fails whenever
    ``eps > c + sqrt(log(2/beta)/(2n)) + 1/B``.  The bound is distribution-free and therefore
    conservative: actual power (``bench/power_table.py``) is higher.
    """
    n = check_positive_int(n, "n")
    alpha = check_probability(alpha, "alpha")
    n_tests = check_positive_int(n_tests, "n_tests")
    beta = check_probability(false_pass_rate, "false_pass_rate")
    binning = 0.0 if n_bins is None else 1.0 / check_positive_int(n_bins, "n_bins")
    return dkw_radius(n, alpha / n_tests) + dkw_radius(n, beta) + binning


def samples_for_distance(eps: float, alpha: float, n_tests: int, false_pass_rate: float = 0.01,
                         n_bins: int | None = None) -> int:
    """Smallest ``n`` whose :func:`detectable_ks_distance` is at most ``eps``.

    ``n = ceil((sqrt(log(2m/alpha)/2) + sqrt(log(2/beta)/2))^2 / (eps - 1/B)^2)``.
    """
    eps = float(eps)
    binning = 0.0 if n_bins is None else 1.0 / check_positive_int(n_bins, "n_bins")
    if not eps > binning:
        raise ValueError(f"eps must exceed the binning resolution 1/n_bins = {binning}, got {eps}")
    alpha = check_probability(alpha, "alpha")
    beta = check_probability(false_pass_rate, "false_pass_rate")
    n_tests = check_positive_int(n_tests, "n_tests")
    a = math.sqrt(math.log(2.0 * n_tests / alpha) / 2.0) + math.sqrt(math.log(2.0 / beta) / 2.0)
    return int(math.ceil((a / (eps - binning)) ** 2))


def _noncentrality_for(df: int, level: float, beta: float) -> float:
    """Smallest ``lam`` with ``P(chi^2_df(lam) > chi^2_df quantile at 1 - level) >= 1 - beta``."""
    from scipy import optimize, stats

    q = stats.chi2.isf(level, df)
    return float(optimize.brentq(lambda lam: stats.ncx2.sf(q, df, lam) - (1 - beta), 1e-9, 1e6))


def detectable_discrepancies(n: int, alpha: float, n_tests: int, false_pass_rate: float = 0.01, *, dim: int = 8,
                             n_bins: int = 4096, n_projections: int | None = None, projection_bins: int = 256,
                             named_share: float = 0.5, n_groups: int = 5, acceptance: float = 0.5,
                             n_tail_rows: int | None = None) -> dict:
    """The smallest discrepancy each statistic of a harness cell detects with probability ``>= 1 - beta``.

    Parameters
    ----------
    n : int
        Valid rows of one pass of the cell.
    alpha, n_tests, false_pass_rate
        Family-wise level, size of the Holm family, ``beta``.
    n_tail_rows : int, optional
        Rows pooled by the far-tail tests (default ``n``).
    n_projections : int, optional
        Fixed projections of the cell (default :func:`rass_theory.stats.node.n_projections` of ``dim``).

    Returns
    -------
    dict
        ``name -> (value, unit)``.

    Notes
    -----
    Every test is rejected when its raw p-value is below Holm's first threshold ``alpha / m``
    (``proofs/S1-harness-power.md``, S1.7).  KS statistics: :func:`detectable_ks_distance`
    (distribution-free; the projections test carries a Bonferroni factor over the directions).
    Chi-square statistics with ``df`` degrees of freedom: the noncentrality ``lam`` at which a
    ``chi^2_df(lam)`` exceeds the level-``alpha/m`` quantile with probability ``1 - beta``; the
    cross-covariance ``n ||E[t z_perp]||^2 / (1 - 1/dim) = lam`` (``df = dim``; the ``t^2 - 1``
    version has an extra factor 2), the row-pair rank correlation ``P rho^2 = lam`` (``df = 3``,
    ``P`` about ``n/2`` pairs for ``(i, i + n/2)``), the joint 8 x 8 histograms Cohen's
    ``w^2 = lam / n`` (``df = 63``).  Binomial counts (normal approximation): acceptance of a delta
    group ``|a - a_0| = (z_{alpha/(2mG)} + z_beta) sqrt(a_0 (1 - a_0) / n_g)``; far tails beyond 4 sd
    (one side, ``p = Phi(-4)``) a relative deficit ``(z_{alpha/(2m)} + z_beta) / sqrt(N p)``.
    """
    from scipy import stats

    level = alpha / n_tests
    z_b = stats.norm.isf(false_pass_rate)
    out = {"one-dimensional PIT statistic (s, rperp, dir_j, diag)":
           (detectable_ks_distance(n, alpha, n_tests, false_pass_rate, n_bins), "KS distance")}
    if n_projections is None:
        from .node import n_projections as projections_of_dim

        n_projections = projections_of_dim(dim)
    out[f"any of the {n_projections} fixed projections <u_k, y>"] = (
        detectable_ks_distance(n, alpha, n_tests * n_projections, false_pass_rate, projection_bins), "KS distance")
    lam = _noncentrality_for(dim, level, false_pass_rate)
    out["xcov_s: E[(s - delta) z_perp]"] = (math.sqrt(lam * (1 - 1 / dim) / n), "norm of a covariance (unit-variance factors)")
    out["xcov_s2: E[((s - delta)^2 - 1) z_perp]"] = (math.sqrt(2 * lam * (1 - 1 / dim) / n), "norm of a covariance")
    lam3 = _noncentrality_for(3, level, false_pass_rate)
    out["indep_half: rank correlation of rows (i, i + n/2)"] = (math.sqrt(lam3 / (n / 2)), "Spearman rho")
    out["indep_next: rank correlation of rows (i, i + 1)"] = (math.sqrt(lam3 / n), "Spearman rho")
    lam63 = _noncentrality_for(63, level, false_pass_rate)
    out["joint_chi2 / joint_s_dir0_chi2 (8 x 8 cells)"] = (math.sqrt(lam63 / n), "Cohen's w")
    z_acc = stats.norm.isf(level / (2 * (n_groups + 1))) + z_b
    a0 = acceptance
    out["acceptance at the named delta"] = (z_acc * math.sqrt(a0 * (1 - a0) / (named_share * n)), "probability")
    out["acceptance of one spread delta group"] = (
        z_acc * math.sqrt(a0 * (1 - a0) / ((1 - named_share) * n / n_groups)), "probability")
    p4 = float(stats.norm.sf(4.0))
    N = n if n_tail_rows is None else n_tail_rows
    out["far tail s - delta > 4 (pooled rows)"] = (
        min(1.0, (stats.norm.isf(level / 2) + z_b) / math.sqrt(N * p4)), "relative deficit or excess of the mass")
    return out
