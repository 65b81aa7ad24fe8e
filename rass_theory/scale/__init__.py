"""Scale-out of the exactness harness on ``dask.distributed`` (embedded LocalCluster or a scheduler).

``run_chunks_dask`` is imported lazily so that ``import rass_theory.scale`` does not import dask.
"""
from __future__ import annotations

__all__ = ["run_chunks_dask"]


def __getattr__(name):
    if name == "run_chunks_dask":
        from .dask_backend import run_chunks_dask
        return run_chunks_dask
    raise AttributeError(f"module 'rass_theory.scale' has no attribute {name!r}")
