"""Streaming, mergeable exactness statistics and the exactness harness.

Entry points:

* :func:`check_exactness` -- is a verifier exact?  A report with stated power (with no ``K`` and
  ``delta``: the default grid, one Holm family).
* :func:`certify` -- the same over a grid of nodes with the family-wise error held across it.
* :class:`ExactnessReport`, :class:`ExactnessCounts` -- the result and its mergeable statistics.

The public ``rt.check_exactness`` / ``rt.certify`` are :mod:`rass_theory.scale.check`, which picks
the chunk runner of ``backend`` (NumPy, torch, Dask) and calls the harness here; the names here
run ``backend="numpy"`` unless given a ``chunk_stream`` (this package imports no backend above it).

Modules: ``node`` (heterogeneous per-row nodes, seeds, chunk plan), ``rowstats`` (a chunk's
statistics in each row's standardised frame), ``streaming`` (mergeable counts), ``tests``
(hypothesis tests on the counts), ``power`` (detectable discrepancies), ``harness``, ``certify``
(grids, the default run), ``checkpoint``, ``report``; ``two_sample`` (model-free two-sample tests of
two samples -- energy distance, C2ST, marginal KS -- used by ``diffusion`` and ``models``).
"""
from __future__ import annotations

import importlib

__all__ = ["check_exactness", "certify", "ExactnessReport", "ExactnessCounts", "CertifyResult",
           "StatisticalTest", "detectable_ks_distance"]

_LAZY = {
    "check_exactness": "rass_theory.stats.harness",
    "certify": "rass_theory.stats.certify",
    "CertifyResult": "rass_theory.stats.certify",
    "ExactnessReport": "rass_theory.stats.report",
    "StatisticalTest": "rass_theory.stats.report",
    "ExactnessCounts": "rass_theory.stats.streaming",
    "detectable_ks_distance": "rass_theory.stats.power",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rass_theory.stats' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
