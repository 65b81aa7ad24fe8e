"""Warm starts by Newton's method on the optimality system of the weight program.

At an optimum ``w*`` with support ``S`` and crossings ``c_1 < ... < c_m`` of ``f`` and ``g_w*``
(``A = {f > g_w*}`` a union of intervals between consecutive crossings, signs alternating), the
KKT conditions of P4 read

    h(c_k) = f(c_k) - g_w(c_k) = 0                 (k = 1..m)
    b_j(A(c)) - nu = 0                             (j in S)
    sum_{j in S} w_j - 1 = 0,

a square smooth system in ``(w_S, c, nu)`` that no longer needs the crossings of the *current*
iterate to exist.  From a neighbouring solution (same support and sign pattern) Newton converges
quadratically; the result is then evaluated exactly and certified (P4.3) by the caller, so a
wrong guess about the structure can only cost time, never correctness.
proofs/P4-weight-program.md, P4.7.
"""
from __future__ import annotations

import numpy as np
from scipy.special import gammaln, log_ndtr

__all__ = ["kkt_newton"]


def _log_pmf(n: int, u_log: np.ndarray, v_log: np.ndarray) -> np.ndarray:
    """``log C(n, j) u^j (1-u)^(n-j)`` for ``j = 0..n``; rows = points."""
    j = np.arange(n + 1, dtype=np.float64)
    coef = gammaln(n + 1) - gammaln(j + 1) - gammaln(n - j + 1)
    return coef + j * u_log[:, None] + (n - j) * v_log[:, None]


def _ratio_and_slope(K: int, c: np.ndarray):
    """``b_j(c)/phi(c) = K pmf_{j,K-1}(Phi(c))`` and its derivative in ``c``."""
    lu, lv = log_ndtr(c), log_ndtr(-c)
    ratio = K * np.exp(_log_pmf(K - 1, lu, lv))
    if K == 1:
        return ratio, np.zeros_like(ratio)
    p2 = np.exp(_log_pmf(K - 2, lu, lv))                 # (m, K-1)
    lower = np.concatenate([np.zeros((c.size, 1)), p2], axis=1)   # pmf_{j-1, K-2}
    upper = np.concatenate([p2, np.zeros((c.size, 1))], axis=1)   # pmf_{j, K-2}
    phi = np.exp(-0.5 * c * c) / np.sqrt(2 * np.pi)
    slope = K * (K - 1) * phi[:, None] * (lower - upper)
    return ratio, slope


def kkt_newton(segment, delta: float, w0: np.ndarray, c0: np.ndarray, left_in_A: bool,
               *, max_iter: int = 12, tol: float = 1e-14):
    """See :func:`_kkt_newton`; floating-point warnings of diverging trial steps are silenced
    (a non-finite residual rejects the step)."""
    with np.errstate(all="ignore"):
        return _kkt_newton(segment, delta, w0, c0, left_in_A, max_iter=max_iter, tol=tol)


def _kkt_newton(segment, delta: float, w0: np.ndarray, c0: np.ndarray, left_in_A: bool,
                *, max_iter: int = 12, tol: float = 1e-14):
    """Newton on the KKT system from ``(w0, c0)``; ``None`` on failure, else ``(weights,
    crossings)``, the crossings being ``None`` unless the residual reached ``tol`` (then they
    are roots of ``(f - g_w) / phi`` to its rounding).

    Parameters
    ----------
    segment : RankSegment
        Supplies ``component_masses`` (closed-form interval masses).
    delta : float
    w0 : ndarray (K,)
        Start weights; their support is kept.
    c0 : ndarray (m,)
        Start crossings (sorted).
    left_in_A : bool
        Whether ``(-inf, c_1)`` belongs to ``A = {f > g}``.
    """
    K = segment.K
    S = np.nonzero(np.asarray(w0) > 0)[0]
    c = np.sort(np.asarray(c0, dtype=np.float64))
    m, s = c.size, S.size
    if m == 0 or s == 0:
        return None
    w = np.asarray(w0, dtype=np.float64)[S].copy()
    # sign pattern: interval k (between c_{k-1} and c_k) is in A iff (k even) == left_in_A
    ends = lambda cc: np.concatenate([[-np.inf], cc, [np.inf]])
    in_A = np.array([(k % 2 == 0) == left_in_A for k in range(m + 1)])
    # sigma_k = d b(A)/d c_k / b(c_k): +1 if c_k is a right end of an A-interval, -1 if a left end
    sigma = np.where(in_A[:-1], 1.0, -1.0)
    notS = np.setdiff1d(np.arange(K), S)  # ranks outside the support (weight 0)

    def residual(w, c, nu):
        e = ends(c)
        a, b = e[:-1][in_A], e[1:][in_A]
        masses = segment.component_masses(a, b).sum(axis=0)[S]
        ratio, slope = _ratio_and_slope(K, c)
        x = delta * c - 0.5 * delta * delta
        v = w - 1.0 / K
        # (f - g)/phi with the uniform part cancelled analytically (accurate for small delta)
        h = np.expm1(x) - ratio[:, S] @ v - (ratio[:, notS].sum(axis=1) * (-1.0 / K) if s < K else 0.0)
        return np.concatenate([h, masses - nu, [w.sum() - 1.0]]), ratio, slope, x

    # a consistent start for nu: the weighted mean of the masses
    current = residual(w, c, 0.0)
    nu = float(current[0][m:m + s] @ w)
    current[0][m:m + s] -= nu
    for _ in range(max_iter):
        r, ratio, slope, x = current
        if not np.all(np.isfinite(r)):
            return None
        norm = float(np.max(np.abs(r)))
        converged = norm <= tol
        if converged:
            break
        Jm = np.zeros((m + s + 1, s + m + 1))
        Jm[:m, :s] = -ratio[:, S]
        Jm[:m, s:s + m] = np.diag(delta * np.exp(x) - slope[:, S] @ w)
        phi = np.exp(-0.5 * c * c) / np.sqrt(2 * np.pi)
        Jm[m:m + s, s:s + m] = (sigma[None, :] * (ratio[:, S] * phi[:, None]).T)
        Jm[m:m + s, s + m] = -1.0
        Jm[m + s, :s] = 1.0
        try:
            step = np.linalg.solve(Jm, -r)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(step)):
            return None
        alpha = 1.0
        for _ in range(8):
            w_new = w + alpha * step[:s]
            c_new = c + alpha * step[s:s + m]
            if np.all(w_new >= -1e-14) and np.all(np.diff(c_new) > 0):
                trial = residual(np.clip(w_new, 0, None), c_new, nu + alpha * step[-1])
                if np.all(np.isfinite(trial[0])) and (np.max(np.abs(trial[0])) < norm or alpha < 0.02):
                    break
            alpha *= 0.5
        else:
            return None
        if np.any(w_new < -1e-14) or np.any(np.diff(c_new) <= 0):
            return None  # the support or the crossing pattern changes: not this structure
        # the accepted trial's residual is the next iterate's (same arguments)
        w, c, nu, current = np.clip(w_new, 0.0, None), c_new, nu + alpha * step[-1], trial
    else:
        converged = False
    out = np.zeros(K)
    out[S] = w
    if out.sum() <= 0:
        return None
    return out / out.sum(), (c if converged else None)
