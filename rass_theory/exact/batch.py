"""Batch (per-row) exact laws in the rank-1 coordinate, for the verifiers.

Every node of a diffusion run has its own ``delta`` (and possibly its own rank weights), so
each function takes per-row parameters: ``weights`` ``(n, K)`` or one vector ``(K,)`` shared by
all rows, ``delta`` ``(n,)``, and ``s`` / ``u`` ``(n,)``.  Nothing loops over rows in Python.

* :func:`selected_logpdf`, :func:`selected_cdf`, :func:`target_logpdf`: the laws of ``s``.
* :func:`residual_intervals` / :func:`sample_residual`: the RASS residual ``(f - g_w)_+ / TV``,
  its crossings and interval masses (``TV = total``) and inverse-CDF draws.
* :func:`residual_intervals_generic` / :func:`sample_residual_generic`: the same for any
  selected law given as vectorised per-row callables.
* :func:`sample_residual_rejection`: the cross-check sampler (propose from ``f``, accept with
  probability ``(1 - g/f)_+``).

Every crossing search, mass and inverse CDF here is the one law engine's:
:func:`rass_theory.exact.laws.residual_intervals` and :func:`rass_theory.exact.laws.sample`
(RASS through :func:`rass_theory.exact.laws.rank_law`, callables through :class:`RowLaw`).
Its guarantees (proof ``proofs/P7-selected-law.md``): crossings of ``f`` and ``g`` on the
truncation window of :mod:`rass_theory.exact._window` (any crossing missed outside it costs at
most ``(K + 1) Phi(-L) <= 1e-27`` in total variation), hidden pairs inside one grid cell split
at the extremum of ``h = log f - log g``, masses in closed form
``[D(b) - D(a)] - [E(b) - E(a)]`` with ``D = Phi(. - delta) - Phi`` and ``E = G - Phi`` (relative
accuracy ``~1e-14`` for rank laws, ``tests/exact/test_accuracy_mpmath.py::TestCdfExcess``;
absolute ``~1e-16`` for callables without an excess form).  ``delta = 0`` is allowed; where the
residual mass is exactly zero (``g = f``) the draw is from ``f`` itself, never NaN.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import ndtr

from rass_theory._validation import WEIGHTS_ATOL, as_generator, check_weights  # noqa: F401 - re-exported
from rass_theory.backend import NUMPY
from rass_theory.exact._window import half_width as _half_width
from rass_theory.exact import laws as _laws
from rass_theory.exact.laws import grid_spacing  # noqa: F401 - the engine's one spacing, re-exported
from rass_theory.exact.normal import log_phi
from rass_theory.exact.order_stats import (
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
    "RowLaw",
    "grid_spacing",
]

#: the generic search's points per ``2 L = 23`` of ``s``: spacing ``0.0575``, that of
#: :class:`rass_theory.exact.laws.PolicyLaw` (such a law may have bumps and jumps anywhere, so
#: finer than :func:`grid_spacing`)
GENERIC_GRID_SIZE = 401
#: the number of children assumed by the generic functions (window and crossing slots)
GENERIC_K = 64


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------


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
    w = check_weights(weights, n=-1, renormalise=False)
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
# residuals: the one law engine (exact.laws)
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


def generic_spacing(grid_size: int) -> float:
    """The generic scan's spacing ``2 L / (grid_size - 1)``, ``L = 11.5`` (the window of
    :mod:`rass_theory.exact._window` for ``K <= 1515``)."""
    if isinstance(grid_size, bool) or not isinstance(grid_size, (int, np.integer)) or grid_size < 3:
        raise ValueError(f"grid_size must be an integer >= 3, got {grid_size!r}")
    return 2.0 * _half_width(1) / (int(grid_size) - 1)


def _intervals(law, delta) -> ResidualIntervals:
    """:func:`rass_theory.exact.laws.residual_intervals` as a :class:`ResidualIntervals`."""
    bounds, positive, masses = _laws.residual_intervals(law, delta)
    n = delta.shape[0]
    return ResidualIntervals(bounds, positive, masses, masses.sum(axis=1),
                             np.count_nonzero(np.isfinite(bounds), axis=1),
                             np.full(n, -_half_width(law.K)), _laws._window_top(law.K, delta))


class RowLaw:
    """Per-row callables as a :class:`rass_theory.exact.laws.SelectedLaw` (NumPy).

    Parameters
    ----------
    log_ratio, cdf_excess : callable
        ``log(g/phi)`` and ``G - Phi`` for ``s`` of shape ``(n, m)``, row ``i`` in row ``i``'s law.
    n : int
        Number of rows of the callables.
    K : int
        Children of the rule (``g <= K phi``): the engine's window and ``K + 2`` crossing slots.
    spacing : float
        Grid spacing of the crossing scan.

    Notes
    -----
    ``take(rows)`` may repeat rows (the root finders evaluate one point per bracket): the points
    of the taken rows are scattered into an ``(n, c m)`` array (``c`` the largest repeat count;
    other rows at ``s = 0``), the callables run once on it, and the values are gathered back.
    So a take costs as much as the whole law: the sampler does not split it into row blocks
    (``unblocked``).
    """

    unblocked = True

    def __init__(self, log_ratio, cdf_excess, n: int, K: int = GENERIC_K,
                 spacing: float = _laws.PolicyLaw.spacing, _rows=None):
        self.nx = NUMPY
        self.K, self.spacing = int(K), float(spacing)
        self._fns, self._n, self._rows = (log_ratio, cdf_excess), int(n), _rows

    def take(self, rows) -> "RowLaw":
        rows = np.asarray(rows, dtype=np.intp)
        return type(self)(*self._fns, self._n, self.K, self.spacing, rows if self._rows is None else self._rows[rows])

    def keys(self):
        rows = np.arange(self._n) if self._rows is None else self._rows
        return rows[:, None].astype(np.float64)      # every row its own law: never grouped

    def _eval(self, fn, s):
        s = np.asarray(s, dtype=np.float64)
        rows = self._rows
        if rows is None:
            return fn(s)
        m = s.shape[1]
        order = np.argsort(rows, kind="stable")
        ranked = rows[order]
        occ = np.empty(rows.size, dtype=np.intp)
        occ[order] = np.arange(rows.size) - np.searchsorted(ranked, ranked, side="left")
        cols = occ[:, None] * m + np.arange(m)[None, :]
        X = np.zeros((self._n, (int(occ.max()) + 1 if rows.size else 1) * m))
        X[rows[:, None], cols] = s
        return fn(X)[rows[:, None], cols]

    def log_ratio(self, s):
        """``log(g/phi)``; NaN (a callable that cannot evaluate its law there) reads as ``+inf``:
        ``g >= f``, no residual mass, as the per-row scan this class replaced read ``h = NaN``."""
        v = self._eval(self._fns[0], s)
        return np.where(np.isnan(v), np.inf, v)

    def cdf_excess(self, s):
        return self._eval(self._fns[1], s)


class _PreciseRowLaw(RowLaw):
    """A :class:`RowLaw` whose crossings the sampler reads at machine precision.

    A jump of ``g`` (a threshold the callables do not announce) is a crossing where
    ``D = F - G`` is not stationary: an error ``e`` there moves a mass by ``e |f - g|``, first
    order, so the sampler's ``1e-9`` crossing tolerance is not enough.  ``crossings`` is the
    protocol's hook (:mod:`rass_theory.exact.laws`): the precise search of
    :func:`rass_theory.exact.laws.residual_intervals` on the plain :class:`RowLaw`.
    """

    def crossings(self, delta):
        plain = RowLaw(*self._fns, self._n, self.K, self.spacing, self._rows)
        bounds, positive, _ = _laws.residual_intervals(plain, delta)
        return bounds[:, 1:-1], positive[:, 0]


def residual_intervals_generic(
    log_ratio: Callable[[np.ndarray], np.ndarray],
    cdf_excess: Callable[[np.ndarray], np.ndarray],
    delta,
    *,
    K: int = GENERIC_K,
    grid_size: int = GENERIC_GRID_SIZE,
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
    K : int
        :class:`RowLaw`.
    grid_size : int
        Points of the crossing scan per ``2 L = 23`` of ``s`` (:func:`generic_spacing`).

    Notes
    -----
    :func:`rass_theory.exact.laws.residual_intervals` of :class:`RowLaw`: the sign changes of
    ``h = delta s - delta^2/2 - log_ratio(s)`` on the engine's grid, refined; on ``[a, b]`` with
    ``f > g`` the mass is ``[D(b) - D(a)] - [E(b) - E(a)]``, ``D(x) = Phi(x - delta) - Phi(x)``,
    ``E = cdf_excess`` (module docstring).
    """
    delta = _check_delta(delta)
    return _intervals(RowLaw(log_ratio, cdf_excess, delta.shape[0], K, generic_spacing(grid_size)), delta)


def sample_residual_generic(
    log_g: Callable[[np.ndarray], np.ndarray],
    cdf_g: Callable[[np.ndarray], np.ndarray],
    delta,
    u,
    *,
    log_ratio: Callable[[np.ndarray], np.ndarray] | None = None,
    cdf_excess: Callable[[np.ndarray], np.ndarray] | None = None,
    K: int = GENERIC_K,
    grid_size: int = GENERIC_GRID_SIZE,
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
    K, grid_size : int
        As in :func:`residual_intervals_generic`.

    Returns
    -------
    ndarray, shape (n,)

    Notes
    -----
    :func:`rass_theory.exact.laws.sample` of :class:`RowLaw`: ``R(x) = int_a^x (f - g) =
    [D(x) - D(a)] - [E(x) - E(a)]`` on the interval ``[a, b]`` picked by ``u TV`` is solved for
    ``R(x) = u TV - (mass before a)`` (proof P7).  Rows with zero residual mass return
    ``delta + Phi^{-1}(u)``.
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
        def cdf_excess(x):
            return cdf_g(x) - ndtr(x)
    return _laws.sample(_PreciseRowLaw(log_ratio, cdf_excess, delta.shape[0], K, generic_spacing(grid_size)),
                        delta, u)


def _rank_law(w, spacing):
    law = _laws.rank_law(w)
    if spacing is not None:
        law.spacing = float(spacing)
    return law


def residual_intervals(weights, delta, *, spacing: float | None = None) -> ResidualIntervals:
    """Crossings and ``(f - g_w)_+`` masses per row for RASS; ``.total`` is ``TV(g_w, f)``.

    Parameters
    ----------
    weights : array_like, shape (n, K) or (K,)
    delta : array_like, shape (n,)
    spacing : float, optional
        Grid spacing of the crossing scan; default :func:`grid_spacing` of ``K``.

    Notes
    -----
    :func:`rass_theory.exact.laws.residual_intervals` of :func:`rass_theory.exact.laws.rank_law`
    (module docstring).
    """
    w = check_weights(weights, n=-1, renormalise=False)
    if np.ndim(delta) == 0 and w.ndim == 2:
        delta = np.full(w.shape[0], delta)
    d = _check_delta(delta)
    if w.ndim == 2 and w.shape[0] != d.shape[0]:
        raise ValueError(f"weights must have n = {d.shape[0]} rows to match delta, got {w.shape[0]}")
    return _intervals(_rank_law(w, spacing), d)


def sample_residual(weights, delta, u, *, spacing: float | None = None):
    """Inverse-CDF draw from the RASS residual ``(f - g_w)_+ / TV(g_w, f)``, per row.

    Parameters
    ----------
    weights : array_like, shape (n, K) or (K,)
    delta : array_like, shape (n,)
    u : array_like, shape (n,)
        Uniforms in ``[0, 1]``.
    spacing : float, optional
        Grid spacing of the crossing scan; default :func:`grid_spacing` of ``K``.

    Returns
    -------
    ndarray, shape (n,)

    Notes
    -----
    :func:`rass_theory.exact.laws.sample` of :func:`rass_theory.exact.laws.rank_law`, whose
    ``G_w - Phi = sum_k (C_k - k/K) binom(K, k) p^k q^(K-k)`` (proof P7) keeps relative accuracy
    for nearly uniform weights at small ``delta``.
    """
    w, d, u = _check_batch(weights, delta, u, "u", allow_inf=False)
    if np.any((u < 0) | (u > 1)):
        raise ValueError("u must lie in [0, 1]")
    return _laws.sample(_rank_law(w, spacing), d, u)


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
    w = check_weights(weights, n=-1, renormalise=False)
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
