"""The NumPy namespace of :mod:`rass_theory.backend`."""
from __future__ import annotations

import numpy as np
from scipy import special


class NumpyBackend:
    """Array operations of the verifier kernels on NumPy arrays (float64 math)."""

    name = "numpy"
    float64 = np.float64

    # -- elementwise -----------------------------------------------------------------------
    log = staticmethod(np.log)
    minimum = staticmethod(np.minimum)
    log_ndtr = staticmethod(special.log_ndtr)
    ndtri = staticmethod(special.ndtri)

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
