"""The harness's own linear algebra runs on one BLAS thread.

The row statistics multiply tall, skinny matrices (``(n, dim) @ (dim, 16)`` projections, ``(2, n) @
(n, dim)`` cross-covariance sums, blocks of a few thousand rows).  A multi-threaded BLAS splits
each such product over its threads for a gain far below the cost of waking them, and on a machine
whose cores are busy the waiting threads spin: on this project's shared two-core machine the
default two OpenBLAS threads made a 200,000-row cell cost 0.76 CPU-s (1.5 s wall) instead of 0.20
(0.38 s).  :func:`single_blas_thread` limits BLAS to one thread around the harness's statistics
only (the verifier's own calls keep the caller's setting), through ``threadpoolctl`` (a dependency;
without it, it does nothing).

BLAS's thread count is a process-wide setting, and it changes the order of a product's sums (the
cross-covariance statistics moved in their last digit between one and two threads).  threadpoolctl
lets one Python thread at a time own that setting and ignores the others' limits, and the owner's
exit lifts its limit under any other thread still computing.  Threads of one process (a threaded
Dask worker) therefore run these statistics one at a time, each under its own limit, so a threaded
run is bit-identical to a sequential one; the verifier's calls still run concurrently.  (A limit
that some other thread of the caller holds through threadpoolctl while the harness runs keeps its
ownership, and then that thread's setting applies to the statistics instead.)
"""
from __future__ import annotations

import contextlib
import functools
import threading

__all__ = ["single_blas_thread"]


@functools.lru_cache(maxsize=1)
def _controller():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return None
    return ThreadpoolController()


_LOCK = threading.RLock()   # one thread's statistics at a time; re-entrant for nested entries


@contextlib.contextmanager
def single_blas_thread():
    """BLAS on one thread within (about 30 us per entry); also a decorator, ``@single_blas_thread()``.

    Entries from several threads run one at a time (a nested entry in the same thread passes).
    """
    c = _controller()
    if c is None:
        yield
        return
    with _LOCK, c.limit(limits=1, user_api="blas"):
        yield
