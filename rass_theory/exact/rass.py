"""RASS acceptance and total variation through the crossings of ``f`` and ``g_w``.

``TV(g_w, f) = int (f - g_w)_+`` is the rejection probability of RASS at a node; it is computed
directly (not as ``1 - acceptance``) as a sum of closed-form CDF differences over the
intervals between the crossings, so it keeps relative accuracy at small ``delta``.  Proofs:
``proofs/P2-rass-exactness.md`` (acceptance ``= 1 - TV``) and ``proofs/P7-selected-law.md``.
"""
from __future__ import annotations

import numpy as np

from rass_theory._validation import check_delta, check_weights
from rass_theory.exact.segments import rass_evaluation
from rass_theory.exact.selected import residual_law

__all__ = ["rass_tv", "rass_acceptance", "crossings"]


def rass_tv(weights, delta) -> float:
    """Total variation ``TV(g_w, f)`` between the selected law and the target law of ``s``.

    Parameters
    ----------
    weights : array_like, shape (K,)
        Rank weights on the simplex (ascending ranks; tolerance ``1e-9``).
    delta : float
        Standardised displacement, finite and ``>= 0``.

    Returns
    -------
    float
        ``int (f - g_w)_+ ds``, the RASS rejection probability; in ``[0, 1]``.

    Notes
    -----
    ``sum over [a, b] with f > g_w of ([D(b) - D(a)] - [E(b) - E(a)])`` with
    ``D(x) = Phi(x - delta) - Phi(x)`` and ``E = G_w - Phi`` (proof P7); accuracy: relative
    ``~1e-13`` at small ``delta`` for nearly uniform weights, absolute ``~1e-16`` otherwise.

    Examples
    --------
    >>> round(rass_tv([1.0], 1.0), 12)  # K = 1: TV(phi, phi(. - 1)) = 2 Phi(1/2) - 1
    0.382924922548

    The optimiser evaluates weights with the same code
    (:func:`rass_theory.exact.segments.rass_evaluation`).
    """
    w, d = check_weights(weights, renormalise=False), check_delta(delta)
    return rass_evaluation(w, d).tv


def rass_acceptance(weights, delta) -> float:
    """RASS acceptance probability ``1 - TV(g_w, f)`` (proof P2).

    Notes
    -----
    Below ``1/2`` it is the sum of closed-form masses ``f(A^c) + g_w(A)``, ``A = {f > g_w}``
    (relative accuracy in the far tail: ``1.2e-137`` at ``K = 4``, ``delta = 50``, where
    ``1 - TV`` rounds to 0); from ``1/2`` on it is ``1 - TV`` (``TV`` below ``1/2`` keeps its
    relative accuracy).  The optimiser reports the same sum for its weights.
    """
    w, d = check_weights(weights, renormalise=False), check_delta(delta)
    ev = rass_evaluation(w, d)
    return ev.acceptance if ev.acceptance < 0.5 else 1.0 - ev.tv


def crossings(weights, delta) -> np.ndarray:
    """Sorted points where ``f(s) = phi(s - delta)`` equals ``g_w(s)``.

    Notes
    -----
    The one crossing search, :func:`rass_theory.exact.laws.residual_intervals`: sign changes of
    ``h = log f - log g_w`` on the engine's grid (spacing :func:`rass_theory.exact.laws.grid_spacing`,
    ``min(0.1, 0.5/sqrt(K))``, with a split of pairs of crossings hidden inside one cell),
    refined to a bracket of relative width ``8 eps``.  Crossings outside the truncation window
    ``[-L, max(delta, sqrt(2 log K)) + L]``, where both densities carry mass below
    ``(K + 1) Phi(-L) <= 1e-27`` (``L = L(K)``, :mod:`rass_theory.exact._window`), are not reported.
    """
    return residual_law(weights, delta).crossings.copy()
