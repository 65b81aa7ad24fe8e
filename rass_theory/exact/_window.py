"""The one truncation window of the exact residual-law engine, with its error bound.

Every crossing search in :mod:`rass_theory.exact` (RASS, threshold and policy laws, the
optimiser's evaluation, the table samplers of the verifiers, the torch backend) looks for the
crossings of ``f = phi(. - delta)`` and a selected law ``g`` inside

    W(K, delta) = [-L(K), max(delta, 0) + L(K)],

and takes the sign of ``f - g`` beyond ``W`` from its end points.

Why this is enough (proof ``proofs/P7-selected-law.md``): any rule that selects one of ``K``
iid ``N(0, 1)`` children has ``g <= K phi``, so beyond ``W`` both ``f`` and ``g`` carry at
most ``Phi(-L)`` and ``K Phi(-L)``; a crossing missed there changes the residual law, its mass
``TV(f, g)`` and the acceptance by at most ``(K + 1) Phi(-L)`` in total variation.

The bound :data:`TAIL_BOUND` ``= 1e-27`` holds with ``L = 11.5`` exactly for
``K <= K_MAX_DEFAULT = 1515`` (``(K + 1) Phi(-11.5) = (K + 1) 6.6e-31``).  Above that range the
window widens: ``L(K) = -Phi^{-1}(TAIL_BOUND / (K + 1))`` (``11.76`` at ``K = 4096``), so the
stated bound holds for every ``K`` and no caller silently leaves its accuracy.
"""
from __future__ import annotations

import functools
import math

from scipy.special import ndtri

__all__ = ["TAIL_BOUND", "HALF_WIDTH", "K_MAX_DEFAULT", "half_width", "window"]

#: total-variation error allowed from truncating the real line (per node)
TAIL_BOUND = 1e-27
#: half-width of the window for ``K <= K_MAX_DEFAULT``
HALF_WIDTH = 11.5
#: largest ``K`` with ``(K + 1) Phi(-HALF_WIDTH) <= TAIL_BOUND``
K_MAX_DEFAULT = 1515


@functools.lru_cache(maxsize=None)
def half_width(K: int) -> float:
    """``L(K)``: the smallest half-width ``>= 11.5`` with ``(K + 1) Phi(-L) <= 1e-27``.

    Parameters
    ----------
    K : int
        Number of children, ``>= 1``.

    Notes
    -----
    ``L = 11.5`` for ``K <= 1515``, else ``-Phi^{-1}(1e-27 / (K + 1))`` (module docstring).
    """
    K = int(K)
    if K < 1:
        raise ValueError(f"K must be an integer >= 1, got {K}")
    if K <= K_MAX_DEFAULT:
        return HALF_WIDTH
    return max(HALF_WIDTH, -float(ndtri(TAIL_BOUND / (K + 1))))


def window(K: int, delta: float) -> tuple[float, float]:
    """The search window ``[-L(K), max(delta, sqrt(2 log K), 0) + L(K)]`` for one node.

    ``sqrt(2 log K)`` (the centre of the largest of ``K`` normals) keeps the top order
    statistic's bulk inside the window for large ``K``.
    """
    L = half_width(K)
    top = math.sqrt(2.0 * math.log(max(int(K), 2)))
    return (-L, max(float(delta), top) + L)
