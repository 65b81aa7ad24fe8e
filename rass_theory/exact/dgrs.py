"""D-GRS (sequence coupling in drafting order) in closed form: residual levels and batch helpers.

Greedy rejection sampling over the children in drafting order uses the recursive residuals

    r_0 = f = phi(s - delta),   r_k = (r_{k-1} - phi)_+ / Z_k,

and accepts child ``k`` with probability ``min(1, r_{k-1}(s_k) / phi(s_k))``.  With
``P_0 = 1``, ``P_k = Z_1 ... Z_k`` (the probability that the first ``k`` children are rejected) and
``S_k = P_0 + ... + P_{k-1}``, every residual is a half-line piece of a two-term combination,

    P_k r_k(s) = (f(s) - S_k phi(s))_+ = (f(s) - S_k phi(s)) 1{s >= c_k},
    c_k = delta / 2 + log(S_k) / delta,

so ``r_k = a_k f - b_k phi`` on ``[c_k, inf)`` with ``a_k = 1 / P_k``, ``b_k = S_k / P_k``, and

    P_k = Q(c_k - delta) - S_k Q(c_k) = [Phi(c_k) - Phi(c_k - delta)] - T_k Q(c_k),
    T_k = S_k - 1 = P_1 + ... + P_{k-1},      Q = 1 - Phi,

with ``P_1 = erf(delta / (2 sqrt 2))``.  The acceptance of D-GRS with ``K`` children is
``1 - P_K``.  Written with ``T_k`` (a sum of positive terms), ``log1p(T_k)`` and the interval mass
``Phi(c) - Phi(c - delta)`` (a Hermite series when the interval is short), every ``P_k`` keeps full
relative accuracy as ``delta -> 0``, where ``P_k = O(delta)``.  No quadrature is used.
Derivation: ``proofs/P3-dgrs-closed-form.md``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rass_theory.exact.laws import TINY_DELTA, DGRSLaw, limit_levels
from rass_theory._validation import check_delta, check_K, check_positive_int

__all__ = [
    "DGRSLevels",
    "levels",
    "rejection_probability",
    "acceptance",
    "dgrs_residual_masses",
    "batch_accept_prob",
    "batch_sample_final_residual",
    "final_residual_sf",
]

_SQRT1_2 = 0.70710678118654752440
_INV_SQRT_2PI = 0.39894228040143267794

#: the series is used when ``(b - a) * max(1, |m|) < SERIES_WIDTH``
SERIES_WIDTH = 0.1
_ARRAY_SERIES_TERMS = 6  # j = 0..5: with h max(1, |m|) < 0.05 the omitted tail is < 1e-18
#: the largest ``K`` of the exact D-GRS functions: the level recursion takes one step per child
#: (about 1.5 s at this ``K``; ``K = 2**40`` would run for days)
MAX_K = 1 << 20


def norm_sf(x: float) -> float:
    """Upper tail ``Q(x) = 1 - Phi(x)`` of a Python float, relatively accurate for large ``x``."""
    return 0.5 * math.erfc(x * _SQRT1_2)


def _interval_series(m: float, h: float) -> float:
    """``Phi(m + h) - Phi(m - h)`` by the Hermite series, for ``h max(1, |m|) < SERIES_WIDTH / 2``.

    Six terms (``j <= 5``) suffice: in that range the first omitted one, ``He_12(m) h^12 / 13!``
    relative to ``h``, is at most ``5.04e-22`` and the whole omitted tail ``5.7e-21`` (P3.6); when
    ``y = h (|m| + 3.5) < 1e-3`` three terms do (omitted ``< y^6 / 7! < 1e-21``).
    """
    x = m * m
    h2 = h * h
    if h * (abs(m) + 3.5) < 1e-3:
        total = 1.0 + h2 * ((x - 1.0) / 6.0 + h2 * (((x - 6.0) * x + 3.0) / 120.0))
        return 2.0 * _INV_SQRT_2PI * math.exp(-0.5 * x) * h * total
    he2 = x - 1.0
    he4 = (x - 6.0) * x + 3.0
    he6 = ((x - 15.0) * x + 45.0) * x - 15.0
    he8 = (((x - 28.0) * x + 210.0) * x - 420.0) * x + 105.0
    he10 = ((((x - 45.0) * x + 630.0) * x - 3150.0) * x + 4725.0) * x - 945.0
    total = 1.0 + h2 * (he2 / 6.0 + h2 * (he4 / 120.0 + h2 * (he6 / 5040.0 + h2 * (
        he8 / 362880.0 + h2 * (he10 / 39916800.0)))))
    return 2.0 * _INV_SQRT_2PI * math.exp(-0.5 * x) * h * total


def interval_mass(a: float, b: float) -> float:
    """``Phi(b) - Phi(a)`` for ``a <= b`` with relative accuracy, including ``b - a -> 0``."""
    w = b - a
    m = 0.5 * (a + b)
    if w * max(1.0, abs(m)) < SERIES_WIDTH:
        return _interval_series(m, 0.5 * w)
    if a >= 0.0:
        return 0.5 * (math.erfc(a * _SQRT1_2) - math.erfc(b * _SQRT1_2))
    if b <= 0.0:
        return 0.5 * (math.erfc(-b * _SQRT1_2) - math.erfc(-a * _SQRT1_2))
    return 0.5 * (math.erf(b * _SQRT1_2) - math.erf(a * _SQRT1_2))


# ---------------------------------------------------------------------------------------------
# level recursion, scalar (fast path) and vectorised over rows
# ---------------------------------------------------------------------------------------------

# below TINY_DELTA the levels are their delta -> 0 limit P_k = delta p_k (laws.limit_levels):
# relative error O(delta), far below rounding, and no subnormal delta in the recursion


def _iter_levels(K: int, delta: float):
    """Yield ``(c_k, P_k)`` for ``k = 1..K`` on Python floats (``delta >= TINY_DELTA``).

    ``P_1 = erf(delta / (2 sqrt 2))``; then ``m = log1p(T) / delta`` is the midpoint of
    ``[c_k - delta, c_k]`` and ``P_k = [Phi(c_k) - Phi(c_k - delta)] - T Q(c_k)``: the interval
    mass by the Hermite series from ``(m, delta / 2)`` when the interval is short, otherwise
    ``P_k = Q(c_k - delta) - (1 + T) Q(c_k)`` from two ``erfc`` values.
    """
    half = 0.5 * delta
    p = math.erf(half * _SQRT1_2)
    yield half, p
    T = p
    erfc = math.erfc
    log1p = math.log1p
    inv_delta = 1.0 / delta
    short = delta < SERIES_WIDTH
    for _ in range(1, K):
        m = log1p(T) * inv_delta
        c = half + m
        if short and delta * m < SERIES_WIDTH:
            p_new = _interval_series(m, half) - T * 0.5 * erfc(c * _SQRT1_2)
        else:
            p_new = 0.5 * (erfc((c - delta) * _SQRT1_2) - (1.0 + T) * erfc(c * _SQRT1_2))
        if p_new < p:  # 0 <= P_k <= P_{k-1}; guards rounding only
            p = p_new if p_new > 0.0 else 0.0
        yield c, p
        T += p


def _rejection_scalar(K: int, delta: float) -> float:
    """``P_K`` on Python floats, the hot path of ``acceptance("dgrs", K, delta)``."""
    if delta < TINY_DELTA:
        return delta * limit_levels(K)[1][-1]
    p = 0.0
    for _, p in _iter_levels(K, delta):
        pass
    return p


def _validate_fast(K, delta) -> tuple[int, float]:
    """Validate ``K`` and ``delta``; plain ``int``/``float`` arguments take a quick path."""
    if type(K) is int and 1 <= K <= MAX_K and type(delta) is float and 0.0 <= delta < math.inf:
        return K, delta
    return check_K(K, maximum=MAX_K), check_delta(delta)


def _acceptance_scalar(K: int, delta: float) -> float:
    """Acceptance ``1 - P_K``, relatively accurate also when it is tiny.

    When RMC already accepts with probability ``>= 1/2`` (``delta <= 1.35``), D-GRS accepts at
    least as often and ``1 - P_K`` is accurate.  Otherwise the acceptance is summed over the
    steps: step ``k`` accepts mass ``P_{k-1} - P_k = int min(P_{k-1} phi, (f - S_{k-1} phi)_+)
    = [Phi(c_k - delta) - Phi(c_{k-1} - delta)] - S_{k-1} [Q(c_{k-1}) - Q(c_k)] + P_{k-1} Q(c_k)``
    (``c_0 = -inf``, ``S_0 = 0``), whose terms do not cancel catastrophically.
    """
    if delta < TINY_DELTA:
        return 1.0 - delta * limit_levels(K)[1][-1]
    half = 0.5 * delta
    rmc = math.erfc(half * _SQRT1_2)
    if K == 1:
        return rmc
    if rmc >= 0.5:
        return 1.0 - _rejection_scalar(K, delta)
    erfc = math.erfc
    log1p = math.log1p
    inv_delta = 1.0 / delta
    p = math.erf(half * _SQRT1_2)  # P_1
    lower_prev = 0.5 * rmc  # Phi(c_1 - delta) = Q(delta / 2)
    q_prev = 0.5 * rmc  # Q(c_1)
    total = rmc  # step 1 accepts Phi(c_1 - delta) + Q(c_1)
    T = p  # T_k = P_1 + ... + P_{k-1}
    S_prev = 1.0  # S_{k-1}
    P_prev = p  # P_{k-1}
    for _ in range(1, K):
        c = half + log1p(T) * inv_delta
        x = (c - delta) * _SQRT1_2
        lower = 0.5 * erfc(-x)  # Phi(c_k - delta)
        q = 0.5 * erfc(c * _SQRT1_2)  # Q(c_k)
        step = (lower - lower_prev) - S_prev * (q_prev - q) + P_prev * q
        if step > 0.0:
            total += step
        p_new = 0.5 * erfc(x) - (1.0 + T) * q  # P_k = Q(c_k - delta) - S_k Q(c_k)
        S_prev += P_prev
        if p_new < P_prev:
            P_prev = p_new if p_new > 0.0 else 0.0
        T += P_prev
        lower_prev, q_prev = lower, q
    return total if total < 1.0 else 1.0


def rejection_probability(K, delta) -> float:
    """Probability that D-GRS rejects all ``K`` children, ``P_K = Z_1 Z_2 ... Z_K``.

    Parameters
    ----------
    K : int
        Number of children (``>= 1``).
    delta : float
        Standardised mean displacement ``||mu_target - mu_draft|| / sigma`` (``>= 0``).

    Returns
    -------
    float
        ``P_K``, with full relative accuracy (a few ulp) also as ``delta -> 0``.

    Notes
    -----
    ``P_1 = erf(delta / (2 sqrt 2))`` and, for ``k >= 2``,
    ``P_k = [Phi(c_k) - Phi(c_k - delta)] - T_k Q(c_k)`` with ``T_k = P_1 + ... + P_{k-1}`` and
    ``c_k = delta / 2 + log1p(T_k) / delta``.  See ``proofs/P3-dgrs-closed-form.md``.
    """
    K, delta = _validate_fast(K, delta)
    return _rejection_scalar(K, delta)


def acceptance(K, delta) -> float:
    """Acceptance probability of D-GRS with ``K`` children, ``1 - P_K`` (closed form).

    ``1 - P_K`` when ``P_K <= 1/2``; otherwise (small acceptance, large ``delta``) the sum of
    the per-step accepted masses ``P_{k-1} - P_k``, each in a form without catastrophic
    cancellation, so that a tiny acceptance keeps its relative accuracy.  See
    :func:`rejection_probability` and ``proofs/P3-dgrs-closed-form.md``.
    """
    K, delta = _validate_fast(K, delta)
    return _acceptance_scalar(K, delta)


@dataclass(frozen=True)
class DGRSLevels:
    """Closed-form residual levels of D-GRS for one ``(K, delta)``.

    Index ``k = 0..K`` for ``a``, ``b``, ``c``, ``P``; index ``k - 1`` for ``Z_k`` (``k = 1..K``).

    Attributes
    ----------
    K : int
    delta : float
    a, b : ndarray, shape (K + 1,)
        ``r_k = a_k f - b_k phi`` on ``[c_k, inf)``; ``a_0 = 1``, ``b_0 = 0``.
    c : ndarray, shape (K + 1,)
        Left end of the support of ``r_k`` (the crossing ``a_k f = b_k phi``); ``c_0 = -inf``.
    Z : ndarray, shape (K,)
        Residual masses ``Z_k = int (r_{k-1} - phi)_+``.
    P : ndarray, shape (K + 1,)
        ``P_k = Z_1 ... Z_k``, probability that the first ``k`` children are rejected; ``P_0 = 1``.
    """

    K: int
    delta: float
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    Z: np.ndarray
    P: np.ndarray

    @property
    def acceptance(self) -> float:
        """Acceptance ``1 - P_K`` (relatively accurate also when tiny; see :func:`acceptance`)."""
        return _acceptance_scalar(self.K, self.delta)

    @property
    def rejection(self) -> float:
        """``P_K``."""
        return float(self.P[-1])


def levels(K, delta) -> DGRSLevels:
    """Closed-form coefficients ``a_k, b_k``, crossings ``c_k`` and masses ``Z_k`` of D-GRS.

    Parameters
    ----------
    K : int
        Number of children (``>= 1``).
    delta : float
        Standardised displacement, ``> 0`` (at ``delta = 0`` the first child is always accepted
        and the residuals ``r_k``, ``k >= 1``, are undefined).

    Returns
    -------
    DGRSLevels

    Notes
    -----
    ``a_k = 1 / P_k``, ``b_k = S_k / P_k``, ``c_k = delta / 2 + log(S_k) / delta`` with
    ``S_k = P_0 + ... + P_{k-1}``, and ``Z_k = P_k / P_{k-1}``; ``proofs/P3-dgrs-closed-form.md``.
    """
    K = check_K(K, maximum=MAX_K)
    delta = check_delta(delta)
    if delta == 0.0:
        raise ValueError("delta must be > 0 for the D-GRS residual levels (at delta = 0 the first "
                         "child is always accepted and no residual exists)")
    if delta < TINY_DELTA:
        ts, ps = limit_levels(K)
        cs, ps = [t + 0.5 * delta for t in ts], [delta * p for p in ps]
    else:
        cs, ps = (list(x) for x in zip(*_iter_levels(K, delta)))
    P = np.array([1.0] + ps)
    S = np.concatenate([[0.0], np.cumsum(P[:-1])])  # S_0 = 0, S_k = P_0 + ... + P_{k-1}
    with np.errstate(divide="ignore", over="ignore"):
        a = 1.0 / P
        b = S / P
    Z = np.zeros(P.size - 1)  # Z_k = P_k / P_{k-1}; 0 where the level above has underflowed
    nz = P[:-1] > 0
    Z[nz] = np.clip(P[1:][nz] / P[:-1][nz], 0.0, 1.0)
    c = np.array([-np.inf] + cs)
    return DGRSLevels(K=K, delta=delta, a=a, b=b, c=c, Z=Z, P=P)


def dgrs_residual_masses(K, delta) -> np.ndarray:
    """Residual masses ``Z_1..Z_K`` of D-GRS (``Z_k = P(reject child k | children < k rejected)``).

    Parameters
    ----------
    K : int
    delta : float
        ``>= 0``.  At ``delta = 0`` the continuous limit is returned: ``Z_1 = 0`` and, for
        ``k >= 2``, ``Z_k = p_k / p_{k-1}`` with ``p_k = lim P_k / delta``.

    Returns
    -------
    ndarray, shape (K,)

    Notes
    -----
    The rejection probability is ``prod_k Z_k = P_K``; ``proofs/P3-dgrs-closed-form.md``.
    """
    K = check_K(K, maximum=MAX_K)
    delta = check_delta(delta)
    if delta == 0.0:
        _, ps = limit_levels(K)
        z = [0.0] + [ps[k] / ps[k - 1] for k in range(1, K)]
        return np.array(z)
    return levels(K, delta).Z


# ---------------------------------------------------------------------------------------------
# vectorised over rows (each row its own delta): the helpers the verifiers use
# ---------------------------------------------------------------------------------------------

def _check_rows(delta, s, s_name: str):
    delta = check_delta(delta, allow_array=True)
    delta = np.atleast_1d(np.asarray(delta, dtype=np.float64))
    if delta.ndim != 1:
        raise ValueError(f"delta must be a scalar or have shape (n,), got shape {delta.shape}")
    s = np.asarray(s, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"{s_name} must have shape (n,), got shape {s.shape}")
    if delta.shape[0] == 1 and s.shape[0] != 1:
        delta = np.full(s.shape[0], delta[0])
    if s.shape != delta.shape:
        raise ValueError(f"{s_name} must have the same length as delta, got {s.shape} and {delta.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{s_name} must be finite (found NaN or infinity)")
    return delta, s


def batch_accept_prob(k, delta, s) -> np.ndarray:
    """D-GRS acceptance probability of child ``k`` (1-based), ``min(1, r_{k-1}(s) / phi(s))``.

    Parameters
    ----------
    k : int
        Position of the child in drafting order, ``1 <= k``.
    delta : array_like, shape (n,) or scalar
        Per-row standardised displacement (``>= 0``).
    s : array_like, shape (n,)
        Rank-1 coordinate of child ``k`` in each row.

    Returns
    -------
    ndarray, shape (n,)
        Values in ``[0, 1]``.

    Notes
    -----
    ``r_{k-1}(s) / phi(s) = (exp(delta (s - delta/2)) - S_{k-1}) / P_{k-1}`` on ``s >= c_{k-1}``
    (0 below), evaluated as ``(expm1(delta (s - delta/2)) - T_{k-1}) / P_{k-1}`` so that it keeps
    its accuracy when ``P_{k-1} = O(delta)``.  Rows with ``delta = 0`` use the continuous limit
    ``(s - t_{k-1}) / p_{k-1}`` (``k >= 2``) and 1 (``k = 1``).  ``proofs/P3-dgrs-closed-form.md``.
    """
    k = check_positive_int(k, "k")
    delta, s = _check_rows(delta, s, "s")
    return DGRSLaw(max(k - 1, 1), delta).accept(k, s)


def final_residual_sf(K, delta, s) -> np.ndarray:
    """Survival function ``int_s^inf r_K`` of the final D-GRS residual, per row.

    Notes
    -----
    ``P_K int_s^inf r_K = [Phi(s) - Phi(s - delta)] - T_K Q(s)`` for ``s >= c_K``;
    ``proofs/P3-dgrs-closed-form.md``.
    """
    K = check_K(K, maximum=MAX_K)
    delta, s = _check_rows(delta, s, "s")
    return DGRSLaw(K, delta).final_sf(s)


def batch_sample_final_residual(K, delta, u) -> np.ndarray:
    """Inverse-CDF draw from the final D-GRS residual ``r_K`` (after ``K`` rejections), per row.

    Parameters
    ----------
    K : int
        Number of children (all rejected).
    delta : array_like, shape (n,) or scalar
        Per-row displacement (``>= 0``; ``delta = 0`` rows use the continuous limit law).
    u : array_like, shape (n,)
        Uniforms in ``[0, 1)``; the returned ``s`` is non-decreasing in ``u``.

    Returns
    -------
    ndarray, shape (n,)
        ``s = F^{-1}(u)`` with ``F`` the CDF of ``r_K`` (support ``[c_K, inf)``), solved by
        ``nx.find_root`` (:meth:`rass_theory.exact.laws.DGRSLaw.sample`, the one recursion of
        both back ends) to a bracket of ``8 eps (1 + |s|)``.  The error is
        that of the survival function divided by the density; the density vanishes linearly at
        ``c_K``, so for ``u < 1e-8`` the error grows like ``1e-16 / sqrt(u)``.

    Notes
    -----
    Survival function ``1 - F(s) = ([Phi(s) - Phi(s - delta)] - T_K Q(s)) / P_K`` for
    ``s >= c_K``; density ``r_K(s) = phi(s) (expm1(delta (s - delta/2)) - T_K) / P_K``.
    ``proofs/P3-dgrs-closed-form.md``.
    """
    K = check_K(K, maximum=MAX_K)
    delta, u = _check_rows(delta, u, "u")
    if np.any((u < 0.0) | (u >= 1.0)):
        raise ValueError("u must lie in [0, 1)")
    return DGRSLaw(K, delta).sample(u)
