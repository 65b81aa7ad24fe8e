"""Order statistics of ``K`` iid standard normals, and rank mixtures of them.

The rank basis (ascending ranks, ``j = K - 1`` is the largest child)::

    B_j(s) = K!/(j! (K-1-j)!) phi(s) Phi(s)^j (1 - Phi(s))^(K-1-j),   j = 0..K-1,

is the density of the ``(j+1)``-th smallest of ``K`` iid ``N(0, 1)`` draws (its log and its
interval masses: :class:`rass_theory.exact.segments.RankSegment`).  A rank mixture ``g_w = sum_j w_j B_j`` has CDF

    G_w(s) = sum_{k=0}^{K} C_k binom(K, k) p^k (1 - p)^(K-k),   p = Phi(s),  C_k = sum_{j<k} w_j,

a Bernstein polynomial in ``p`` whose coefficients are the cumulative weights (proof P7).
Weights are used as ``w / sum(w)`` (see :func:`weight_parts`).  Everything is evaluated in log space (``log p`` and ``log(1 - p)`` from ``log_ndtr``) so that
neither tail underflows or loses digits.  The mixture kernels take per-row weights: ``weights``
of shape ``(n, K)`` and ``s`` of shape ``(n, m)``; row ``i`` of ``s`` uses row ``i`` of the
weights.  They loop over blocks of points (never over rows one at a time) to bound memory.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, log_ndtr


__all__ = [
    "log_binom",
    "weight_parts",
    "mixture_log_density_ratio",
    "mixture_density_excess",
    "mixture_log_cdf",
    "mixture_log_sf",
    "mixture_cdf_excess",
]

# s is clipped to this range inside the kernels: every quantity is then finite (0 * log 0 never
# occurs) and the values are exact limits to double precision (Phi(-1e10) underflows anyway).
_S_CLIP = 1e10
# Points per block in the mixture kernels: a block allocates (block, K + 1) doubles.
_BLOCK_ELEMENTS = 1 << 21


def log_binom(n, k):
    """``log binom(n, k)`` through ``gammaln`` (vectorised)."""
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def _log_p_q(s):
    s = np.clip(np.asarray(s, dtype=np.float64), -_S_CLIP, _S_CLIP)
    return s, log_ndtr(s), log_ndtr(-s)


# ---------------------------------------------------------------------------------------------
# Mixture kernels with per-row coefficients
# ---------------------------------------------------------------------------------------------


def _blocks(n_points: int, width: int):
    size = max(1, _BLOCK_ELEMENTS // max(1, width))
    for start in range(0, n_points, size):
        yield slice(start, min(n_points, start + size))


def _flatten(coef, s):
    """Pair per-row ``coef (nc, W)`` with points ``s (ns, m)``; ``nc``/``ns`` are 1 or ``n``.

    Returns the coefficients, ``s`` broadcast to ``(n, m)`` and, for each flattened point,
    the index of its coefficient row.
    """
    n = max(coef.shape[0], s.shape[0])
    s = np.broadcast_to(s, (n, s.shape[1]))
    if coef.shape[0] == 1:
        rows = np.zeros(s.size, dtype=np.intp)
    else:
        rows = np.repeat(np.arange(n), s.shape[1])
    return coef, s, rows


def _bernstein_blocks(coef, s, degree: int):
    """Set-up shared by the row-wise Bernstein sums over ``k = 0..degree``.

    Returns the flat output buffer, the output shape, ``k``, ``log binom(degree, k)`` and a lazy
    iterator of ``(block, coef rows, log p, log q)`` over memory-bounded blocks of the flattened
    points (evaluated inside the caller's loop, so under its ``np.errstate``).
    """
    coef, s, rows = _flatten(coef, s)
    s_flat = s.ravel()
    k = np.arange(degree + 1, dtype=np.float64)
    blocks = ((blk, coef[rows[blk]], *_log_p_q(s_flat[blk])[1:]) for blk in _blocks(s_flat.size, degree + 1))
    return np.empty(s_flat.size), s.shape, k, log_binom(degree, k), blocks


def _log_bernstein_apply(log_coef, s, degree: int):
    """Row-wise ``logsumexp_k(log_coef[row, k] + log binom(degree, k) + k log p + (degree-k) log q)``.

    ``log_coef`` has shape ``(nc, degree + 1)``; ``s`` has shape ``(ns, m)``.
    """
    out, shape, k, logc, blocks = _bernstein_blocks(log_coef, s, degree)
    with np.errstate(divide="ignore", invalid="ignore"):
        for blk, coef_rows, lp, lq in blocks:
            terms = coef_rows + logc + k * lp[:, None] + (degree - k) * lq[:, None]
            top = np.max(terms, axis=1)
            top_safe = np.where(np.isfinite(top), top, 0.0)
            val = np.log(np.sum(np.exp(terms - top_safe[:, None]), axis=1)) + top_safe
            out[blk] = np.where(np.isfinite(top), val, -np.inf)
    return out.reshape(shape)


def _signed_bernstein_apply(coef, s, degree: int):
    """Row-wise ``sum_k coef[row, k] binom(degree, k) p^k q^(degree-k)`` for signed ``coef``."""
    out, shape, k, logc, blocks = _bernstein_blocks(coef, s, degree)
    for blk, coef_rows, lp, lq in blocks:
        basis = np.exp(logc + k * lp[:, None] + (degree - k) * lq[:, None])
        out[blk] = np.einsum("ij,ij->i", coef_rows, basis)
    return out.reshape(shape)


def _prepare(weights, s):
    """Return weights ``(nw, K)``, points ``(ns, m)`` and the output shape.

    One weight vector ``(K,)`` applies to ``s`` of any shape; weights ``(n, K)`` need ``s`` of
    shape ``(n, m)`` or ``(1, m)`` (row ``i`` of ``s`` uses row ``i`` of the weights).
    """
    w = np.asarray(weights, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    if w.ndim == 1:
        return w[None, :], s.reshape(1, -1), s.shape
    if s.ndim != 2 or s.shape[0] not in (1, w.shape[0]):
        raise ValueError(f"s must have shape (n, m) with n = {w.shape[0]} rows of weights, got {s.shape}")
    return w, s, (max(w.shape[0], s.shape[0]), s.shape[1])


def weight_parts(w):
    """Normalised weights ``w / S`` and their deviations ``v = w/S - 1/K`` (rows), ``S = sum w``.

    Notes
    -----
    ``v`` is formed as ``((w - fl(1/K)) - mean(w - fl(1/K))) / S``: the first difference is
    exact (Sterbenz) and the mean removes both ``S - 1`` and the rounding of ``1/K``, so ``v``
    has *relative* accuracy ``~eps`` even when the weights are uniform up to ``1e-10``.  Uniform
    floating-point weights give ``v = 0`` exactly.  The normalised weights are the exact
    interpretation of any input whose sum is 1 only up to rounding.
    """
    w = np.asarray(w, dtype=np.float64)
    K = w.shape[-1]
    S = w.sum(axis=-1, keepdims=True)
    dev = w - 1.0 / K
    v = (dev - dev.mean(axis=-1, keepdims=True)) / S
    return w / S, v


def mixture_log_density_ratio(weights, s) -> np.ndarray:
    """``log(g_w(s) / phi(s)) = log sum_j w_j K binom(K-1, j) p^j q^(K-1-j)``.

    ``weights`` ``(n, K)`` or ``(K,)``; ``s`` ``(n, m)`` (or ``(m,)`` with one weight row).
    """
    w, s, shape = _prepare(weights, s)
    K = w.shape[1]
    w, _ = weight_parts(w)
    with np.errstate(divide="ignore"):
        logw = np.log(w) + np.log(K)
    return _log_bernstein_apply(logw, s, K - 1).reshape(shape)


def mixture_density_excess(weights, s) -> np.ndarray:
    """``g_w(s)/phi(s) - 1 = sum_j (w_j - 1/K) K binom(K-1, j) p^j q^(K-1-j)``.

    Notes
    -----
    Uses ``sum_j B_j = K phi`` (uniform weights give ``phi``), so the coefficients
    ``w_j - 1/K`` are small when the weights are nearly uniform and the result keeps
    relative accuracy (no ``1 + x - 1`` cancellation).
    """
    w, s, shape = _prepare(weights, s)
    K = w.shape[1]
    _, v = weight_parts(w)
    return _signed_bernstein_apply(v * K, s, K - 1).reshape(shape)


def _cumulative(w):
    w, _ = weight_parts(w)
    K = w.shape[1]
    lower = np.zeros((w.shape[0], K + 1))
    lower[:, 1:] = np.cumsum(w, axis=1)
    upper = np.zeros((w.shape[0], K + 1))
    upper[:, :K] = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]
    lower[:, K] = 1.0
    upper[:, 0] = 1.0
    return lower, upper


def mixture_log_cdf(weights, s) -> np.ndarray:
    """``log G_w(s)`` with ``G_w = sum_k C_k binom(K, k) p^k q^(K-k)``, ``C_k = sum_{j<k} w_j``."""
    w, s, shape = _prepare(weights, s)
    lower, _ = _cumulative(w)
    with np.errstate(divide="ignore"):
        return _log_bernstein_apply(np.log(lower), s, w.shape[1]).reshape(shape)


def mixture_log_sf(weights, s) -> np.ndarray:
    """``log(1 - G_w(s))`` with ``1 - G_w = sum_k (sum_{j>=k} w_j) binom(K, k) p^k q^(K-k)``."""
    w, s, shape = _prepare(weights, s)
    _, upper = _cumulative(w)
    with np.errstate(divide="ignore"):
        return _log_bernstein_apply(np.log(upper), s, w.shape[1]).reshape(shape)


def mixture_cdf_excess(weights, s) -> np.ndarray:
    """``G_w(s) - Phi(s) = sum_k (C_k - k/K) binom(K, k) p^k q^(K-k)``.

    Notes
    -----
    ``sum_k (k/K) binom(K, k) p^k q^(K-k) = p``; the signed coefficients
    ``C_k - k/K = sum_{j<k} (w_j - 1/K)`` are ``O(|w - 1/K|)`` so the result has relative
    accuracy for nearly uniform weights.
    """
    w, s, shape = _prepare(weights, s)
    K = w.shape[1]
    _, v = weight_parts(w)
    coef = np.zeros((w.shape[0], K + 1))
    coef[:, 1:] = np.cumsum(v, axis=1)
    coef[:, K] = 0.0
    return _signed_bernstein_apply(coef, s, K).reshape(shape)
