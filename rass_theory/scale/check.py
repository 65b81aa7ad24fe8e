"""The public exactness entry points ``rt.check_exactness`` and ``rt.certify``: backend dispatch.

The harness itself (configuration, NumPy chunk runner, merging, checkpoints, every test) is
:mod:`rass_theory.stats` (entry points :mod:`~rass_theory.stats.harness` and
:mod:`~rass_theory.stats.grid`; the options and their defaults, written once, are
:data:`rass_theory.stats.config.OPTION_DEFAULTS`); the torch and Dask chunk
runners are :mod:`rass_theory.torch.harness` and :mod:`rass_theory.scale.dask_backend`, which
import ``stats``.  This module sits on their layer (``scale`` may import ``torch``, ``torch``
imports no ``scale``): it picks the chunk stream of ``backend`` and hands it down to the stats
harness, so ``stats`` never imports a backend above it (``tests/test_layering.py``).  The
backends are imported when their stream first runs: ``import rass_theory.scale.check`` loads
neither torch nor dask.
"""
from __future__ import annotations

from ..stats import grid as _grid
from ..stats import harness as _harness

__all__ = ["check_exactness", "certify", "chunk_stream"]


def _torch_stream(verifier, node, specs, cfg):
    from ..torch.harness import torch_chunk_stream

    yield from torch_chunk_stream(verifier, node, specs, cfg)


def _dask_stream(verifier, node, specs, cfg):
    from .dask_backend import dask_chunk_stream

    yield from dask_chunk_stream(verifier, node, specs, cfg)


def chunk_stream(backend):
    """The chunk stream of ``backend``: ``None`` for ``"numpy"`` (the stats harness's own) and for
    any name that is not a backend (the harness then raises its ``backend must be one of ...``
    error), the torch or Dask stream otherwise."""
    if isinstance(backend, str):
        if backend == "torch":
            return _torch_stream
        if backend == "dask":
            return _dask_stream
    return None


def check_exactness(verifier, K=None, delta=None, dim=None, **options):
    """Test whether ``verifier`` is exact on heterogeneous synthetic nodes, with stated power.

    Every option below is a keyword (``**options``): the names and their defaults are written once,
    in :data:`rass_theory.stats.config.OPTION_DEFAULTS`, and an unknown name is a ``TypeError``.

    Parameters
    ----------
    verifier : callable
        ``verifier(children (n, K, dim), mu_draft (n, dim), mu_target (n, dim), sigma, rng)`` returning
        an object with ``states``, ``accepted``, ``child_index``.  ``sigma`` is a scalar or an
        ``(n,)`` array (both are exercised).  Built-in verifiers also provide
        ``expected_acceptance(K, delta)``.
    K, delta : optional
        The cell.  When either is ``None`` (the default) the run is the default grid
        (:data:`rass_theory.stats.grid.DEFAULT_CELLS`: ``K in {2, 3, 4, 8}`` (or the verifier's
        fixed ``K``), a ``dim = 256`` cell and a 2.5-million-row power cell, cheapest first) with
        one Holm family over every test of every cell, and the report's ``cells`` hold one
        report per cell; otherwise the report of the one cell (both are an
        :class:`~rass_theory.stats.report.ExactnessReport`).
    dim : int, optional
        Dimension of the cell (default 8), or of every grid cell when given.
    n_samples : int, optional
        Rows per dtype pass: default 200_000 for one cell; the grid's cells have their own
        (``DEFAULT_CELLS``) unless this is given.  Half the rows have the named ``delta``; the rest
        are spread over ``spread_deltas(delta)`` (tiny ``1e-3 .. 1e-2`` to large ``4.5 .. 12``).
    alpha : float, default 1e-3
        Family-wise false-fail rate of the run (Holm over all statistical tests).
    rng : int, SeedSequence, Generator or None, default None
        Source of the run's seed.  ``None`` draws a fresh seed and prints it to stderr; the
        report's ``seed`` reproduces the run.
    expected_acceptance : float or callable, optional
        Exact acceptance at the named delta (float), or ``(K, delta) -> float`` for every delta
        group; defaults to ``verifier.expected_acceptance``.  Without one, only the
        list-coupling bound is tested.
    sigma : float, optional
        A fixed kernel scale; default: per-row scales log-uniform on [0.1, 10]
        (``||mu_draft||/sigma`` is 0 on one row in ten, else log-uniform on [0.01, 1e4]).
    dtype : str or sequence of str, optional
        Precision passes (default ``("float64", "float32")``; the power cell runs float64 only);
        ``"bfloat16"`` needs ``backend="torch"``.  Every pass has its own tests (prefixed
        ``"float32:"`` etc.).
    regime : DeltaTrace, run, mapping or Regime, optional
        Test in the regime of your own model: the rows' ``delta``, ``sigma`` and
        ``||mu_draft||/sigma`` are resampled from a recorded trace
        (:func:`rass_theory.stats.regime.regime_from_trace`; deltas grouped into at most 16
        representative values).  The report's ``regime`` line says what was drawn from where.
    detect : float, optional
        Design ``n`` for a stated KS distance: the smallest ``n`` whose detectable distance at
        ``alpha`` and ``false_pass_rate`` is ``<= detect`` (for the grid: the power cell's), printed
        to stderr (TFP ``statistical_testing`` style).
    stop_early : bool, default True
        Sequential looks: a cell stops, FAILED, at an interim look (after chunks 1, 2, 4, ...)
        once a test is decisively rejected, with ``alpha / 100`` spent on the looks and the final
        Holm at ``0.99 alpha`` (:mod:`rass_theory.stats.looks`; the report's ``stop_look`` and
        ``rows_used`` say where); a grid also stops after the first cell with a raw p-value
        ``<= 0.99 alpha / m``, which Holm rejects whatever the remaining cells give.  ``False``:
        every chunk, Holm at ``alpha``.
    chunk_size, n_directions, n_bins, two_sample_size, n_permutations, false_pass_rate, backend,
    device, backend_options, checkpoint, checkpoint_every, progress
        As before: chunking (memory ``O(chunk_size * K * dim)``), test directions (default
        ``min(2, dim - 1)``), PIT bins, energy-test sample, its permutations, the ``beta`` of the
        stated power, ``"numpy" | "torch" | "dask"`` (the chunk runner: NumPy, torch on ``device``,
        or Dask with ``backend_options``), the torch device, Dask options, an ``.npz``
        checkpoint (for the grid, one file per cell: ``<stem>.cell<i><suffix>``), its period and
        a progress line.

    Returns
    -------
    ExactnessReport
        ``passed``, ``tests`` (each ``.name .statistic .pvalue``), ``acceptance_rate``; for a grid
        also ``cells`` (per-cell reports), ``grid_tests`` and ``skipped``.

    Notes
    -----
    With ``y = (x - mu_draft)/sigma - delta e`` in each row's own frame, an exact rule gives
    ``y ~ N(0, I)`` (``proofs/P1-rank1-reduction.md``).  Tested: ``t = <e, y>``, ``||z_perp||^2``,
    ``<v_j, y>``, ``<w, y>`` by binned KS and chi-square tests; joint histograms of ``(t, r)`` and
    ``(t, <v_0, y>)``; ``sum t P z_perp`` and ``sum (t^2 - 1) P z_perp`` studentised by their exact
    covariance given the ``t`` (``chi^2`` at every ``n``, no CLT);
    fixed projections by KS (32 random, the coordinate axes below dim 16); far-tail counts beyond 4 and 5 sd by exact binomial tests;
    row-pair rank correlations and near-repeats within a call; the rank correlation of matched
    rows of two consecutive calls on the same nodes (``indep_calls``) and the calls-in-sequence
    contract (the generator advances, results are not overwritten by later calls, states keep
    the inputs' dtype); the accepted count of every
    delta group by exact binomial tests and against ``acceptance_bound(K, delta)``; an energy
    two-sample test.  Holm keeps the family-wise error at ``alpha`` (``proofs/S1-harness-power.md``).
    Power: any tested one-dimensional statistic whose pooled law is at KS distance
    ``>= eps = sqrt(log(2m/alpha)/(2n)) + sqrt(log(2/beta)/(2n)) + 1/n_bins`` from its null is
    rejected with probability ``>= 1 - beta`` (:func:`rass_theory.stats.power.detectable_ks_distance`);
    this covers the pooled laws only, not a defect confined to a share of rows, which is diluted
    by that share.
    """
    return _harness.check_exactness(verifier, K, delta, dim, chunk_stream=chunk_stream(options.get("backend", "numpy")),
                                    **options)


def certify(verifier, cells=None, **options):
    """Run :func:`check_exactness` over a grid with the family-wise error held across it.

    See :func:`rass_theory.stats.grid.certify` for the parameters; ``backend`` (default
    ``"numpy"``) picks the chunk runner of every cell, as for :func:`check_exactness`.
    """
    return _grid.certify(verifier, cells, chunk_stream=chunk_stream(options.get("backend", "numpy")), **options)
