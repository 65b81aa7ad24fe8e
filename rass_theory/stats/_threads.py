"""The harness's own linear algebra runs on one BLAS thread.

The row statistics multiply tall, skinny matrices (``(n, dim) @ (dim, 16)`` projections, ``(2, n) @
(n, dim)`` cross-covariance sums, blocks of a few thousand rows).  A multi-threaded BLAS splits
each such product over its threads for a gain far below the cost of waking them, and on a machine
whose cores are busy the waiting threads spin: on this project's shared two-core machine the
default two OpenBLAS threads made a 200,000-row cell cost 0.76 CPU-s (1.5 s wall) instead of 0.20
(0.38 s).  :func:`single_blas_thread` limits BLAS to one thread around the harness's statistics
only (the verifier's own calls keep the caller's setting), through ``threadpoolctl`` (a dependency;
without it, it does nothing).
"""
from __future__ import annotations

import contextlib
import functools

__all__ = ["single_blas_thread"]


@functools.lru_cache(maxsize=1)
def _controller():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return None
    return ThreadpoolController()


@contextlib.contextmanager
def single_blas_thread():
    """BLAS on one thread within (about 30 us per entry); also a decorator, ``@single_blas_thread()``."""
    c = _controller()
    if c is None:
        yield
        return
    with c.limit(limits=1, user_api="blas"):
        yield
