"""The public acceptance dispatcher ``rt.acceptance(rule, K, delta, weights=None)``.

Every rule's acceptance at one node is a function of ``(K, delta)`` (and the rank weights for
RASS) alone, by the rank-1 reduction (``proofs/P1-rank1-reduction.md``):

- ``"rmc"``   reflection maximal coupling, one child: ``2 Phi(-delta / 2)``.
- ``"dgrs"``  greedy rejection in drafting order: ``1 - Z_1 ... Z_K`` in closed form
  (:mod:`rass_theory.exact.dgrs`, ``proofs/P3-dgrs-closed-form.md``).
- ``"rass"``  rank-aware selection + maximal coupling: ``1 - TV(g_w, f)``; default weights are
  the optimal ones (:func:`rass_theory.optimize.rank_weights.optimal_rank_weights`).
- ``"threshold"`` the optimal threshold-rank policy (:mod:`rass_theory.optimize.policies`).
- ``"optimal_list"`` the optimal list rule, whose acceptance is the list-coupling bound
  (:mod:`rass_theory.optimize.list_rule`).

The closed-form rules and the validation live in :mod:`rass_theory.exact.acceptance`; the
rules that need an optimiser are solved here, one layer up.
"""
from __future__ import annotations

from rass_theory.exact.acceptance import RULES, closed_form, validate
from rass_theory.exact.dgrs import acceptance as _dgrs_acceptance

__all__ = ["RULES", "acceptance", "rejection_probability", "optimised"]


def optimised(rule: str, K: int, delta: float, want: str = "acceptance") -> float:
    """Acceptance (``want="acceptance"``) or its complement (``want="tv"``) of a validated rule
    that needs the optimiser: ``"rass"`` at the optimal weights, ``"threshold"`` or
    ``"optimal_list"`` (no weights)."""
    index = 0 if want == "acceptance" else 1
    if rule == "rass":
        from rass_theory.optimize.rank_weights import optimal_rank_weights

        res = optimal_rank_weights(K, delta)
        return float(res.acceptance) if index == 0 else float(res.tv)
    if rule == "optimal_list":  # attains the list-coupling bound (proofs/P10-optimal-list-rule.md)
        from rass_theory.optimize.list_rule import optimal_list_rule

        res = optimal_list_rule(K, delta)
        return res.acceptance if index == 0 else res.rejection_probability
    if rule == "threshold":
        from rass_theory.optimize.policies import optimal_threshold_policy

        res = optimal_threshold_policy(K, delta)
        return float(res.acceptance) if index == 0 else float(res.tv)
    raise ValueError(f"rule {rule!r} needs no optimiser: use rass_theory.exact.acceptance.closed_form")


def _evaluate(rule, K, delta, weights, want: str) -> float:
    rule, K, delta = validate(rule, K, delta)
    out = closed_form(rule, K, delta, weights, want)
    return out if out is not None else optimised(rule, K, delta, want)


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
    TypeError
        ``rule`` not a string.

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
        return _dgrs_acceptance(K, delta)
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
