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
