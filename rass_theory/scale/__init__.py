"""Scale-out of the exactness harness on ``dask.distributed`` (embedded LocalCluster or a scheduler),
and the public harness entry points with their backend dispatch.

``check_exactness`` and ``certify`` (:mod:`.check`; ``rt.check_exactness``, ``rt.certify``) pick
the chunk runner of ``backend`` (NumPy, torch, Dask) and run the harness of
:mod:`rass_theory.stats`.  ``run_chunks_dask`` (:mod:`.dask_backend`) runs chunks on Dask workers.
All are imported lazily so that ``import rass_theory.scale`` imports neither dask nor torch.
"""
from __future__ import annotations

__all__ = ["run_chunks_dask", "check_exactness", "certify"]


def __getattr__(name):
    if name == "run_chunks_dask":
        from .dask_backend import run_chunks_dask
        return run_chunks_dask
    if name in ("check_exactness", "certify"):
        from . import check
        return getattr(check, name)
    raise AttributeError(f"module 'rass_theory.scale' has no attribute {name!r}")
