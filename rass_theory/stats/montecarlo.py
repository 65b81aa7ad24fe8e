"""Monte-Carlo estimators of acceptance and of the selected-candidate law, with intervals.

These are the independent, simulation-side counterparts of the exact formulas in
:mod:`rass_theory.exact`: ``estimate_acceptance`` runs a verifier on a synthetic node and
reports the accepted fraction with a Clopper--Pearson interval; ``estimate_selected_law`` draws
``K`` iid ``N(0, 1)`` projections, applies a rank selection (weights) or a value-aware policy,
and returns the empirical CDF of the selected ``s`` with a DKW confidence band and a histogram
density with per-bin binomial standard errors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import (as_generator, check_delta, check_K, check_positive_int, check_probability,
                           check_weights)
from .tests import clopper_pearson

__all__ = ["AcceptanceEstimate", "SelectedLawEstimate", "estimate_acceptance", "estimate_selected_law",
           "dkw_epsilon"]


def dkw_epsilon(n: int, confidence: float = 0.95) -> float:
    """Half-width of the Dvoretzky--Kiefer--Wolfowitz band: ``sqrt(log(2/alpha) / (2n))``.

    With probability at least ``confidence``, ``sup_x |F_n(x) - F(x)| <= epsilon`` (Massart's
    tight constant).
    """
    n = check_positive_int(n, "n")
    alpha = 1.0 - check_probability(confidence, "confidence")
    return float(np.sqrt(np.log(2.0 / alpha) / (2.0 * n)))


@dataclass(frozen=True)
class AcceptanceEstimate:
    """Monte-Carlo acceptance of a verifier at one node.

    Attributes
    ----------
    estimate : float
        ``n_accepted / n_samples``.
    confidence_interval : tuple of float
        Clopper--Pearson interval at ``confidence``.
    standard_error : float
        ``sqrt(p (1 - p) / n)`` at the estimate.
    n_samples, n_accepted : int
    confidence : float
    """

    estimate: float
    confidence_interval: tuple
    standard_error: float
    n_samples: int
    n_accepted: int
    confidence: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the confidence interval."""
        low, high = self.confidence_interval
        return bool(low <= value <= high)


def estimate_acceptance(verifier, K, delta, dim, n_samples, rng=None, *, sigma: float = 1.0,
                        confidence: float = 0.95, batch_size: int = 100_000) -> AcceptanceEstimate:
    """Estimate the probability that ``verifier`` commits a drafted child.

    Parameters
    ----------
    verifier : callable
        Obeys the verifier contract (``docs/ARCHITECTURE.md``).
    K, delta, dim : node parameters.
    n_samples : int
        Number of independent nodes.
    rng : None, int, SeedSequence or Generator
    sigma : float
    confidence : float
        Level of the Clopper--Pearson interval.
    batch_size : int
        Nodes per verifier call (bounds memory at ``batch_size * K * dim`` doubles).

    Returns
    -------
    AcceptanceEstimate

    Notes
    -----
    The node has ``mu_draft ~ N(0, I_dim)``, a uniformly random unit direction ``e`` and
    ``mu_target = mu_draft + sigma delta e`` (drawn once from ``rng``); each batch draws
    ``children ~ N(mu_draft, sigma^2 I)`` and counts ``accepted``.  The interval is exact for the
    binomial count, so ``|estimate - acceptance| / standard_error`` is approximately standard
    normal under a correct verifier.
    """
    K = check_K(K)
    delta = check_delta(delta)
    dim = check_positive_int(dim, "dim")
    n_samples = check_positive_int(n_samples, "n_samples")
    batch_size = check_positive_int(batch_size, "batch_size")
    confidence = check_probability(confidence, "confidence")
    if not callable(verifier):
        raise TypeError(f"verifier must be callable, got {type(verifier).__name__}")
    sigma = float(sigma)
    if not np.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"sigma must be finite and > 0, got {sigma}")
    gen = as_generator(rng)
    mu_draft = gen.standard_normal(dim)
    e = gen.standard_normal(dim)
    e /= np.linalg.norm(e)
    mu_target = mu_draft + sigma * delta * e
    accepted = 0
    done = 0
    while done < n_samples:
        m = min(batch_size, n_samples - done)
        children = mu_draft + sigma * gen.standard_normal((m, K, dim))
        res = verifier(children, np.broadcast_to(mu_draft, (m, dim)), np.broadcast_to(mu_target, (m, dim)),
                       sigma, gen)
        acc = np.asarray(res.accepted)
        if acc.shape != (m,) or acc.dtype != np.bool_:
            raise ValueError(f"verifier returned accepted of shape {acc.shape} and dtype {acc.dtype}; "
                             f"expected ({m},) bool")
        accepted += int(np.count_nonzero(acc))
        done += m
    p = accepted / n_samples
    return AcceptanceEstimate(p, clopper_pearson(accepted, n_samples, confidence),
                              float(np.sqrt(p * (1 - p) / n_samples)), n_samples, accepted, confidence)


@dataclass(frozen=True)
class SelectedLawEstimate:
    """Empirical law of the selected candidate's projection ``s``.

    Attributes
    ----------
    samples : ndarray (n,)
        Sorted selected projections.
    epsilon : float
        DKW half-width at ``confidence``: the true CDF lies within ``ecdf +- epsilon`` everywhere
        with probability at least ``confidence``.
    bin_edges : ndarray (m + 1,)
    density : ndarray (m,)
        Histogram density estimate (counts / (n * width)).
    density_se : ndarray (m,)
        Binomial standard error of each density value.
    confidence : float
    """

    samples: np.ndarray
    epsilon: float
    bin_edges: np.ndarray
    density: np.ndarray
    density_se: np.ndarray
    confidence: float

    @property
    def n_samples(self) -> int:
        return int(self.samples.size)

    def ecdf(self, x) -> np.ndarray:
        """Empirical CDF ``#{s_i <= x} / n``."""
        return np.searchsorted(self.samples, np.asarray(x, dtype=np.float64), side="right") / self.samples.size

    def band(self, x):
        """Lower and upper DKW band ``clip(ecdf(x) -+ epsilon, 0, 1)``."""
        F = self.ecdf(x)
        return np.clip(F - self.epsilon, 0.0, 1.0), np.clip(F + self.epsilon, 0.0, 1.0)

    def sup_distance(self, cdf) -> float:
        """Kolmogorov distance ``sup_x |F_n(x) - F(x)|`` to a continuous CDF (evaluated at the jumps)."""
        F = np.asarray(cdf(self.samples), dtype=np.float64)
        n = self.samples.size
        upper = np.arange(1, n + 1) / n - F
        lower = F - np.arange(0, n) / n
        return float(max(upper.max(), lower.max()))

    def contains(self, cdf) -> bool:
        """Whether the continuous CDF ``cdf`` lies inside the DKW band everywhere."""
        return self.sup_distance(cdf) <= self.epsilon


def estimate_selected_law(K, delta, weights=None, n_samples=100_000, rng=None, *, policy=None,
                          confidence: float = 0.95, bins: int = 60) -> SelectedLawEstimate:
    """Simulate the projection ``s`` of the child a rank rule or policy selects.

    Parameters
    ----------
    K : int
    delta : float
        Only value-aware policies use it (rank selection does not depend on ``delta``).
    weights : array (K,), optional
        Rank weights (ascending ranks).  Exactly one of ``weights`` and ``policy``.
    n_samples : int
    rng : None, int, SeedSequence or Generator
    policy : SelectionPolicy, optional
        Object with ``.select(s (n, K), delta (n,), rng) -> child index (n,)``.
    confidence : float
        Level of the DKW band.
    bins : int
        Number of equal-width histogram bins over the central range of the sample.

    Returns
    -------
    SelectedLawEstimate

    Notes
    -----
    Draw ``S ~ N(0, I_K)`` per node, pick rank ``j ~ w`` of the sorted values (or the policy's
    child) and record ``S_(j)``.  The exact density is ``g_w(s) = phi(s) sum_j w_j
    K!/(j!(K-1-j)!) Phi(s)^j (1-Phi(s))^(K-1-j)``; the DKW inequality
    ``P(sup |F_n - G_w| > eps) <= 2 exp(-2 n eps^2)`` gives the band.
    """
    K = check_K(K)
    delta = check_delta(delta)
    n_samples = check_positive_int(n_samples, "n_samples")
    bins = check_positive_int(bins, "bins")
    if (weights is None) == (policy is None):
        raise ValueError("give exactly one of weights and policy")
    gen = as_generator(rng)
    s = gen.standard_normal((n_samples, K))
    rows = np.arange(n_samples)
    if weights is not None:
        w = check_weights(weights, K)
        u = gen.random(n_samples)
        rank = (u[:, None] >= np.cumsum(w)[: K - 1]).sum(axis=1)
        selected = np.sort(s, axis=1)[rows, rank]
    else:
        child = np.asarray(policy.select(s, np.full(n_samples, delta), gen), dtype=np.int64)
        if child.shape != (n_samples,) or np.any((child < 0) | (child >= K)):
            raise ValueError(f"policy.select must return child indices in [0, {K - 1}] of shape ({n_samples},)")
        selected = s[rows, child]
    selected = np.sort(selected)
    eps = dkw_epsilon(n_samples, confidence)
    lo, hi = np.quantile(selected, [0.001, 0.999])
    edges = np.linspace(lo, hi, bins + 1)
    counts, _ = np.histogram(selected, edges)
    width = np.diff(edges)
    p = counts / n_samples
    density = p / width
    density_se = np.sqrt(p * (1 - p) / n_samples) / width
    return SelectedLawEstimate(selected, eps, edges, density, density_se, confidence)
