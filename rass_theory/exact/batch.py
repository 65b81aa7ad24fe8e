"""Batch (per-row) exact laws in the rank-1 coordinate, for the verifiers.

Every node of a diffusion run has its own ``delta`` (and possibly its own rank weights), so
each function takes per-row parameters: ``weights`` ``(n, K)`` or one vector ``(K,)`` shared by
all rows, ``delta`` ``(n,)``, and ``s`` / ``u`` ``(n,)``.  Nothing loops over rows in Python
(loops run over blocks of points, over ``K`` or over root-finding iterations).

* :func:`selected_logpdf`, :func:`selected_cdf`, :func:`target_logpdf`: the laws of ``s``.
* :func:`sample_residual_generic`: inverse-CDF draw from ``(f - g)_+ / TV(f, g)`` for any
  selected law ``g`` given as vectorised callables; it finds the crossings of ``f`` and ``g``
  on a per-row grid refined to machine precision, computes the interval masses in closed form
  from the CDFs, picks an interval by its mass and inverts the residual CDF inside it.
* :func:`sample_residual`: the RASS case (``g = g_w``), drawn by the one law engine
  :func:`rass_theory.exact.laws.sample` (the grid scan below only when a ``spacing`` or
  ``half_width`` is given).
* :func:`sample_residual_rejection`: the cross-check sampler (propose from ``f``, accept with
  probability ``(1 - g/f)_+``).
* :func:`residual_intervals` / :func:`residual_intervals_generic`: the crossings and interval
  masses themselves (``TV = total``), shared with :mod:`rass_theory.exact.rass`.

Accuracy and guarantees (proof ``proofs/P7-selected-law.md``)
-------------------------------------------------------------
* Crossings: every sign change of ``h = log f - log g`` between consecutive points of the
  search grid over ``[-L, L] U [delta - L, delta + L]`` (``L = L(K)`` of
  :mod:`rass_theory.exact._window`: 11.5 for ``K <= 1515``, wider above) is refined by
  :func:`rass_theory.exact._roots.bracketed_roots` (scipy's vectorised Chandrupatla) to a
  bracket of width ``<= 8 eps (1 + |c|)``.  Beyond the grid the sign of ``h`` is taken from
  the end points; any crossing missed there changes the residual law by at most
  ``(K + 1) Phi(-L) <= 1e-27`` in total variation (``g <= K phi`` for any rule selecting one of
  ``K`` iid normals).  The generic functions, which do not know ``K``, use ``L = 11.5``: the
  bound holds for laws with ``g <= 1516 phi``.  Two crossings closer than the grid spacing, inside
  one cell, can be missed; the mass of ``f - g`` between them is third order in their distance.
  Spacing: generic ``2 L / (grid_size - 1) = 0.0575`` by default; RASS :func:`grid_spacing`
  ``min(0.1, 0.5 / sqrt(K))``, on one grid shared by all rows (the scaled rank basis is computed once
  and ``g_w/phi`` for all rows is one matrix product).  Pairs of crossings inside one cell are
  found when ``|h|`` has a discrete local minimum next to them whose distance to zero is within
  eight times the grid curvature (:func:`_dip_candidates`): a golden-section search of that
  cell splits it.  What can still be missed is a pair inside one cell where ``h`` has two or
  more critical points; ``tests/exact/test_batch.py::TestCrossingGrid`` checks against a grid
  twenty times finer (same crossings, TV to ``1e-12``).
* Masses: ``int_a^b (f - g) = [D(b) - D(a)] - [E(b) - E(a)]`` with ``D = Phi(. - delta) - Phi``
  (:func:`rass_theory.exact.normal.shift_difference`, relative accuracy) and
  ``E = G - Phi``; with the excess forms the masses keep relative accuracy ``~1e-14`` even at
  ``delta = 1e-8``.  Without them (generic callables) they are accurate to ``~1e-16`` absolute.
* Inverse CDF: ``R(x) = u TV`` solved on the chosen interval by the same root finder
  (bracket ``<= 8 eps (1 + |s|)``); measured agreement with the scalar
  :class:`rass_theory.exact.selected.ResidualLaw` CDF ``|R(s) - u| <= 1e-12``.  Infinite interval
  ends are clipped at the grid ends ``-/+ (L + 2)`` (so ``u = 1`` returns a finite point).
* ``delta = 0`` is allowed.  Where the residual mass is exactly zero (``g = f``), the residual
  law is undefined and never used by an exact verifier; these functions then return the
  inverse-CDF draw from ``f`` itself (``delta + Phi^{-1}(u)``), never NaN.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import ndtri

from rass_theory._validation import WEIGHTS_ATOL, as_generator, check_weights  # noqa: F401 - re-exported
from rass_theory.exact._roots import bracketed_roots
from rass_theory.exact._window import HALF_WIDTH as _HALF_WIDTH, half_width as _half_width
from rass_theory.exact.laws import grid_spacing  # noqa: F401 - the engine's one spacing, re-exported
from rass_theory.exact.normal import log_phi, shift_difference
from rass_theory.exact.order_stats import (
    weight_parts,
    log_rank_basis,
    mixture_cdf_excess,
    mixture_density_excess,
    mixture_log_cdf,
    mixture_log_density_ratio,
)

__all__ = [
    "selected_logpdf",
    "selected_cdf",
    "target_logpdf",
    "sample_residual",
    "sample_residual_generic",
    "sample_residual_rejection",
    "residual_intervals",
    "residual_intervals_generic",
    "ResidualIntervals",
    "grid_spacing",
]

DEFAULT_HALF_WIDTH = _HALF_WIDTH  # one window for the whole engine: rass_theory.exact._window
_EPS = np.finfo(np.float64).eps


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


def _check_weights_rows(weights, name: str = "weights") -> np.ndarray:
    """Rank weights ``(K,)`` or ``(n, K)``: :func:`rass_theory._validation.check_weights`, clipped only.

    Not renormalised: the kernels use ``w / sum(w)`` exactly (``order_stats.weight_parts``),
    which keeps the deviations from uniform weights to relative accuracy.
    """
    return check_weights(weights, name=name, n=-1, renormalise=False)


def _check_vector(value, name: str, n: int | None = None, *, allow_inf: bool = False) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers, got {value!r}") from exc
    if arr.ndim == 0 and n is not None:
        arr = np.full(n, float(arr))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (n,), got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} must have length n = {n}, got {arr.shape[0]}")
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not contain NaN")
    if not allow_inf and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found infinity)")
    return arr


def _check_delta(delta, n: int | None = None) -> np.ndarray:
    d = _check_vector(delta, "delta", n)
    if np.any(d < 0):
        raise ValueError(f"delta must be >= 0, got min {d.min()!r}")
    return d


def _check_batch(weights, delta, other, other_name: str, *, allow_inf: bool):
    w = _check_weights_rows(weights)
    o = np.asarray(other, dtype=np.float64) if not isinstance(other, np.ndarray) else other
    n = None
    for arr in (o, np.asarray(delta)):
        if np.ndim(arr) == 1:
            n = np.shape(arr)[0]
            break
    if n is None and w.ndim == 2:
        n = w.shape[0]
    if n is None:
        n = 1
    if w.ndim == 2 and w.shape[0] != n:
        raise ValueError(f"weights must have n = {n} rows to match {other_name} and delta, got {w.shape[0]}")
    d = _check_delta(delta, n)
    o = _check_vector(other, other_name, n, allow_inf=allow_inf)
    return w, d, o


# ---------------------------------------------------------------------------------------------
# laws of s
# ---------------------------------------------------------------------------------------------


def target_logpdf(delta, s) -> np.ndarray:
    """``log f(s) = log phi(s - delta)`` per row.

    Parameters
    ----------
    delta : array_like, shape (n,)
        Standardised displacements, ``>= 0``.
    s : array_like, shape (n,)
        Points (``+-inf`` allowed, giving ``-inf``).
    """
    s = _check_vector(s, "s", None, allow_inf=True)
    d = _check_delta(delta, s.shape[0])
    return log_phi(s - d)


def selected_logpdf(weights, delta, s) -> np.ndarray:
    """``log g_w(s)`` per row, ``g_w = sum_j w_j B_j`` (rank mixture of order statistics).

    Parameters
    ----------
    weights : array_like, shape (n, K) or (K,)
        Rank weights on the simplex (ascending ranks).
    delta : array_like, shape (n,)
        Per-row displacement (validated; ``g_w`` does not depend on it).
    s : array_like, shape (n,)

    Notes
    -----
    ``log g_w(s) = log phi(s) + logsumexp_j [log w_j + log K + log binom(K-1, j)
    + j log Phi(s) + (K-1-j) log Phi(-s)]`` (proof P7).
    """
    w, _, s = _check_batch(weights, delta, s, "s", allow_inf=True)
    ratio = mixture_log_density_ratio(w, s[:, None])[:, 0]
    return log_phi(np.clip(s, -1e10, 1e10)) + ratio


def selected_cdf(weights, delta, s) -> np.ndarray:
    """``G_w(s)`` per row: a Bernstein polynomial in ``Phi(s)`` with cumulative-weight coefficients.

    Notes
    -----
    ``G_w(s) = sum_{k=0}^{K} C_k binom(K, k) p^k (1-p)^(K-k)``, ``p = Phi(s)``,
    ``C_k = sum_{j<k} w_j`` (proof P7), evaluated in log space (relative accuracy in the
    lower tail; in the upper tail ``1 - G_w`` is available from
    :func:`rass_theory.exact.order_stats.mixture_log_sf`).
    """
    w, _, s = _check_batch(weights, delta, s, "s", allow_inf=True)
    return np.exp(mixture_log_cdf(w, s[:, None]))[:, 0]


# ---------------------------------------------------------------------------------------------
# generic residual machinery
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResidualIntervals:
    """Where ``f > g`` and how much mass ``(f - g)_+`` puts there, per row.

    Attributes
    ----------
    bounds : ndarray, shape (n, C + 2)
        ``-inf, c_1, ..., c_r, +inf, +inf, ...``: the crossings of row ``i`` (``r = n_crossings[i]``)
        padded with ``+inf``.  Interval ``k`` is ``[bounds[:, k], bounds[:, k + 1]]``.
    positive : ndarray of bool, shape (n, C + 1)
        Whether ``f > g`` on interval ``k`` (false on padding intervals).
    masses : ndarray, shape (n, C + 1)
        ``int (f - g)`` over each positive interval (0 elsewhere).
    total : ndarray, shape (n,)
        Residual mass ``TV(f, g) = sum of masses``.
    n_crossings : ndarray of int, shape (n,)
    grid_lo, grid_hi : ndarray, shape (n,)
        Ends of the search grid (infinite interval ends are clipped there when inverting).
    """

    bounds: np.ndarray
    positive: np.ndarray
    masses: np.ndarray
    total: np.ndarray
    n_crossings: np.ndarray
    grid_lo: np.ndarray
    grid_hi: np.ndarray

    @property
    def crossings(self) -> np.ndarray:
        """Crossings ``(n, C)`` padded with NaN."""
        c = self.bounds[:, 1:-1].copy()
        cols = np.arange(c.shape[1])
        c[cols[None, :] >= self.n_crossings[:, None]] = np.nan
        return c


def _grid(delta, half_width, grid_size):
    t = np.linspace(-half_width, half_width, grid_size)
    pts = np.concatenate([np.broadcast_to(t, (delta.shape[0], grid_size)), delta[:, None] + t[None, :]], axis=1)
    return np.sort(pts, axis=1)


def _refine_roots(h_restrict, n, rows, slot, a, b):
    """Refine the brackets ``[a, b]`` (entries ``(rows, slot)`` of padded ``(n, C)`` arrays).

    ``h_restrict(idx)`` returns ``h`` for the rows ``idx`` (a callable on ``(len(idx), C)``
    arrays, ``None``: all rows).  Each call of the root finder evaluates only the rows with an
    unconverged bracket.  Returns the roots, a flat array aligned with ``rows``.
    """
    if rows.size == 0:
        return np.zeros(0)
    C = a.shape[1]
    base = 0.5 * (a + b)

    def h_at(x, k):
        shape = x.shape
        x, k = x.reshape(-1), k.reshape(-1).astype(np.intp)
        r, c = np.divmod(k, C)
        ur, inv = np.unique(r, return_inverse=True)
        X = base[ur]
        X[inv, c] = x
        return h_restrict(None if ur.size == n else ur)(X)[inv, c].reshape(shape)

    flat = rows * C + slot
    return bracketed_roots(h_at, a[rows, slot], b[rows, slot], args=(flat,))


def _brackets_from_signs(rows, a_vals, b_vals, fa_vals, fb_vals, n):
    """Assemble padded bracket arrays ``(n, C)`` from sign changes found on a grid.

    ``rows`` (non-decreasing) gives the row of each change; ``a_vals``/``b_vals`` the grid
    points on either side and ``fa_vals``/``fb_vals`` the values of ``h`` there.
    """
    counts = np.bincount(rows, minlength=n)
    C = int(counts.max()) if n and rows.size else 0
    slot = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    a = np.zeros((n, C))
    b = np.zeros((n, C))
    fa = np.ones((n, C))
    fb = np.ones((n, C))  # padded brackets: a = b and no sign change, never refined
    a[rows, slot] = a_vals
    b[rows, slot] = b_vals
    fa[rows, slot] = fa_vals
    fb[rows, slot] = fb_vals
    return a, b, fa, fb, counts, slot


def _dip_candidates(h):
    """Grid points where ``|h|`` has a discrete local minimum that may hide a pair of crossings.

    ``h`` has shape ``(R, m)``.  Point ``k`` qualifies when ``h`` has one sign at ``k - 1, k, k + 1``,
    ``sigma h_k < sigma h_{k-1}``, ``sigma h_k <= sigma h_{k+1}`` (``sigma`` the sign) and
    ``sigma h_k <= h_{k-1} - 2 h_k + h_{k+1}`` (scaled by ``sigma``): the distance to zero is within
    eight times the largest depth a parabola through the three values can reach below ``h_k``.
    Returns row and column indices.
    """
    if h.shape[1] < 3:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    pos = h > 0
    ah = np.abs(h)  # sigma h, given one sign at the three points
    gl, gm, gr = ah[:, :-2], ah[:, 1:-1], ah[:, 2:]
    with np.errstate(invalid="ignore"):  # inf - inf where g underflows: not a candidate
        cand = (gm < gl) & (gm <= gr)
        cand &= gm <= gl - 2.0 * gm + gr
    cand &= (pos[:, :-2] == pos[:, 1:-1]) & (pos[:, 1:-1] == pos[:, 2:])
    r, c = np.nonzero(cand)
    return r, c + 1


_GOLD = 0.5 * (np.sqrt(5.0) - 1.0)


def _split_dips(h_restrict, n, rows, lo, hi, h_lo, h_hi, *, n_iter=48):
    """Golden-section search of ``sigma h`` on candidate intervals ``[lo, hi]`` (one sign at both ends).

    Where a point of the opposite sign is found (a pair of crossings that the grid stepped over),
    returns the two new brackets ``[lo, x]`` and ``[x, hi]`` as flat arrays
    ``(rows, a, b, fa, fb)``.  After ``n_iter`` iterations the search interval is
    ``0.618^48 ~ 1e-10`` of the cell: pairs of crossings closer than that stay unresolved, and the
    mass of ``f - g`` between them is below ``~1e-30``.
    """
    empty = (np.zeros(0, np.intp), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
    if rows.size == 0:
        return empty
    order = np.argsort(rows, kind="stable")
    rows, lo, hi, h_lo, h_hi = rows[order], lo[order], hi[order], h_lo[order], h_hi[order]
    urows, counts = np.unique(rows, return_counts=True)
    C = int(counts.max())
    slot = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
    ridx = np.repeat(np.arange(urows.size), counts)
    A = np.zeros((urows.size, C))
    B = np.zeros((urows.size, C))
    A[ridx, slot] = lo
    B[ridx, slot] = hi
    sig = np.ones((urows.size, C))
    sig[ridx, slot] = np.where(h_lo > 0, 1.0, -1.0)
    hfun = h_restrict(urows) if urows.size < n else h_restrict(None)

    def g(x):
        return sig * hfun(x)

    x1 = B - _GOLD * (B - A)
    x2 = A + _GOLD * (B - A)
    g1, g2 = g(x1), g(x2)
    best_x = np.where(g1 <= g2, x1, x2)
    best_g = np.minimum(g1, g2)
    for _ in range(n_iter):
        found = best_g < 0
        left = g1 <= g2  # minimum in [A, x2]
        B = np.where(left, x2, B)
        A = np.where(left, A, x1)
        x2n = np.where(left, x1, A + _GOLD * (B - A))
        x1n = np.where(left, B - _GOLD * (B - A), x2)
        g_keep = np.where(left, g1, g2)
        x_new = np.where(left, x1n, x2n)
        g_new = g(x_new)
        g1 = np.where(left, g_new, g_keep)
        g2 = np.where(left, g_keep, g_new)
        x1, x2 = x1n, x2n
        better = (g_new < best_g) & ~found
        best_x = np.where(better, x_new, best_x)
        best_g = np.where(better, g_new, best_g)
        if np.all(best_g[ridx, slot] < 0):
            break
    hit = best_g[ridx, slot] < 0
    if not np.any(hit):
        return empty
    xs = best_x[ridx, slot][hit]
    hx = (sig[ridx, slot] * best_g[ridx, slot])[hit]
    r = rows[hit]
    return (np.concatenate([r, r]), np.concatenate([lo[hit], xs]), np.concatenate([xs, hi[hit]]),
            np.concatenate([h_lo[hit], hx]), np.concatenate([hx, h_hi[hit]]))


def _assemble_intervals(restrict, delta, changes, dips, first_positive, grid_lo, grid_hi):
    """Split hidden crossing pairs, refine all brackets, then the closed-form interval masses.

    ``restrict(idx)`` returns ``(log_ratio, cdf_excess)`` for the rows ``idx`` (``None``: all).
    ``changes = (rows, a, b, fa, fb)`` are the grid cells where ``h`` changes sign;
    ``dips = (rows, lo, hi, h_lo, h_hi)`` the candidate cells of :func:`_dip_candidates`.
    """
    log_ratio, cdf_excess = restrict(None)
    n = delta.shape[0]

    def h_restrict(idx):
        lr, _ = restrict(idx)
        return _h_function(lr, delta if idx is None else delta[idx])

    extra = _split_dips(h_restrict, n, *dips)
    rows, a_v, b_v, fa_v, fb_v = (np.concatenate([x, y]) for x, y in zip(changes, extra))
    order = np.lexsort((a_v, rows))
    brackets = _brackets_from_signs(rows[order], a_v[order], b_v[order], fa_v[order], fb_v[order], n)
    a, b, fa, fb, counts, slot = brackets
    C = a.shape[1]
    rows = np.repeat(np.arange(n), counts)
    bounds = np.full((n, C + 2), np.inf)
    bounds[:, 0] = -np.inf
    if C > 0:
        bounds[rows, slot + 1] = _refine_roots(h_restrict, n, rows, slot, a, b)
    k = np.arange(C + 1)
    positive = (first_positive[:, None] ^ (k[None, :] % 2 == 1)) & (k[None, :] <= counts[:, None])
    finite = np.isfinite(bounds)
    xb = np.where(finite, bounds, 0.0)
    D = np.where(finite, shift_difference(xb, delta[:, None]), 0.0)
    E = np.where(finite, cdf_excess(xb), 0.0)
    masses = (D[:, 1:] - D[:, :-1]) - (E[:, 1:] - E[:, :-1])
    masses = np.where(positive, np.maximum(masses, 0.0), 0.0)
    total = masses.sum(axis=1)
    return ResidualIntervals(bounds, positive, masses, total, counts, grid_lo, grid_hi)


def _h_function(log_ratio, delta):
    def h_fn(x):
        return delta[:, None] * x - 0.5 * delta[:, None] ** 2 - log_ratio(x)

    return h_fn


def residual_intervals_generic(
    log_ratio: Callable[[np.ndarray], np.ndarray],
    cdf_excess: Callable[[np.ndarray], np.ndarray],
    delta,
    *,
    half_width: float = DEFAULT_HALF_WIDTH,
    grid_size: int = 401,
) -> ResidualIntervals:
    """Crossings of ``f`` and ``g`` and the masses of ``(f - g)_+``, per row.

    Parameters
    ----------
    log_ratio : callable
        ``log(g(s)/phi(s))`` for ``s`` of shape ``(n, m)`` (row ``i`` uses row ``i``'s law).
    cdf_excess : callable
        ``G(s) - Phi(s)`` for ``s`` of shape ``(n, m)``; must tend to 0 at ``+-inf`` (it is only
        evaluated at finite points).
    delta : ndarray, shape (n,)
    half_width, grid_size : float, int
        Search grid: ``grid_size`` points on each of ``[-L, L]`` and ``[delta - L, delta + L]``.

    Notes
    -----
    ``h(s) = log f(s) - log g(s) = delta s - delta^2/2 - log_ratio(s)``; its sign changes on
    the grid are refined by :func:`_refine_roots`.  On ``[a, b]`` with ``f > g`` the mass is
    ``[D(b) - D(a)] - [E(b) - E(a)]``, ``D(x) = Phi(x - delta) - Phi(x)``, ``E = cdf_excess``
    (both vanish at ``+-inf``).  See the module docstring for the guarantees.
    """
    delta = np.asarray(delta, dtype=np.float64)
    n = delta.shape[0]
    grid = _grid(delta, half_width, grid_size)
    hg = _h_function(log_ratio, delta)(grid)
    hg = np.where(np.isnan(hg), 0.0, hg)
    pos = hg > 0
    rows, cols = np.nonzero(pos[:, 1:] != pos[:, :-1])
    changes = (rows, grid[rows, cols], grid[rows, cols + 1], hg[rows, cols], hg[rows, cols + 1])
    dr, dk = _dip_candidates(hg)
    dips = (dr, grid[dr, dk - 1], grid[dr, dk + 1], hg[dr, dk - 1], hg[dr, dk + 1])
    lr_r, ce_r = _full_rows(log_ratio, n), _full_rows(cdf_excess, n)
    return _assemble_intervals(lambda idx: (lr_r(idx), ce_r(idx)), delta, changes, dips, pos[:, 0],
                               grid[:, 0], grid[:, -1])


def _full_rows(fn, n):
    """Restrict a callable on full ``(n, m)`` arrays to a subset of rows.

    The returned factory maps row indices ``idx`` to a callable on ``(len(idx), m)`` arrays; the
    rows not in ``idx`` are evaluated at 0 and discarded.
    """

    def restrict(idx):
        if idx is None or idx.size == n:
            return fn

        def sub(x):
            full = np.zeros((n, x.shape[1]))
            full[idx] = x
            return fn(full)[idx]

        return sub

    return restrict


def _invert_residual(ri: ResidualIntervals, restrict, delta, u):
    """Inverse CDF of ``(f - g)_+ / total`` at ``u`` per row.

    ``restrict(idx)`` returns the pair ``(log_ratio, cdf_excess)`` for the rows ``idx``.  The
    interval is chosen by its cumulative mass; inside it ``R(x) - t`` (increasing, ``R' = f - g``)
    is solved by :func:`rass_theory.exact._roots.bracketed_roots` on the interval itself.
    """
    n = delta.shape[0]
    ok = ri.total > 0
    rows = np.arange(n)
    masses = ri.masses
    cum = np.cumsum(masses, axis=1)
    target = u * ri.total
    k = (cum <= target[:, None]).sum(axis=1)
    has = masses > 0
    last_pos = masses.shape[1] - 1 - np.argmax(has[:, ::-1], axis=1)
    first_pos = np.argmax(has, axis=1)
    k = np.maximum(np.minimum(k, last_pos), first_pos)  # never a zero-mass interval
    before = np.where(k > 0, cum[rows, np.maximum(k - 1, 0)], 0.0)
    t = np.clip(target - before, 0.0, masses[rows, k])
    lo = ri.bounds[rows, k]
    hi = ri.bounds[rows, k + 1]
    lo = np.where(np.isfinite(lo), lo, ri.grid_lo - 2.0)
    hi = np.where(np.isfinite(hi), hi, ri.grid_hi + 2.0)
    # rows without residual mass (g = f): the residual is never used; draw from f itself
    out = delta + ndtri(np.clip(u, 1e-300, 1.0 - _EPS / 2))
    idx = np.nonzero(ok)[0]
    if idx.size == 0:
        return out
    lo, hi, t, d = np.minimum(lo[idx], hi[idx]), hi[idx], t[idx], delta[idx]
    E_lo = restrict(idx)[1](lo[:, None])[:, 0]
    D_lo = shift_difference(lo, d)

    def excess(x, j):
        j = j.astype(np.intp)
        ce = restrict(idx[j])[1] if j.size < idx.size else restrict(idx)[1]
        E = ce(x.reshape(-1, 1))[:, 0].reshape(x.shape)
        return (shift_difference(x, d[j]) - D_lo[j]) - (E - E_lo[j]) - t[j]

    out[idx] = bracketed_roots(excess, lo, hi, args=(np.arange(idx.size),))
    return out


def sample_residual_generic(
    log_g: Callable[[np.ndarray], np.ndarray],
    cdf_g: Callable[[np.ndarray], np.ndarray],
    delta,
    u,
    *,
    log_ratio: Callable[[np.ndarray], np.ndarray] | None = None,
    cdf_excess: Callable[[np.ndarray], np.ndarray] | None = None,
    half_width: float = DEFAULT_HALF_WIDTH,
    grid_size: int = 401,
) -> np.ndarray:
    """Inverse-CDF draw from the residual ``(f - g)_+ / TV(f, g)`` of any selected law ``g``.

    Parameters
    ----------
    log_g, cdf_g : callable
        Vectorised ``log g(s)`` and ``G(s)``: ``s`` of shape ``(n, m)`` to ``(n, m)``, row ``i``
        using row ``i``'s law.  Only finite ``s`` are passed.
    delta : array_like, shape (n,)
        Target mean of ``s`` per row (``f = phi(. - delta)``), ``>= 0``.
    u : array_like, shape (n,)
        Uniforms in ``[0, 1]``; the draw is monotone in ``u`` within a row.
    log_ratio, cdf_excess : callable, optional
        ``log(g/phi)`` and ``G - Phi`` in forms accurate when ``g`` is close to ``phi``;
        default ``log_g - log phi`` and ``cdf_g - Phi`` (absolute accuracy only).
    half_width, grid_size : float, int
        Crossing-search grid (see the module docstring).

    Returns
    -------
    ndarray, shape (n,)

    Notes
    -----
    ``R(x) = int_a^x (f - g) = [D(x) - D(a)] - [E(x) - E(a)]`` on the chosen interval
    ``[a, b]`` is solved for ``R(x) = u TV - (mass before a)`` by safeguarded Newton
    (``R' = f - g > 0`` inside).  Proof P7; accuracy in the module docstring.  Rows with zero
    residual mass return ``delta + Phi^{-1}(u)``.
    """
    delta = _check_delta(delta)
    u = _check_vector(u, "u", delta.shape[0])
    if np.any((u < 0) | (u > 1)):
        raise ValueError("u must lie in [0, 1]")
    if not callable(log_g) or not callable(cdf_g):
        raise TypeError("log_g and cdf_g must be callables mapping s (n, m) to (n, m)")
    if log_ratio is None:
        def log_ratio(x):
            return log_g(x) - log_phi(x)
    if cdf_excess is None:
        from scipy.special import ndtr

        def cdf_excess(x):
            return cdf_g(x) - ndtr(x)
    ri = residual_intervals_generic(log_ratio, cdf_excess, delta, half_width=half_width, grid_size=grid_size)
    n = delta.shape[0]
    lr_r, ce_r = _full_rows(log_ratio, n), _full_rows(cdf_excess, n)
    return _invert_residual(ri, lambda idx: (lr_r(idx), ce_r(idx)), delta, u)


# ---------------------------------------------------------------------------------------------
# RASS wrappers
# ---------------------------------------------------------------------------------------------


def _rass_callables(w):
    """``log(g_w/phi)`` and ``G_w - Phi`` for per-row weights (``(n, K)`` or one ``(K,)``).

    ``log(g_w/phi)`` is ``log1p`` of the excess ``g_w/phi - 1`` (relative accuracy when ``g_w``
    is close to ``phi``) except where ``g_w < phi/2``, where the log-space sum is used.
    """

    def log_ratio(x):
        ex = mixture_density_excess(w, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.log1p(np.maximum(ex, -1.0))
        need = ex < -0.5
        if np.any(need):
            if w.ndim == 1:
                lr[need] = mixture_log_density_ratio(w, x[need])
            else:
                r, c = np.nonzero(need)
                xb = np.broadcast_to(x, need.shape)
                lr[r, c] = mixture_log_density_ratio(w[r], xb[r, c][:, None])[:, 0]
        return lr

    def cdf_excess(x):
        return mixture_cdf_excess(w, x)

    return log_ratio, cdf_excess


def _rass_restrict(w):
    """Row-restricted RASS callables: ``idx -> (log_ratio, cdf_excess)`` (``None``: all rows)."""

    def restrict(idx):
        return _rass_callables(w if (w.ndim == 1 or idx is None) else w[idx])

    return restrict


def _rass_brackets(w, delta, half_width, spacing):
    """Sign scan of ``h = log f - log g_w`` on one grid shared by all rows.

    The scaled rank basis ``B_j(s)/(phi(s) M(s))`` (``M`` its largest entry) is computed once on
    the grid, so ``g_w/phi`` for every row is one matrix product.
    """
    n = delta.shape[0]
    K = w.shape[-1]
    w, v = weight_parts(w)
    lo = -half_width
    hi = max(half_width, float(delta.max()) + half_width) if n else half_width
    d_lo = float(delta.min()) - half_width if n else lo
    if d_lo > half_width + spacing:
        # two windows [-L, L] and [min delta - L, max delta + L]; between them both densities
        # are below Phi(-L) and only one bracketing cell is kept
        s = np.concatenate([np.linspace(lo, half_width, int(np.ceil(2 * half_width / spacing)) + 1),
                            np.linspace(d_lo, hi, int(np.ceil((hi - d_lo) / spacing)) + 1)])
    else:
        s = np.linspace(lo, hi, int(np.ceil((hi - lo) / spacing)) + 1)
    m = s.shape[0]
    col_block = max(1, (1 << 22) // K)
    row_chunk = max(1, (1 << 22) // m)

    def basis_block(sl):
        """Scaled basis ``B_j/(phi M)`` on grid points ``sl`` and its log-scale ``log M``."""
        bl = log_rank_basis(K, s[sl]) - log_phi(s[sl])[:, None]
        sc = bl.max(axis=1)
        return np.exp(bl - sc[:, None]), sc

    rows_all, cols_all, h_lo, h_hi = [np.zeros(0, np.intp)], [np.zeros(0, np.intp)], [np.zeros(0)], [np.zeros(0)]
    dip_rows, dip_cols, dip_lo, dip_hi = [np.zeros(0, np.intp)], [np.zeros(0, np.intp)], [np.zeros(0)], [np.zeros(0)]
    first_positive = np.empty(n, dtype=bool)
    shared = w.ndim == 1
    blocks = [slice(c0, min(m, c0 + col_block)) for c0 in range(0, m, col_block)]

    def log_ratio_block(bb, sc, wr, vr):
        """``log(g/phi)``: ``log1p`` of the excess ``e^sc (bb v)`` (exact 0 for uniform weights)
        where ``g > phi/2``, else ``log(bb w) + sc`` (evaluated on those entries only)."""
        sc = np.broadcast_to(sc, (1, bb.shape[0]))[0]
        with np.errstate(over="ignore", invalid="ignore"):
            ex = np.exp(sc) * (vr @ bb.T)
        need = ~(ex > -0.5)
        lr = np.log1p(np.where(need, 0.0, ex))
        n_need = np.count_nonzero(need)
        if n_need > need.size // 16:  # many entries: one dense product is cheaper than a gather
            with np.errstate(divide="ignore"):
                lr = np.where(need, np.log(wr @ bb.T) + sc, lr)
        elif n_need:
            r, c = np.nonzero(need)
            wrr = wr[r] if wr.shape[0] > 1 else np.broadcast_to(wr, (r.size, wr.shape[1]))
            with np.errstate(divide="ignore"):
                lr[r, c] = np.log(np.einsum("ik,ik->i", wrr, bb[c])) + sc[c]
        return lr

    if shared:
        lr_shared = np.empty(m)
        for sl in blocks:
            bb, sc = basis_block(sl)
            lr_shared[sl] = log_ratio_block(bb, sc, w[None, :], v[None, :])[0]
    elif len(blocks) == 1:
        cached = basis_block(blocks[0])
    for start in range(0, n, row_chunk):
        stop = min(n, start + row_chunk)
        d = delta[start:stop, None]
        if shared:
            lr = lr_shared[None, :]
        else:
            lr = np.empty((stop - start, m))
            for sl in blocks:
                bb, sc = cached if len(blocks) == 1 else basis_block(sl)
                lr[:, sl] = log_ratio_block(bb, sc[None, :], w[start:stop], v[start:stop])
        h = d * s[None, :] - 0.5 * d * d - lr
        pos = h > 0
        first_positive[start:stop] = pos[:, 0]
        r, c = np.nonzero(pos[:, 1:] != pos[:, :-1])
        rows_all.append(r + start)
        cols_all.append(c)
        h_lo.append(h[r, c])
        h_hi.append(h[r, c + 1])
        dr, dk = _dip_candidates(h)
        dip_rows.append(dr + start)
        dip_cols.append(dk)
        dip_lo.append(h[dr, dk - 1])
        dip_hi.append(h[dr, dk + 1])
    rows = np.concatenate(rows_all)
    cols = np.concatenate(cols_all)
    changes = (rows, s[cols], s[cols + 1], np.concatenate(h_lo), np.concatenate(h_hi))
    dr = np.concatenate(dip_rows)
    dk = np.concatenate(dip_cols)
    dips = (dr, s[dk - 1], s[dk + 1], np.concatenate(dip_lo), np.concatenate(dip_hi))
    return changes, dips, first_positive, np.full(n, lo), np.full(n, hi)


def residual_intervals(weights, delta, *, half_width: float | None = None, spacing: float | None = None):
    """Crossings and ``(f - g_w)_+`` masses per row for RASS; ``.total`` is ``TV(g_w, f)``.

    Parameters
    ----------
    weights : array_like, shape (n, K) or (K,)
    delta : array_like, shape (n,)
    half_width : float, optional
        The search grid covers ``[-half_width, max(delta) + half_width]``; default
        :func:`rass_theory.exact._window.half_width` of ``K`` (truncation error
        ``(K + 1) Phi(-L) <= 1e-27`` for every ``K``).
    spacing : float, optional
        Grid spacing; default :func:`grid_spacing` of ``K``.

    Notes
    -----
    As :func:`residual_intervals_generic` (same refinement and closed-form masses), with the
    sign scan done on one grid shared by all rows (:func:`_rass_brackets`).
    """
    w = _check_weights_rows(weights)
    if np.ndim(delta) == 0 and w.ndim == 2:
        delta = np.full(w.shape[0], delta)
    d = _check_delta(delta)
    if w.ndim == 2 and w.shape[0] != d.shape[0]:
        raise ValueError(f"weights must have n = {d.shape[0]} rows to match delta, got {w.shape[0]}")
    return _rass_intervals(w, d, half_width, spacing)[0]


def _rass_intervals(w, d, half_width, spacing):
    if half_width is None:
        half_width = _half_width(w.shape[-1])
    if spacing is None:
        spacing = grid_spacing(w.shape[-1])
    log_ratio, cdf_excess = _rass_callables(w)
    changes, dips, first_positive, glo, ghi = _rass_brackets(w, d, half_width, spacing)
    restrict = _rass_restrict(w)
    return _assemble_intervals(restrict, d, changes, dips, first_positive, glo, ghi), log_ratio, cdf_excess


def sample_residual(weights, delta, u, *, half_width: float | None = None, spacing: float | None = None):
    """Inverse-CDF draw from the RASS residual ``(f - g_w)_+ / TV(g_w, f)``, per row.

    Parameters
    ----------
    weights : array_like, shape (n, K) or (K,)
    delta : array_like, shape (n,)
    u : array_like, shape (n,)
        Uniforms in ``[0, 1]``.

    Returns
    -------
    ndarray, shape (n,)

    Notes
    -----
    The RASS case of :func:`sample_residual_generic`, with ``log(g_w/phi) = log1p(sum_j
    (w_j - 1/K) K binom(K-1, j) p^j q^(K-1-j))`` and ``G_w - Phi = sum_k (C_k - k/K)
    binom(K, k) p^k q^(K-k)`` (proof P7), which keep relative accuracy for nearly uniform
    weights at small ``delta``, and the sign scan on a shared grid.
    """
    w, d, u = _check_batch(weights, delta, u, "u", allow_inf=False)
    if np.any((u < 0) | (u > 1)):
        raise ValueError("u must lie in [0, 1]")
    if half_width is None and spacing is None:
        from rass_theory.exact.laws import rank_law, sample

        return sample(rank_law(w), d, u)
    ri, _, _ = _rass_intervals(w, d, half_width, spacing)
    return _invert_residual(ri, _rass_restrict(w), d, u)


def sample_residual_rejection(weights, delta, rng, *, max_rounds: int = 10_000) -> np.ndarray:
    """Cross-check sampler of the RASS residual: propose ``s ~ f``, accept w.p. ``(1 - g_w/f)_+``.

    Parameters
    ----------
    weights : array_like, shape (n, K) or (K,)
    delta : array_like, shape (n,)
        Must be such that every row has positive residual mass (``delta > 0`` suffices).
    rng : numpy Generator, int, SeedSequence or None

    Returns
    -------
    ndarray, shape (n,)

    Notes
    -----
    The accepted proposal has density ``f (1 - g/f)_+ / TV = (f - g)_+ / TV``; the expected
    number of rounds is ``1/TV``.  Rows still unaccepted after ``max_rounds`` raise
    ``RuntimeError`` (the residual mass is then below ``~1e-3 / max_rounds``).
    """
    w = _check_weights_rows(weights)
    n = w.shape[0] if w.ndim == 2 else (np.shape(delta)[0] if np.ndim(delta) else 1)
    d = _check_delta(delta, n)
    if w.ndim == 2 and w.shape[0] != d.shape[0]:
        raise ValueError(f"weights must have n = {d.shape[0]} rows to match delta, got {w.shape[0]}")
    if np.any(d == 0):
        raise ValueError("delta must be > 0 for the rejection sampler (delta = 0 can have zero residual mass)")
    gen = as_generator(rng)
    out = np.full(d.shape[0], np.nan)
    todo = np.arange(d.shape[0])
    for _ in range(max_rounds):
        if todo.size == 0:
            return out
        x = d[todo] + gen.standard_normal(todo.size)
        wt = w[todo] if w.ndim == 2 else w
        lr = mixture_log_density_ratio(wt, x[:, None] if w.ndim == 2 else x)
        lr = lr[:, 0] if w.ndim == 2 else lr
        # log(g/f) = log(g/phi) - (delta s - delta^2/2)
        log_gf = lr - (d[todo] * x - 0.5 * d[todo] ** 2)
        accept_prob = -np.expm1(np.minimum(log_gf, 0.0))
        acc = gen.random(todo.size) < accept_prob
        out[todo[acc]] = x[acc]
        todo = todo[~acc]
    raise RuntimeError(f"{todo.size} rows not accepted after {max_rounds} rounds; residual mass too small")
