"""S1.2: the stated detectable KS distance against simulation and against Massart's bound.

The power claim: under i.i.d. rows, a tested statistic at KS distance ``d >= eps`` from its null,
``eps = sqrt(log(2m/alpha)/(2n)) + sqrt(log(2/beta)/(2n)) + 1/B``, is rejected by the harness's
binned KS test at Holm's first threshold ``alpha/m`` with probability ``>= 1 - beta``.
"""
import math

import numpy as np
import pytest
from scipy import special, stats

from rass_theory.stats.power import detectable_ks_distance, dkw_radius
from rass_theory.stats.tests import EXACT_KS_MAX_N, binned_ks_test, kolmogorov_sf

def _default_family_size() -> int:
    """The Holm family size of one default cell (K = 4, delta = 0.5, dim = 8), read from the harness."""
    from rass_theory.stats.config import harness_config
    from rass_theory.stats.family import family_size
    from rass_theory.verifiers import rass

    return family_size(harness_config(rass(), 4, 0.5, 8, n_samples=200_000, rng=0))


ALPHA, M, BETA, B = 1e-3, _default_family_size(), 0.01, 4096  # the harness defaults (m read from the code)
N_SMALL, N_LARGE = 2_000, 100_000  # one n in each p-value branch (exact kstwo / limiting law)


def _pit_histogram(x, n_bins):
    u = special.ndtr(x)
    return np.bincount(np.minimum((u * n_bins).astype(np.int64), n_bins - 1), minlength=n_bins)


def empirical_power(n, reps, seed):
    """Rejections at ``alpha/m`` of ``reps`` runs whose statistic is ``N(shift, 1)`` at KS distance ``eps``."""
    eps = detectable_ks_distance(n, ALPHA, M, BETA, B)
    shift = 2.0 * special.ndtri((1.0 + eps) / 2.0)  # KS(N(shift, 1), N(0, 1)) = 2 Phi(shift/2) - 1
    rng = np.random.default_rng(seed)
    rejected = 0
    for _ in range(reps):
        counts = _pit_histogram(rng.standard_normal(n) + shift, B)
        rejected += binned_ks_test(counts).pvalue <= ALPHA / M
    return eps, shift, rejected


@pytest.mark.parametrize("n", [N_SMALL, N_LARGE])
def test_distance_formula_against_massart(n):
    """``c`` solves Massart's ``2 exp(-2 n c^2) = alpha/m`` and the code's p-value clears ``alpha/m`` above it."""
    c, r = dkw_radius(n, ALPHA / M), dkw_radius(n, BETA)
    assert 2 * math.exp(-2 * n * c * c) == pytest.approx(ALPHA / M, rel=1e-12)
    assert 2 * math.exp(-2 * n * r * r) == pytest.approx(BETA, rel=1e-12)
    assert detectable_ks_distance(n, ALPHA, M, BETA, B) == pytest.approx(c + r + 1 / B, rel=1e-15)
    assert (n <= EXACT_KS_MAX_N) == (n == N_SMALL)  # one n per branch
    assert kolmogorov_sf(c * (1 + 1e-9), n) <= ALPHA / M
    # and not far below it: Massart's bound is nearly tight in this tail (S1.1(c))
    assert kolmogorov_sf(c, n) >= 0.5 * ALPHA / M


@pytest.mark.slow
@pytest.mark.parametrize("n,seed", [(N_SMALL, 11), (N_LARGE, 12)])
def test_power_at_stated_distance(n, seed):
    """Empirical power at the stated distance is compatible with ``>= 1 - beta`` (Clopper-Pearson)."""
    reps = 400
    eps, shift, rejected = empirical_power(n, reps, seed)
    # one-sided 99.9% Clopper-Pearson upper bound on the power; the claim is false if it is < 0.99
    upper = 1.0 if rejected == reps else stats.beta.ppf(0.999, rejected + 1, reps - rejected)
    print(f"n={n}: eps={eps:.5f} shift={shift:.5f} power={rejected}/{reps}")
    assert upper >= 1 - BETA
