"""Streaming, mergeable exactness statistics and the exactness harness.

Entry points:

* :func:`check_exactness` -- is a verifier exact?  A report with stated power (with no ``K`` and
  ``delta``: the default grid, one Holm family; the same report type, with ``cells``).
* :func:`certify` -- the same over a grid of nodes with the family-wise error held across it.
* :class:`ExactnessReport`, :class:`ExactnessCounts` -- the result and its mergeable statistics.

The public ``rt.check_exactness`` / ``rt.certify`` are :mod:`rass_theory.scale.check`, which picks
the chunk runner of ``backend`` (NumPy, torch, Dask) and calls the harness here; the names here
run ``backend="numpy"`` unless given a ``chunk_stream`` (this package imports no backend above it).

Modules, one job each: ``config`` (every option once, validated into a frozen ``HarnessConfig``),
``node`` (heterogeneous per-row nodes, seeds, chunk plan), ``regime`` (the rows' laws: default, or
resampled from a recorded trace), ``chunks`` (running chunks: draw, call, count, merge, resume),
``call_check`` (the per-call contract check and the calls-in-sequence probe), ``rowstats`` (a
chunk's statistics in each row's standardised frame), ``streaming`` (mergeable counts),
``family`` (which tests form the Holm family, named by the code that runs them), ``tests``
(hypothesis tests on the counts), ``power`` (detectable discrepancies), ``verdict`` (the report of
one cell), ``harness`` (the single-cell entry point), ``grid`` (grids, the default run),
``checkpoint``, ``report`` (result types); ``two_sample`` (model-free two-sample tests of
two samples -- energy distance, C2ST, marginal KS -- used by ``diffusion`` and ``models``).
"""
from __future__ import annotations

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(__name__, submod_attrs={
    "harness": ["check_exactness"],
    "grid": ["certify"],
    "report": ["ExactnessReport", "StatisticalTest"],
    "streaming": ["ExactnessCounts"],
    "power": ["detectable_ks_distance", "samples_for_distance"],
    "regime": ["Regime", "regime_from_trace"],
})
