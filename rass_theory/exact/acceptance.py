"""Closed-form acceptance of the rules that need no optimiser, and the rule validation.

Every rule's acceptance at one node is a function of ``(K, delta)`` (and the rank weights for
RASS) alone, by the rank-1 reduction (``proofs/P1-rank1-reduction.md``).  This module computes
the rules that are closed form or exact given their parameters:

- ``"rmc"``   reflection maximal coupling, one child: ``2 Phi(-delta / 2)``.
- ``"dgrs"``  greedy rejection in drafting order: ``1 - Z_1 ... Z_K`` in closed form
  (:mod:`rass_theory.exact.dgrs`, ``proofs/P3-dgrs-closed-form.md``).
- ``"rass"`` with explicit rank weights (or ``K = 1``): ``1 - TV(g_w, f)``.

The rules that need the optimiser (``"rass"`` at its default, optimal, weights,
``"threshold"`` and ``"optimal_list"``) are solved one layer up, in
:mod:`rass_theory.optimize.dispatch`, the one ``acceptance`` / ``rejection_probability``
(``rt.acceptance``, ``rt.rejection_probability``); this module imports nothing above ``exact``
(``tests/test_layering.py``).
"""
from __future__ import annotations

import math

import numpy as np

from rass_theory._validation import check_weights
from rass_theory.exact import dgrs as _dgrs
from rass_theory.exact import rass as _rass

__all__ = ["RULES", "validate", "closed_form"]

#: rule names accepted by ``rt.acceptance`` and ``rt.rejection_probability``
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


def validate(rule, K, delta) -> tuple[str, int, float]:
    """Checked ``(rule, K, delta)``: ``rule`` one of :data:`RULES`, ``K >= 1`` an integer,
    ``delta >= 0`` finite (the errors of ``rt.acceptance``)."""
    rule = _check_rule(rule)
    K, delta = _dgrs._validate_fast(K, delta)
    return rule, K, delta


def closed_form(rule: str, K: int, delta: float, weights, want: str = "acceptance"):
    """Acceptance (``want="acceptance"``) or its complement (``want="tv"``) of a validated
    rule, or ``None`` when the rule needs the optimiser (``"rass"`` without weights at
    ``K > 1``, ``"threshold"``, ``"optimal_list"``).  Raises on weights given to a rule other
    than ``"rass"``, on bad RASS weights and on ``"rmc"`` with ``K != 1``.

    Examples
    --------
    >>> a = closed_form("rass", 2, 1.0, [0.5, 0.5])  # uniform weights: RASS is RMC
    >>> abs(a - closed_form("rmc", 1, 1.0, None)) < 1e-15
    True
    """
    index = 0 if want == "acceptance" else 1
    if rule == "rass":
        if weights is None:
            if K != 1:
                return None
            # one child: the selected law is phi, RASS is RMC (proofs/P6-reductions.md)
            half = 0.5 * delta * _SQRT1_2
            return math.erfc(half) if index == 0 else math.erf(half)
        check_weights(weights, K)
        # the exact law reads w / sum(w) itself with relatively accurate deviations from
        # uniform; passing the renormalised copy would cost ~1e-8 relative accuracy of TV at
        # delta ~ 1e-8
        w = np.asarray(weights, dtype=np.float64)
        return float(_rass.rass_acceptance(w, delta)) if index == 0 else float(_rass.rass_tv(w, delta))
    _no_weights(rule, weights)
    if rule == "rmc":
        _rmc_K(K)
        half = 0.5 * delta * _SQRT1_2
        return math.erfc(half) if index == 0 else math.erf(half)
    if rule == "dgrs":
        return _dgrs.acceptance(K, delta) if index == 0 else _dgrs.rejection_probability(K, delta)
    return None
