"""Model-free tests of standardised residuals that should be iid N(0, 1) (or N(0, I_d)).

Each function takes residual projections or vectors, returns ``(statistic, pvalue, n)`` and has
an exact or self-normalised null; :func:`detectable_ks` and :func:`detectable_correlation` give
the smallest discrepancy a test detects with 80% power.  Used by
:func:`rass_theory.diffusion.check_trajectories` (``proofs/P9-tree-exactness.md`` section 7).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["ks_normal_test", "ks_uniform_test", "lag_correlation_test", "cross_correlation_test",
           "detectable_ks", "detectable_correlation", "detectable_cross_correlation"]

_Z80 = float(stats.norm.ppf(0.8))


def _ks(values, cdf):
    values = np.asarray(values, dtype=np.float64).ravel()
    values = values[np.isfinite(values)]
    if values.size < 2:
        return float("nan"), float("nan"), int(values.size)
    res = stats.kstest(values, cdf)
    return float(res.statistic), float(res.pvalue), int(values.size)


def ks_normal_test(values):
    """One-sample KS test of ``values`` (NaN entries dropped) against N(0, 1)."""
    return _ks(values, stats.norm.cdf)


def ks_uniform_test(pit):
    """One-sample KS test of probability-integral transforms against U(0, 1)."""
    return _ks(pit, stats.uniform.cdf)


def lag_correlation_test(p, lag: int):
    """Self-normalised test that ``p[:, t]`` and ``p[:, t + lag]`` are uncorrelated along each row.

    Parameters
    ----------
    p : ndarray, shape (n, T)
        Per-trajectory series, iid N(0, 1) under the null (NaN where undefined).
    lag : int

    Returns
    -------
    (rho, pvalue, n_pairs)
        ``rho`` is the mean lag product; ``pvalue`` two-sided from
        ``z = sum(prod) / sqrt(sum(prod^2))``.

    Notes
    -----
    With ``p_t`` adapted and ``E[p_{t+lag} | F_{t+lag}] = 0``, the products ``p_t p_{t+lag}`` are
    martingale differences, so the self-normalised sum is asymptotically N(0, 1) (martingale
    central limit theorem) whatever the law of ``p_t``'s scale.
    """
    p = np.asarray(p, dtype=np.float64)
    prod = (p[:, :-lag] * p[:, lag:]).ravel()
    prod = prod[np.isfinite(prod)]
    if prod.size < 2:
        return float("nan"), float("nan"), int(prod.size)
    ss = float(np.sum(prod * prod))
    z = float(np.sum(prod)) / math.sqrt(ss) if ss > 0 else 0.0
    return float(prod.mean()), float(2 * stats.norm.sf(abs(z))), int(prod.size)


def cross_correlation_test(r):
    """Exact F test that residual vectors of different trajectories are uncorrelated within each step.

    Parameters
    ----------
    r : ndarray, shape (n, T, d)
        Residuals, iid N(0, I_d) under the null.

    Returns
    -------
    (rho, pvalue, n_pairs)
        ``rho = (F - 1) / (F + n - 1)`` estimates the correlation of a coordinate between two
        trajectories at one step; ``pvalue`` is two-sided under ``F(dT, dT(n - 1))``.

    Notes
    -----
    For each step ``t`` and coordinate ``k`` the vector ``(r_{1tk}, ..., r_{ntk})`` is
    ``N(0, I_n)`` under the null.  Its squared projection on ``1 / sqrt(n)``,
    ``A = (sum_i r_{itk})^2 / n``, is chi-square(1) and independent of the rest,
    ``B = sum_i r_{itk}^2 - A`` ~ chi-square(n - 1).  Summed over ``t, k``,
    ``F = (A / (dT)) / (B / (dT (n - 1)))`` is exactly ``F(dT, dT(n - 1))``, whatever the
    residuals' common scale (a scale bug is the norm tests' job).  A correlation ``rho`` between
    trajectories multiplies ``E[A]`` by ``1 + (n - 1) rho`` and ``E[B]`` by ``1 - rho``.
    """
    r = np.asarray(r, dtype=np.float64)
    n, T, d = r.shape
    A = float(np.sum(r.sum(axis=0) ** 2)) / n
    B = float(np.sum(r * r)) - A
    df1, df2 = d * T, d * T * (n - 1)
    F = (A / df1) / (B / df2)
    p = 2 * min(float(stats.f.cdf(F, df1, df2)), float(stats.f.sf(F, df1, df2)))
    return (F - 1) / (F + n - 1), min(1.0, p), int(n * (n - 1) // 2 * T)


def detectable_cross_correlation(n: int, T: int, d: int, level: float, power: float = 0.8) -> float:
    """Between-trajectory correlation the F test of :func:`cross_correlation_test` detects with
    probability about ``power`` at ``level`` (two-sided; ``B`` taken at its mean).

    ``lambda = F_{1 - level/2}(dT, dT(n-1)) / (chi2_{1 - power}(dT) / (dT))`` is the inflation of
    ``A`` needed, and ``rho = (lambda - 1) / (lambda + n - 1)``.
    """
    df1, df2 = d * T, d * T * (n - 1)
    lam = float(stats.f.isf(level / 2, df1, df2)) / (float(stats.chi2.ppf(1 - power, df1)) / df1)
    return (lam - 1) / (lam + n - 1)


def detectable_ks(n: int, level: float, power: float = 0.8) -> float:
    """KS distance detected with probability ``power`` at ``level`` from ``n`` values.

    ``D_crit(n, level) + z_power * 0.5 / sqrt(n)``: the empirical CDF at the point of largest
    discrepancy has standard deviation at most ``0.5 / sqrt(n)``.
    """
    if n < 1:
        return float("nan")
    crit = float(stats.kstwo.isf(level, n)) if n <= 10_000 else float(stats.kstwobign.isf(level)) / math.sqrt(n)
    return crit + float(stats.norm.ppf(power)) * 0.5 / math.sqrt(n)


def detectable_correlation(n_pairs: int, level: float, power: float = 0.8) -> float:
    """Correlation detected with probability ``power`` by a two-sided z-test on ``n_pairs`` products."""
    if n_pairs < 1:
        return float("nan")
    return (float(stats.norm.isf(level / 2)) + float(stats.norm.ppf(power))) / math.sqrt(n_pairs)
