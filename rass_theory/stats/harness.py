"""``check_exactness``: is a verifier exact?  A streaming, mergeable test with stated power.

One synthetic node (:class:`~rass_theory.stats.node.SyntheticNode`) is verified ``n_samples``
times, chunk by chunk.  Each chunk draws ``children ~ N(mu_draft, sigma^2 I)`` of shape
``(n, K, dim)``, calls the verifier, checks the contract, and bins the committed states'
probability-integral transforms (:class:`~rass_theory.stats.streaming.ExactnessCounts`).  The
merged counts are then tested (:mod:`rass_theory.stats.tests`; the list of tests, with their
names, is :mod:`rass_theory.stats.family`).  The statistical tests form one Holm family at level
``alpha`` (``statsmodels.multipletests``); the run passes when none is rejected and the contract
held on every row.

The harness is five modules with one job each: :mod:`.config` (the options, validated once into a
:class:`~.config.HarnessConfig`), :mod:`.chunks` (running chunks), :mod:`.call_check` (the
per-call contract check), :mod:`.family` (which tests run, named by the code that runs them) and
:mod:`.verdict` (the report); this module is the single-cell entry point and :mod:`.grid` runs
grids.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace

from . import tests as T
from .chunks import collect_counts, resolve_chunk_stream
from .config import build_node, check_detect, check_options, check_regime, harness_config
from .family import family_size, raw_tests, tail_tests
from .grid import certify, default_cells
from .looks import SequentialLooks, design_level, interim_adjusted, look_plan
from .power import detectable_ks_distance, samples_for_distance
from .verdict import make_report

__all__ = ["check_exactness", "certify"]


def check_exactness(verifier, K=None, delta=None, dim=None, *, chunk_stream=None, **options):
    """The exactness harness behind ``rt.check_exactness``, with its chunk runner as a parameter.

    The public entry is :func:`rass_theory.scale.check.check_exactness` (``rt.check_exactness``),
    whose docstring gives the options (:data:`rass_theory.stats.config.OPTION_DEFAULTS`), the
    result and the tests: it picks the chunk stream of ``backend`` and calls this function.
    Called directly (``chunk_stream=None``) this runs ``backend="numpy"``; ``backend="torch"`` or
    ``"dask"`` needs the backend's ``chunk_stream`` (``(verifier, node, specs, cfg) -> iterator of
    ExactnessCounts``, see :func:`~rass_theory.stats.chunks.resolve_chunk_stream`) and raises
    ``ValueError`` without one.  The options are validated (with the same errors) before the
    chunk stream is looked at.  With ``K`` or ``delta`` left ``None`` the run is the default grid
    (:func:`rass_theory.stats.grid.certify`).

    With ``stop_early`` (default) the cell has interim looks after chunks 1, 2, 4, ... and stops,
    FAILED, at the first one where a test is decisively rejected (:mod:`rass_theory.stats.looks`:
    ``alpha / 100`` is spent on the looks, the final Holm runs at ``0.99 alpha``; proof in
    ``proofs/S1-harness-power.md``, "Sequential looks").  ``stop_early=False``: no looks, Holm at
    ``alpha``.
    """
    o = check_options(options)
    regime = check_regime(o["regime"])
    if K is None or delta is None:
        cells = default_cells(verifier, K=K, delta=delta, dim=dim, regime=regime)
        return certify(verifier, cells, show=False, chunk_stream=chunk_stream, **{**options, "regime": regime})
    t0 = time.perf_counter()
    detect = check_detect(o["detect"], o["n_bins"])
    cfg = harness_config(verifier, K, delta, 8 if dim is None else dim,
                         **{**{k: v for k, v in options.items() if k not in ("detect", "stop_early")}, "regime": regime})
    if detect is not None:   # n designed at the level the final Holm actually uses (looks: 0.99 alpha)
        m = family_size(cfg)
        n_design = max(2, samples_for_distance(detect, design_level(cfg.alpha, o["stop_early"]), m,
                                               cfg.false_pass_rate, cfg.n_bins))
        cfg = replace(cfg, n_samples=n_design)
        level = look_plan([cfg], cfg.alpha, o["stop_early"]).final_alpha
        print(f"check_exactness: detect={detect:g} -> n = {n_design:,} rows per dtype pass: detects a pooled KS "
              f"distance >= {detectable_ks_distance(n_design, level, m, cfg.false_pass_rate, cfg.n_bins):.4g} "
              f"with probability >= {1 - cfg.false_pass_rate:g} at family-wise false-fail rate {cfg.alpha:g} "
              f"(Holm over m = {m} tests at the final look's level {level:g}"
              f"{'; alpha/100 is spent on the interim looks' if level < cfg.alpha else ''})", file=sys.stderr)
    chunk_stream = resolve_chunk_stream(cfg, chunk_stream)
    if o["rng"] is None:
        print(f"check_exactness: random seed {cfg.seed} (pass rng={cfg.seed} to reproduce)", file=sys.stderr)
    node = build_node(cfg)
    plan = look_plan([cfg], cfg.alpha, o["stop_early"])
    looks = SequentialLooks(cfg, node, plan)
    counts, start = collect_counts(verifier, cfg, node, chunk_stream, looks if looks.n_looks else None)
    if looks.stopped is not None:
        raw = looks.stopped.tests
        reject, p_adj = interim_adjusted(raw, plan)
    else:
        raw = raw_tests(counts, cfg) + tail_tests(counts, node.dim, node.n_directions)
        reject, p_adj = T.holm([t.pvalue for _, t in raw], plan.final_alpha)
    return make_report(counts, node, cfg, raw, p_adj, reject, time.perf_counter() - t0, start,
                       stop_look=None if looks.stopped is None else looks.stopped.look, n_looks=looks.n_looks,
                       level=plan.final_alpha)
