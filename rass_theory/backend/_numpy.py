"""The NumPy namespace of :mod:`rass_theory.backend`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

_EPS = float(np.finfo(np.float64).eps)
#: values of a root finder's function are clipped here (only the sign matters far from a root)
_CLIP = 1e3
#: statuses of :func:`chandrupatla` (scipy's codes)
CONVERGED, SIGN_ERROR, VALUE_ERROR, MAX_ITER = 0, -1, -3, -2


@dataclass(frozen=True)
class RootResult:
    """Per-element result of :func:`chandrupatla` (arrays of the brackets' shape).

    ``x`` the root (NaN where the bracket was invalid); ``status`` :data:`CONVERGED`,
    :data:`SIGN_ERROR` (no sign change), :data:`VALUE_ERROR` (non-finite ends or NaN values) or
    :data:`MAX_ITER`; ``success`` ``status == CONVERGED``; ``lo, hi, f_lo, f_hi`` the final
    bracket (``lo <= hi``) and the values there; ``nfev`` function evaluations in all.
    """

    x: np.ndarray
    status: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    f_lo: np.ndarray
    f_hi: np.ndarray
    nfev: int

    @property
    def success(self):
        return self.status == CONVERGED


def chandrupatla(fun, a, b, *, args=(), xatol: float = 4 * _EPS, xrtol: float = 4 * _EPS,
                 maxiter: int = 200, values=None) -> RootResult:
    """Bracketed roots of ``fun(x, *args)`` per element by Chandrupatla's method.

    Parameters
    ----------
    fun : callable
        Elementwise; called on the still-active elements only (``args`` sliced alike).
    a, b : ndarray
        Bracket ends, one shape (flattened inside, the result reshaped back).
    args : tuple of ndarray
        Per-element arrays of ``a``'s shape.
    xatol, xrtol : float
        An element stops once its bracket is narrower than ``xatol + xrtol |x|``, or where
        ``fun`` is exactly 0.
    maxiter : int
    values : tuple of ndarray, optional
        ``(fun(a), fun(b))`` when the caller has them (two evaluations saved).

    Returns
    -------
    RootResult

    Notes
    -----
    The iteration of :func:`scipy.optimize.elementwise.find_root` (Chandrupatla 1997, Adv. Eng.
    Software 28, 145: inverse quadratic interpolation where the three last points allow it,
    bisection otherwise, steps kept ``tol/2`` inside the bracket; function tolerances 0),
    written directly on NumPy arrays: the same iterates, without the general framework's
    per-iteration bookkeeping, which dominates at the sizes the law engine solves (a few
    thousand brackets, a dozen iterations).  Converged elements are dropped from the work
    arrays.
    """
    shape = np.shape(a)
    x1 = np.array(a, dtype=np.float64).reshape(-1)
    x2 = np.array(b, dtype=np.float64).reshape(-1)
    args = tuple(np.asarray(v).reshape(-1) for v in args)
    n = x1.size
    out = dict(x=np.full(n, np.nan), status=np.full(n, MAX_ITER, dtype=np.int32), lo=np.empty(n),
               hi=np.empty(n), f_lo=np.empty(n), f_hi=np.empty(n))
    if values is None:
        f1 = np.asarray(fun(x1, *args), dtype=np.float64).reshape(-1)
        f2 = np.asarray(fun(x2, *args), dtype=np.float64).reshape(-1)
        nfev = 2
    else:
        f1, f2 = (np.array(v, dtype=np.float64).reshape(-1) for v in values)
        nfev = 0
    active = np.arange(n)
    x3 = f3 = None
    t = np.full(n, 0.5)
    nit = 0
    while True:
        # termination (scipy's order: f = 0, lost bracket, non-finite, bracket width)
        first = np.abs(f1) < np.abs(f2)
        xmin = np.where(first, x1, x2)
        fmin = np.where(first, f1, f2)
        status = np.full(active.size, MAX_ITER, dtype=np.int32)
        zero = fmin == 0.0
        status[zero] = CONVERGED
        lost = (np.sign(f1) == np.sign(f2)) & ~zero
        status[lost] = SIGN_ERROR
        bad = (~(np.isfinite(x1) & np.isfinite(x2)) | (np.isnan(f1) & np.isnan(f2))) & ~zero & ~lost
        status[bad] = VALUE_ERROR
        dx = np.abs(x2 - x1)
        tol = np.abs(xmin) * xrtol + xatol
        status[(dx < tol) & ~zero & ~lost & ~bad] = CONVERGED
        stop = status != MAX_ITER
        last = nit >= maxiter
        if last:
            stop = np.ones(active.size, dtype=bool)
        if stop.any():
            idx = active[stop]
            failed = (status[stop] == SIGN_ERROR) | (status[stop] == VALUE_ERROR)
            out["x"][idx] = np.where(failed, np.nan, xmin[stop])
            out["status"][idx] = status[stop]
            swap = x1[stop] < x2[stop]
            out["lo"][idx] = np.where(swap, x1[stop], x2[stop])
            out["hi"][idx] = np.where(swap, x2[stop], x1[stop])
            out["f_lo"][idx] = np.where(swap, f1[stop], f2[stop])
            out["f_hi"][idx] = np.where(swap, f2[stop], f1[stop])
            if last or stop.all():
                break
            keep = ~stop
            active = active[keep]
            x1, f1, x2, f2, dx, tol = x1[keep], f1[keep], x2[keep], f2[keep], dx[keep], tol[keep]
            t = t[keep]
            if x3 is not None:
                x3, f3 = x3[keep], f3[keep]
            args = tuple(v[keep] for v in args)
        if x3 is not None:
            # the next step: inverse quadratic interpolation where admissible, else bisection
            with np.errstate(divide="ignore", invalid="ignore"):
                xi1 = (x1 - x2) / (x3 - x2)
                phi1 = (f1 - f2) / (f3 - f2)
                alpha = (x3 - x1) / (x2 - x1)
                iqi = ((1.0 - np.sqrt(1.0 - xi1)) < phi1) & (phi1 < np.sqrt(xi1))
                t = np.where(iqi, f1 / (f1 - f2) * f3 / (f3 - f2) - alpha * f1 / (f3 - f1) * f2 / (f2 - f3), 0.5)
                tl = 0.5 * tol / dx
            t = np.clip(t, tl, 1.0 - tl)
        x = x1 + t * (x2 - x1)
        f = np.asarray(fun(x, *args), dtype=np.float64).reshape(-1)
        nfev += 1
        nit += 1
        same = np.sign(f) == np.sign(f1)
        x3, f3 = np.where(same, x1, x2), np.where(same, f1, f2)
        x2, f2 = np.where(same, x2, x1), np.where(same, f2, f1)
        x1, f1 = x, f
    return RootResult(**{k: v.reshape(shape) for k, v in out.items()}, nfev=nfev)


class NumpyBackend:
    """Array operations of the verifier kernels on NumPy arrays (float64 math)."""

    name = "numpy"
    #: the kind of array the caller passed (``"torch"`` for :class:`~rass_theory.backend._torch.TorchHostBackend`)
    inputs = "numpy"
    float64 = np.float64

    # -- elementwise -----------------------------------------------------------------------
    log = staticmethod(np.log)
    exp = staticmethod(np.exp)
    expm1 = staticmethod(np.expm1)
    log1p = staticmethod(np.log1p)
    sqrt = staticmethod(np.sqrt)
    abs = staticmethod(np.abs)
    logaddexp = staticmethod(np.logaddexp)
    isfinite = staticmethod(np.isfinite)
    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    log_ndtr = staticmethod(special.log_ndtr)
    ndtr = staticmethod(special.ndtr)
    ndtri = staticmethod(special.ndtri)
    erfcx = staticmethod(special.erfcx)

    erf = staticmethod(special.erf)
    erfc = staticmethod(special.erfc)

    @staticmethod
    def maybe_any(mask) -> bool:
        """``mask.any()`` read on the host (an accelerator answers True without reading)."""
        return bool(np.any(mask))

    @staticmethod
    def zeros_like(x):
        """Float64 zeros of ``x``'s shape, placed like ``x``."""
        return np.zeros_like(x, dtype=np.float64)

    @staticmethod
    def host_max(x):
        """``max(x)`` as a Python float (``None`` where reading it would synchronise a device)."""
        return float(np.max(x))

    @staticmethod
    def next_below(x):
        """The largest float64 below ``x``, elementwise."""
        return np.nextafter(x, -np.inf)

    @staticmethod
    def clip(x, lo=None, hi=None):
        return np.clip(x, lo, hi)

    @staticmethod
    def where(cond, a, b):
        return np.where(cond, a, b)

    @staticmethod
    def logsumexp(x, axis: int):
        """``log sum exp x`` along ``axis`` (max-shifted; rows of ``-inf`` give ``-inf``)."""
        m = np.max(x, axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(divide="ignore"):
            return np.log(np.sum(np.exp(x - m), axis=axis)) + np.squeeze(m, axis=axis)

    # -- reductions and indexing -------------------------------------------------------------
    @staticmethod
    def cumsum(x, axis: int = -1):
        return np.cumsum(x, axis=axis)

    @staticmethod
    def count_true(mask, axis: int):
        return np.count_nonzero(mask, axis=axis)

    @staticmethod
    def argsort(x, axis: int = 1):
        return np.argsort(x, axis=axis, kind="stable")

    @staticmethod
    def take_along(x, idx):
        """``x[i, idx[i]]`` for ``x (n, K)`` and ``idx (n,)``."""
        return np.take_along_axis(x, idx[:, None], axis=1)[:, 0]

    @staticmethod
    def take_rows(children, idx):
        """Copies of ``children[i, idx[i]]`` (bit for bit), shape ``(n, d)``."""
        n, K, d = children.shape
        if children.flags.c_contiguous:
            return np.take(children.reshape(n * K, d), np.arange(n) * K + idx, axis=0)
        return children[np.arange(n), idx]

    @staticmethod
    def rows_where(mask):
        """Row indices of ``mask`` (indexing costs no synchronisation on the host)."""
        return np.flatnonzero(mask)

    @staticmethod
    def add_rows(states, rows, shift):
        """``states[rows] += shift`` in the states' dtype (rows are distinct)."""
        states[rows] += shift.astype(states.dtype, copy=False)
        return states

    @staticmethod
    def copy(x):
        return x.copy()

    @staticmethod
    def gather(x, idx):
        """``x[i, idx[i, j]]`` for ``x (n, m)`` and ``idx (n, c)``."""
        return np.take_along_axis(x, idx, axis=1)

    @staticmethod
    def first_true(mask, count: int):
        """Column indices of up to ``count`` True entries per row of ``mask (n, m)``.

        The True columns come first, in column order; rows with fewer are padded with the index
        of a False entry (check the mask at the returned indices).
        """
        n, m = mask.shape
        count = min(int(count), m)
        out, _, _ = NumpyBackend.row_slots(*np.nonzero(mask), n, count)
        pad = np.arange(count)[None, :] >= np.count_nonzero(mask, axis=1)[:, None]
        out[pad] = np.broadcast_to(np.argmin(mask, axis=1)[:, None], out.shape)[pad]
        return out

    @staticmethod
    def row_slots(rows, cols, n: int, count: int, flags=None):
        """The first ``count`` columns of each row from ``(row, col)`` pairs sorted by row, then col.

        Returns ``(cell (n, count), valid (n, count), flag (n, count))``: the columns in order,
        padded with 0; whether a slot holds a pair; ``flags`` at the pairs (``False`` padding;
        ``None`` without flags).
        """
        counts = np.bincount(rows, minlength=n)
        rank = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
        keep = rank < count
        r, k = rows[keep], rank[keep]
        cell = np.zeros((n, count), dtype=np.int64)
        cell[r, k] = cols[keep]
        valid = np.zeros((n, count), dtype=bool)
        valid[r, k] = True
        flag = None
        if flags is not None:
            flag = np.zeros((n, count), dtype=bool)
            flag[r, k] = flags[keep]
        return cell, valid, flag

    @staticmethod
    def count_below(sorted_rows, values):
        """``#{j : sorted_rows[i, j] < values[i]}`` per row (``sorted_rows`` ascending per row;
        one shared row ``(1, m)`` is searched by bisection)."""
        if sorted_rows.shape[0] == 1 and values.ndim == 1:
            below = np.searchsorted(sorted_rows[0], values, side="left")
            return np.where(values == values, below, 0)          # NaN is below nothing
        return np.count_nonzero(sorted_rows < values[:, None], axis=1)

    @staticmethod
    def sort(x, axis: int = -1):
        return np.sort(x, axis=axis)

    @staticmethod
    def concat(arrays, axis: int = 0):
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def stack(arrays, axis: int = 0):
        return np.stack(arrays, axis=axis)

    @staticmethod
    def unique_rows(keys):
        """``(first, inverse)``: one representative row index per distinct row of ``keys (n, c)``
        and each row's group; ``None`` where reading values would synchronise a device."""
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        return first, inverse.reshape(-1)

    @staticmethod
    def linspace(lo: float, hi: float, m: int, like):
        return np.linspace(lo, hi, m)

    @staticmethod
    def full(shape, value, like):
        return np.full(shape, value, dtype=np.float64)

    @staticmethod
    def find_root(fun, a, b, *, args=(), xrtol: float = 4 * _EPS, xatol: float | None = None,
                  maxiter: int = 200, bisections: int | None = None, steps: int | None = None,
                  values=None):
        """Roots of ``fun`` in brackets ``[a, b]`` (``fun(a)``, ``fun(b)`` of opposite signs).

        Parameters
        ----------
        fun : callable
            Elementwise ``fun(x, *args) -> array`` of ``x``'s shape; NaN is read as 0 and values
            are clipped to ``[-1e3, 1e3]`` (only the sign matters far from a root, and an
            infinite value would stop the iteration).
        a, b : ndarray
            Bracket ends (same shape; ``a <= b``).
        args : tuple of ndarray
            Extra per-element arrays of ``a``'s shape (e.g. row indices).
        xrtol, xatol : float
            Tolerances on the root (defaults ``4 eps`` each: the final bracket is
            ``<= 8 eps (1 + |x|)`` wide).
        maxiter : int
        bisections, steps : int, optional
            The fixed iteration counts of the torch twin; ignored here (convergence is tested).
        values : tuple of ndarray, optional
            ``(fun(a), fun(b))`` when the caller has them (clipped like ``fun``'s values).

        Returns
        -------
        ndarray
            The roots; where the bracket is invalid (one sign after clipping, or ``a == b``)
            the end with the smaller ``|fun|``.

        Notes
        -----
        Chandrupatla's method (:func:`chandrupatla`: inverse quadratic interpolation
        safeguarded by bisection, per element, converged elements dropped), the iteration of
        :func:`scipy.optimize.elementwise.find_root`.
        """
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.size == 0:
            return a.copy()

        def clipped(x, *extra):
            v = np.asarray(fun(x, *extra), dtype=np.float64)
            return np.clip(np.where(np.isnan(v), 0.0, v), -_CLIP, _CLIP)

        if values is not None:
            values = tuple(np.clip(np.where(np.isnan(v), 0.0, v), -_CLIP, _CLIP) for v in values)
        res = chandrupatla(clipped, a, np.maximum(b, a), args=args, xrtol=xrtol,
                           xatol=4 * _EPS if xatol is None else xatol, maxiter=maxiter, values=values)
        x = res.x
        bad = ~np.isfinite(x)
        if np.any(bad):
            x = np.where(bad, np.where(np.abs(res.f_lo) <= np.abs(res.f_hi), res.lo, res.hi), x)
        return x

    @staticmethod
    def cast(x, dtype):
        """``x`` in ``dtype`` (no copy when it already is)."""
        return x.astype(dtype, copy=False)

    @staticmethod
    def arange(n: int, like):
        return np.arange(n)

    @staticmethod
    def is_float32(x) -> bool:
        return x.dtype == np.float32

    # -- creation ----------------------------------------------------------------------------
    @staticmethod
    def zeros_index(n: int, like):
        return np.zeros(n, dtype=np.int64)

    @staticmethod
    def constant(values, like):
        """A float64 array of ``values`` (host numbers), placed like ``like``."""
        return np.asarray(values, dtype=np.float64)

    @staticmethod
    def index_constant(value: int, n: int, like):
        return np.full(n, value, dtype=np.int64)

    # -- projection and randomness -------------------------------------------------------------
    @staticmethod
    def project(children, direction):
        """``<children[i, k], e[i]>`` in float64, ``(n, K)`` (one einsum)."""
        return np.einsum("nkd,nd->nk", children, direction, dtype=np.float64)

    @staticmethod
    def rowdot(a, b):
        return np.einsum("nd,nd->n", a, b, dtype=np.float64)

    @staticmethod
    def uniform(rng, shape, like=None):
        """Uniforms in ``[0, 1)`` from a ``numpy.random.Generator``, float64, rows in order."""
        return rng.random(shape)

    @staticmethod
    def normal(rng, shape, like=None):
        return rng.standard_normal(shape)


#: The NumPy namespace.
NUMPY = NumpyBackend()
