"""The public acceptance dispatcher ``rt.acceptance(rule, K, delta, weights=None)``.

Every rule's acceptance at one node is a function of ``(K, delta)`` (and the rank weights for
RASS) alone, by the rank-1 reduction (``proofs/P1-rank1-reduction.md``):

- ``"rmc"``   reflection maximal coupling, one child: ``2 Phi(-delta / 2)``.
- ``"dgrs"``  greedy rejection in drafting order: ``1 - Z_1 ... Z_K`` in closed form
  (:mod:`rass_theory.exact.dgrs`, ``proofs/P3-dgrs-closed-form.md``).
- ``"rass"``  rank-aware selection + maximal coupling: ``1 - TV(g_w, f)``; default weights are
  the optimal ones (:func:`rass_theory.optimize.rank_weights.optimal_rank_weights`).
- ``"threshold"`` the optimal threshold-rank policy, when :mod:`rass_theory.optimize.policies`
  is available.
- ``"optimal_list"`` the optimal list rule, whose acceptance is the list-coupling bound
  (:mod:`rass_theory.optimize.list_rule`).
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from rass_theory._validation import check_weights
from rass_theory.exact import dgrs as _dgrs

__all__ = ["RULES", "acceptance", "rejection_probability"]

#: rule names accepted by :func:`acceptance` and :func:`rejection_probability`
RULES = ("rmc", "dgrs", "rass", "threshold", "optimal_list")

_SQRT1_2 = 0.70710678118654752440


def _check_rule(rule) -> str:
    if not isinstance(rule, str):
        raise TypeError(f"rule must be a string, one of {RULES}, got {rule!r}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    return rule


def _no_weights(rule: str, weights) -> None:
    if weights is not None:
        raise ValueError(f"weights apply only to rule 'rass'; rule {rule!r} takes weights=None")


def _rmc_K(K: int) -> None:
    if K != 1:
        raise ValueError(f"rule 'rmc' is a single-draft rule and needs K == 1, got K={K}")


def _rass(K: int, delta: float, weights, want: str = "acceptance"):
    """``(acceptance, tv)`` of RASS at the given (or optimal) rank weights."""
    if weights is None:
        if K == 1:  # one child: the selected law is phi, RASS is RMC (proofs/P6-reductions.md)
            half = 0.5 * delta
            return math.erfc(half * _SQRT1_2), math.erf(half * _SQRT1_2)
        rank_weights = importlib.import_module("rass_theory.optimize.rank_weights")
        res = rank_weights.optimal_rank_weights(K, delta)
        return float(res.acceptance), float(res.tv)
    check_weights(weights, K)
    # the exact law reads w / sum(w) itself with relatively accurate deviations from uniform;
    # passing the renormalised copy would cost ~1e-8 relative accuracy of TV at delta ~ 1e-8
    w = np.asarray(weights, dtype=np.float64)
    rass = importlib.import_module("rass_theory.exact.rass")
    if want == "acceptance":
        return float(rass.rass_acceptance(w, delta)), None
    return None, float(rass.rass_tv(w, delta))


def _threshold(K: int, delta: float):
    try:
        policies = importlib.import_module("rass_theory.optimize.policies")
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the optimiser package
        raise ValueError("rule 'threshold' needs rass_theory.optimize.policies, which is not available") from exc
    res = policies.optimal_threshold_policy(K, delta)
    acc = float(res.acceptance)
    tv = getattr(res, "tv", None)
    return acc, float(tv) if tv is not None else 1.0 - acc


def _evaluate(rule, K, delta, weights, want: str) -> float:
    """Validate, dispatch on ``rule`` and return the acceptance or (``want="tv"``) its complement."""
    rule = _check_rule(rule)
    K, delta = _dgrs._validate_fast(K, delta)
    index = 0 if want == "acceptance" else 1
    if rule == "rass":
        return _rass(K, delta, weights, want=want)[index]
    _no_weights(rule, weights)
    if rule == "rmc":
        _rmc_K(K)
        half = 0.5 * delta * _SQRT1_2
        return math.erfc(half) if index == 0 else math.erf(half)
    if rule == "dgrs":
        return _dgrs.acceptance(K, delta) if index == 0 else _dgrs.rejection_probability(K, delta)
    if rule == "optimal_list":  # attains the list-coupling bound (proofs/P10-optimal-list-rule.md)
        res = importlib.import_module("rass_theory.optimize.list_rule").optimal_list_rule(K, delta)
        return res.acceptance if index == 0 else res.rejection
    return _threshold(K, delta)[index]


def acceptance(rule, K, delta, weights=None) -> float:
    """Exact acceptance probability of a verifier rule at one node.

    Parameters
    ----------
    rule : {"rmc", "dgrs", "rass", "threshold", "optimal_list"}
        ``"rmc"`` is a single-draft rule and requires ``K == 1``.  ``"threshold"`` is the optimal
        threshold-rank policy (delegated to :mod:`rass_theory.optimize.policies`).
    K : int
        Number of children (``>= 1``).
    delta : float
        Standardised mean displacement ``||mu_target - mu_draft|| / sigma`` (finite, ``>= 0``).
    weights : array_like of shape (K,), optional
        RASS rank weights (ascending ranks, on the simplex within ``1e-9 K``); only for
        ``"rass"``.  ``None`` means the optimal weights.

    Returns
    -------
    float
        Acceptance probability in ``[0, 1]``.

    Raises
    ------
    ValueError
        Unknown rule (the message lists the valid ones), ``K`` not a positive integer (or
        ``K != 1`` for ``"rmc"``), ``delta`` negative or not finite, bad ``weights``, or weights
        given to a rule other than ``"rass"``.

    Notes
    -----
    RMC: ``2 Phi(-delta/2)``.  D-GRS: ``1 - prod_k Z_k`` (``proofs/P3-dgrs-closed-form.md``).
    RASS: ``1 - TV(g_w, f)`` with ``g_w`` the selected law (``proofs/P2-rass-exactness.md``).
    All are functions of ``(K, delta)`` only (``proofs/P1-rank1-reduction.md``); at ``K = 1``
    or uniform weights they coincide with RMC (``proofs/P6-reductions.md``).

    Examples
    --------
    >>> round(acceptance("rmc", 1, 1.0), 6)
    0.617075
    >>> round(acceptance("dgrs", 4, 1.0), 6)
    0.797811
    """
    if rule == "dgrs" and weights is None:  # hot path: no allocation, plain floats
        return _dgrs.acceptance(K, delta)
    return _evaluate(rule, K, delta, weights, want="acceptance")


def rejection_probability(rule, K, delta, weights=None) -> float:
    """``1 - acceptance``, computed directly so that it keeps relative accuracy at small ``delta``.

    Parameters and errors are those of :func:`acceptance`.

    Notes
    -----
    RMC: ``erf(delta / (2 sqrt 2))``.  D-GRS: ``P_K = prod_k Z_k`` from the level recursion.
    RASS: ``TV(g_w, f)`` as summed by the exact law (not ``1 - acceptance``).
    """
    return _evaluate(rule, K, delta, weights, want="tv")
