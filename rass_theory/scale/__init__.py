"""Scale-out of the exactness harness on ``dask.distributed`` (embedded LocalCluster or a scheduler),
and the public harness entry points with their backend dispatch.

``check_exactness`` and ``certify`` (:mod:`.check`; ``rt.check_exactness``, ``rt.certify``) pick
the chunk runner of ``backend`` (NumPy, torch, Dask) and run the harness of
:mod:`rass_theory.stats`.  ``run_chunks_dask`` (:mod:`.dask_backend`) runs chunks on Dask workers.
All are imported lazily so that ``import rass_theory.scale`` imports neither dask nor torch.
"""
from __future__ import annotations

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__, submod_attrs={"dask_backend": ["run_chunks_dask"], "check": ["check_exactness", "certify"]})
