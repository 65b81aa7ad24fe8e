"""Dask scale-out of the exactness harness (``check_exactness(..., backend="dask")``).

A run is a list of :class:`~rass_theory.stats.node.ChunkSpec`; every chunk carries its own
``SeedSequence`` (``chunk_seed(entropy, i)``, independent of how many chunks there are), so the
chunks can run on any worker in any order.  :func:`run_chunks_dask` submits one task per chunk to
a ``dask.distributed`` cluster -- an embedded ``LocalCluster`` by default, an existing scheduler
given its address otherwise -- and yields each chunk's
:class:`~rass_theory.stats.streaming.ExactnessCounts` **in spec order**, so the harness merges
(and checkpoints) exactly as in a single process: same seed, bit-identical counts.
"""
from __future__ import annotations

import logging
import uuid

from ..backend import NAMES

__all__ = ["run_chunks_dask", "run_one_chunk", "dask_chunk_stream"]


def run_one_chunk(verifier, node, spec, inner: str = "numpy", device=None):
    """Run one chunk with the NumPy or the torch runner (the task a Dask worker executes)."""
    if inner == "numpy":
        from ..stats.chunks import run_chunk_numpy
        return run_chunk_numpy(verifier, node, spec)
    from ..torch.harness import run_chunk_torch
    return run_chunk_torch(verifier, node, spec, device)


def _check_picklable(verifier) -> None:
    import cloudpickle

    try:
        cloudpickle.dumps(verifier)
    except Exception as exc:  # noqa: BLE001 - any pickling failure means the same thing here
        raise TypeError(f"verifier must be picklable (cloudpickle) to run on Dask workers; "
                        f"{type(verifier).__name__} is not: {exc}") from exc


def _connect(address, n_workers, processes, timeout):
    """Return ``(client, cluster_or_None)``."""
    from distributed import Client, LocalCluster

    if address is None:
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes,
                               dashboard_address=None, silence_logs=logging.ERROR)
        try:
            return Client(cluster, timeout=timeout), cluster
        except BaseException:
            cluster.close()
            raise
    if not isinstance(address, str) or not address:
        raise ValueError(f"address must be a scheduler address such as 'tcp://host:8786', got {address!r}")
    try:
        return Client(address, timeout=timeout), None
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"could not reach the Dask scheduler at {address!r} within {timeout} s: {exc}") from exc


def run_chunks_dask(verifier, node, specs, *, address=None, n_workers: int = 2, inner: str = "numpy",
                    device=None, processes: bool = True, timeout: float = 10.0, max_in_flight=None):
    """Run harness chunks on Dask workers; yield their counts in spec order.

    Parameters
    ----------
    verifier : callable
        Must be picklable with ``cloudpickle`` (closures are fine); otherwise ``TypeError``.
    node : SyntheticNode
    specs : list of ChunkSpec
    address : str, optional
        Scheduler address of an existing cluster.  ``None`` starts an embedded
        ``distributed.LocalCluster(n_workers, threads_per_worker=1, processes=processes)`` that
        is closed when the generator finishes or is closed.  An unreachable address raises
        ``ConnectionError`` naming it after ``timeout`` seconds.
    n_workers : int
        Workers of the embedded cluster.
    inner : {"numpy", "torch"}
        Chunk runner used on the workers (:func:`rass_theory.stats.chunks.run_chunk_numpy` or
        :func:`rass_theory.torch.harness.run_chunk_torch` with ``device``).
    processes : bool
        Embedded cluster with worker processes (default) or threads in this process.  Threads
        run their verifier calls concurrently but the harness's statistics one at a time, each on
        one BLAS thread (:mod:`rass_theory.stats._threads`), so the counts stay bit-identical to a
        run in one process.
    timeout : float
        Seconds to wait for the scheduler.
    max_in_flight : int, optional
        Chunks submitted ahead of the one being yielded (default ``4 * workers``), which bounds
        the memory held by finished-but-not-yet-merged results.

    Yields
    ------
    ExactnessCounts
        One per spec, in the order of ``specs``; identical to what the chosen runner gives in
        one process for the same spec.

    Notes
    -----
    Exceptions raised by the verifier are recorded by the inner runner as violations (as in one
    process); other exceptions on a worker propagate (re-raised by ``Future.result``).
    """
    from .._validation import check_positive_int

    if inner not in NAMES:          # the chunk runners a worker can use: one per array back end
        raise ValueError(f"inner must be one of {NAMES}, got {inner!r}")
    n_workers = check_positive_int(n_workers, "n_workers")
    if not callable(verifier):
        raise TypeError(f"verifier must be callable, got {type(verifier).__name__}")
    _check_picklable(verifier)
    if inner == "torch":
        from ..torch.harness import resolve_device
        device = str(resolve_device(device))
    specs = list(specs)
    return _stream(verifier, node, specs, address, n_workers, inner, device, processes, timeout, max_in_flight)


def _stream(verifier, node, specs, address, n_workers, inner, device, processes, timeout, max_in_flight):
    if not specs:
        return
    client, cluster = _connect(address, n_workers, processes, timeout)
    futures = {}
    try:
        workers = max(1, len(client.scheduler_info().get("workers", {})) or n_workers)
        window = int(max_in_flight) if max_in_flight is not None else 4 * workers
        window = max(1, window)
        [v_future] = client.scatter([verifier], broadcast=True, hash=False)
        [n_future] = client.scatter([node], broadcast=True, hash=False)
        token = uuid.uuid4().hex[:8]

        def submit(i):
            spec = specs[i]
            futures[i] = client.submit(run_one_chunk, v_future, n_future, spec, inner, device,
                                       key=f"rass-chunk-{token}-{spec.pass_index}-{spec.index}", pure=False)

        for i in range(min(window, len(specs))):
            submit(i)
        for i in range(len(specs)):
            result = futures.pop(i).result()
            if i + window < len(specs):
                submit(i + window)
            yield result
    finally:
        for fut in futures.values():
            fut.cancel()
        client.close()
        if cluster is not None:
            cluster.close()


def dask_chunk_stream(verifier, node, specs, cfg):
    """The Dask chunk stream of the harness (what ``rt.check_exactness(..., backend="dask")`` runs):
    :func:`run_chunks_dask` once with the pending specs and ``cfg.backend_options`` (``cfg.device``,
    when given, is the default ``device``)."""
    options = dict(cfg.backend_options)
    if cfg.device is not None:
        options.setdefault("device", cfg.device)
    yield from run_chunks_dask(verifier, node, list(specs), **options)
