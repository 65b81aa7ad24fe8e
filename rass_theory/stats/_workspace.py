"""Per-thread work arrays of the harness's row statistics, kept from one chunk to the next.

The statistics of a chunk make many temporaries of a few hundred kilobytes to a few megabytes
(bins, PIT values, block buffers).  Freed, such arrays go back to the system (glibc returns the
top of the heap, and maps large blocks afresh), so the next chunk's arrays of the same size cost a
page fault per 4 KiB on first touch; on this project's machine that cost more than the
arithmetic on them (the binner ran 4-6x slower on fresh buffers).  :func:`work_array` hands out
the same memory again.  Buffers are per thread (a threaded Dask worker runs chunks concurrently)
and named by their one use; a caller must not hold a work array past the function that asked for
it, nor ask for one name twice while the first is in use.  The chunk runner's arrays
(``chunk.*``: children and means, handed over read-only) are the only work arrays a verifier
sees; none is returned to a user.
"""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["work_array"]

_LOCAL = threading.local()


def work_array(name: str, shape, dtype=np.float64) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype``: this thread's buffer ``name``, grown as needed."""
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    size = 1
    for s in shape:
        size *= s
    bufs = getattr(_LOCAL, "bufs", None)
    if bufs is None:
        bufs = _LOCAL.bufs = {}
    key = (name, dtype)
    buf = bufs.get(key)
    if buf is None or buf.size < size:
        buf = bufs[key] = np.empty(max(size, 1), dtype)
    return buf[:size].reshape(shape)

