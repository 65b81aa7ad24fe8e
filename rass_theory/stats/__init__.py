"""Streaming, mergeable exactness statistics and the exactness harness.

Entry points:

* :func:`check_exactness` -- is a verifier exact?  A report with stated power (with no ``K`` and
  ``delta``: the default grid, one Holm family).
* :func:`certify` -- the same over a grid of nodes with the family-wise error held across it.
* :class:`ExactnessReport`, :class:`ExactnessCounts` -- the result and its mergeable statistics.

The public ``rt.check_exactness`` / ``rt.certify`` are :mod:`rass_theory.scale.check`, which picks
the chunk runner of ``backend`` (NumPy, torch, Dask) and calls the harness here; the names here
run ``backend="numpy"`` unless given a ``chunk_stream`` (this package imports no backend above it).

Modules: ``node`` (heterogeneous per-row nodes, seeds, chunk plan), ``regime`` (the rows' laws:
default, or resampled from a recorded trace), ``rowstats`` (a chunk's
statistics in each row's standardised frame), ``streaming`` (mergeable counts), ``tests``
(hypothesis tests on the counts), ``power`` (detectable discrepancies), ``harness``, ``certify``
(grids, the default run), ``checkpoint``, ``report``; ``two_sample`` (model-free two-sample tests of
two samples -- energy distance, C2ST, marginal KS -- used by ``diffusion`` and ``models``).
"""
from __future__ import annotations

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(__name__, submod_attrs={
    "harness": ["check_exactness"],
    "certify": ["certify", "CertifyResult"],
    "report": ["ExactnessReport", "StatisticalTest"],
    "streaming": ["ExactnessCounts"],
    "power": ["detectable_ks_distance", "samples_for_distance"],
    "regime": ["Regime", "regime_from_trace"],
})
