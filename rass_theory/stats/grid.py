"""``certify``: the exactness harness over a grid of nodes, family-wise error held across the grid.

Every cell ``(K, delta, dim)`` is run exactly as :func:`rass_theory.check_exactness` runs it (its
own independent seed), then **one** Holm procedure covers every statistical test of every cell.
Holm controls the family-wise error rate under any dependence, so the probability that an exact
verifier fails *anywhere* on the grid is at most ``alpha``.  Holm was preferred to a Bonferroni
split ``alpha / n_cells`` per cell: it is uniformly more powerful and gives the same guarantee.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import numpy as np

from . import tests as T
from .chunks import collect_counts
from .config import (DEFAULT_DTYPES, DEFAULT_N_SAMPLES, build_node, check_detect, check_options, check_regime,
                     harness_config, seed_entropy)
from .family import contract_violated, family_size, permutations_for, raw_tests, tail_test_names, tail_tests
from .looks import SequentialLooks, design_level, interim_adjusted, look_plan
from .node import stream_seed
from .power import detectable_ks_distance, samples_for_distance
from .report import ExactnessReport, StatisticalTest
from .verdict import make_report

__all__ = ["certify", "default_cells", "DEFAULT_CELLS"]

#: The default grid, cheapest cells first (the run stops at the first cell that decides a
#: failure).  Every cell spreads its rows over tiny, middle and large deltas and over
#: ``||mu_draft||/sigma`` up to 1e4 (:mod:`rass_theory.stats.regime`); together they cover an odd
#: ``K``, a ``K >= 5``, ``dim = 256`` and one *power cell* (the last) whose 2.5 million float64
#: rows detect a pooled KS distance below 3e-3 (``detectable KS`` column).
DEFAULT_CELLS = (
    {"K": 2, "delta": 0.5, "dim": 8, "n_samples": 100_000},
    {"K": 3, "delta": 1.0, "dim": 8, "n_samples": 100_000},
    {"K": 8, "delta": 2.0, "dim": 8, "n_samples": 100_000},
    {"K": 4, "delta": 1.0, "dim": 256, "n_samples": 20_000},
    {"K": 4, "delta": 1.0, "dim": 8, "n_samples": 2_500_000, "dtype": ("float64",), "power": True},
)
DEFAULT_KS = tuple(sorted({c["K"] for c in DEFAULT_CELLS} | {4}))
DEFAULT_DELTAS = tuple(sorted({c["delta"] for c in DEFAULT_CELLS}))


def default_cells(verifier=None, *, K=None, delta=None, dim=None, regime=None) -> list:
    """The default grid (:data:`DEFAULT_CELLS`) as a list of cell dicts.

    ``K`` (or the verifier's fixed integer ``K``), ``delta`` and ``dim``, when given, replace the
    cells' own values (duplicates are dropped).  With a recorded ``regime`` the cells' deltas are
    the regime's (its median group is named) and its ``Ks``, when it records them, replace the
    default ``K`` values, each with the power cell's size for the most common one.
    """
    fixed_K = getattr(verifier, "K", None)
    if K is None and isinstance(fixed_K, int) and not isinstance(fixed_K, bool):
        K = fixed_K
    cells = [dict(c) for c in DEFAULT_CELLS]
    if regime is not None and getattr(regime, "Ks", ()) and K is None:
        ks = list(regime.Ks)
        cells = ([{"K": k, "delta": 1.0, "dim": 8, "n_samples": 100_000} for k in ks[1:]]
                 + [{**c, "K": ks[0]} for c in cells if c["dim"] != 8]
                 + [{**DEFAULT_CELLS[-1], "K": ks[0]}])
    out, seen = [], set()
    for c in cells:
        if K is not None:
            c["K"] = K
        if delta is not None:
            c["delta"] = delta
        if dim is not None:
            c["dim"] = dim
        key = (c["K"], c["delta"], c["dim"], c.get("power", False))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


_CELL_KEYS = {"K", "delta", "dim", "n_samples", "dtype", "power"}


def _normalise_cells(cells) -> list:
    """Cells as dicts ``{"K", "delta", "dim"[, "n_samples", "dtype", "power"]}`` (``ValueError`` names the cell)."""
    out = []
    if isinstance(cells, (str, bytes, dict)):
        raise TypeError(f"cells must be an iterable of (K, delta, dim) tuples or dicts, got {cells!r}")
    try:
        items = list(cells)
    except TypeError as exc:
        raise TypeError(f"cells must be an iterable of (K, delta, dim) tuples or dicts, got {cells!r}") from exc
    if not items:
        raise ValueError("cells must hold at least one (K, delta, dim) cell")
    for i, c in enumerate(items):
        if isinstance(c, dict):
            missing = {"K", "delta", "dim"} - set(c)
            if missing:
                raise ValueError(f"cells[{i}] is missing {sorted(missing)}")
            unknown = set(c) - _CELL_KEYS
            if unknown:
                raise ValueError(f"cells[{i}] has unknown key(s) {sorted(unknown)}; allowed: {sorted(_CELL_KEYS)}")
            out.append(dict(c))
        else:
            try:
                K, delta, dim = c
            except (TypeError, ValueError) as exc:
                raise ValueError(f"cells[{i}] must be a (K, delta, dim) triple, got {c!r}") from exc
            out.append({"K": K, "delta": delta, "dim": dim})
    return out


def _cell_checkpoint(path, i):
    if path is None:
        return None
    root, ext = os.path.splitext(os.fspath(path))
    return f"{root}.cell{i}{ext or '.npz'}"


def certify(verifier, cells=None, *, show=True, console=None, chunk_stream=None, **options) -> ExactnessReport:
    """Check ``verifier`` on every cell of a grid with the family-wise error held across it.

    Parameters
    ----------
    verifier : callable
        As for :func:`rass_theory.check_exactness`.
    cells : iterable of (K, delta, dim) or of dicts with those keys, optional
        Default :func:`default_cells`.  A dict may also name its own ``n_samples`` and ``dtype``.
    n_samples, alpha, rng, dtype
        As for ``check_exactness``; ``alpha`` is the error rate of the whole grid.  ``n_samples``
        and ``dtype``, when given, apply to every cell (``None``: each cell's own, else
        ``DEFAULT_N_SAMPLES`` and ``DEFAULT_DTYPES``).  Cell ``i`` runs with the seed
        ``SeedSequence(seed, spawn_key=(4, i))``; ``rng=None`` draws the seed and prints it.
    regime : DeltaTrace, run, mapping or Regime, optional
        Rows' ``delta``, ``sigma`` and ``||mu_draft||/sigma`` resampled from a recorded trace
        (:func:`rass_theory.stats.regime.regime_from_trace`).
    detect : float, optional
        Design the sample size: the power cell (the last default cell; with explicit cells, the
        last cell) gets the smallest ``n`` whose stated detectable KS distance is ``<= detect``
        (:func:`rass_theory.stats.power.samples_for_distance` with the grid's family size, ``alpha``
        and ``false_pass_rate``); the design is printed.
    stop_early : bool, default True
        Sequential looks: within a cell, interim looks after chunks 1, 2, 4, ... stop the cell,
        FAILED, once a raw p-value is at most :attr:`~rass_theory.stats.looks.LookPlan.level`
        (``alpha / 100`` spent, Bonferroni, over every look of every cell; the final Holm runs
        at ``0.99 alpha``; :mod:`rass_theory.stats.looks`); across cells, the grid stops after
        the first cell that stopped at a look or has a raw p-value ``<= 0.99 alpha / m`` (``m``
        the grid's family size), which Holm rejects whatever the other cells give.  The cells not
        run are listed in ``skipped``.  ``False``: every chunk of every cell, Holm at ``alpha``.
    show : bool, default True
        Print one rich table.
    chunk_stream : callable, optional
        The chunk runner of every cell (``None``: NumPy); :func:`rass_theory.scale.check.certify`
        passes the one of ``backend``.
    console : rich.console.Console, optional
    checkpoint : path, optional
        Cell ``i`` checkpoints to ``<stem>.cell<i><suffix>``; a rerun resumes every cell.
    **options
        Any other option of ``check_exactness`` (:data:`rass_theory.stats.config.OPTION_DEFAULTS`,
        e.g. ``chunk_size``, ``sigma``, ``backend``), applied to every cell.

    Returns
    -------
    ExactnessReport
        The grid's result: ``cells`` holds one report per cell run (grid-wide Holm p-values),
        ``tests`` every cell's tests (named ``"K=<K>,delta=<delta>/<test>"``) and the grid-pooled
        far tails (``grid_tests``), ``skipped`` the cells not run.

    Notes
    -----
    With ``m_c`` tests in cell ``c`` the family has ``m = sum_c m_c`` hypotheses and Holm rejects
    the ``i``-th smallest p-value when all of ``p_(j) <= alpha / (m - j + 1)``, ``j <= i``.  The
    energy test's permutation count defaults to ``ceil(1.5 m / alpha)`` (capped at 1e5) so it can
    reach Holm's first threshold, and each report's ``detectable_ks_distance`` uses the grid's
    ``m``.  Tests of cells skipped by ``stop_early`` enter the family with p-value 1.
    """
    t0 = time.perf_counter()
    o = check_options(options, "certify")
    regime = check_regime(o["regime"])
    detect = check_detect(o["detect"], o["n_bins"])
    alpha, n_samples, dtype = o["alpha"], o["n_samples"], o["dtype"]
    cells = default_cells(verifier, regime=regime) if cells is None else _normalise_cells(cells)
    root = seed_entropy(o["rng"])
    if o["rng"] is None:
        print(f"certify: random seed {root} (pass rng={root} to reproduce)", file=sys.stderr)
    user_perms = o["n_permutations"]
    shared = {k: v for k, v in options.items() if k not in ("n_samples", "dtype", "rng", "checkpoint", "regime",
                                                            "detect", "stop_early")}
    cfgs = []
    for i, cell in enumerate(cells):
        n_cell = n_samples if n_samples is not None else cell.get("n_samples", DEFAULT_N_SAMPLES)
        dt_cell = dtype if dtype is not None else cell.get("dtype", DEFAULT_DTYPES)
        cfgs.append(harness_config(verifier, cell["K"], cell["delta"], cell["dim"], **shared, n_samples=n_cell,
                                   dtype=dt_cell, rng=stream_seed(root, (4, i)),
                                   checkpoint=_cell_checkpoint(o["checkpoint"], i), regime=regime))

    def grid_family_size(cs):
        m = sum(family_size(c) for c in cs)   # every cell's own tests and far tails
        return m + sum(len(tail_test_names(dim, nd)) for dim, nd in {(c.dim, c.n_directions) for c in cs})

    m_total = grid_family_size(cfgs)
    if detect is not None:
        k = max(i for i, c in enumerate(cells) if c.get("power", False) or i == len(cells) - 1)
        n_design = max(2, samples_for_distance(detect, design_level(alpha, o["stop_early"]), m_total,
                                               cfgs[k].false_pass_rate, cfgs[k].n_bins))
        cfgs[k] = replace(cfgs[k], n_samples=n_design)
        m_total = grid_family_size(cfgs)
        level = look_plan(cfgs, alpha, o["stop_early"]).final_alpha
        achieved = detectable_ks_distance(n_design, level, m_total, cfgs[k].false_pass_rate, cfgs[k].n_bins)
        print(f"certify: detect={detect:g} -> n = {n_design:,} rows per dtype pass in cell {k} (K={cfgs[k].K}, "
              f"delta={cfgs[k].delta:g}, dim={cfgs[k].dim}): detects a pooled KS distance >= {achieved:.4g} with "
              f"probability >= {1 - cfgs[k].false_pass_rate:g} at family-wise false-fail rate {alpha:g} "
              f"(Holm over m = {m_total} tests at the final look's level {level:g})", file=sys.stderr)
    if user_perms is None:
        perms = permutations_for(m_total, alpha)
        cfgs = [replace(c, n_permutations=perms) for c in cfgs]
    plan = look_plan(cfgs, alpha, o["stop_early"])
    runs, skipped = [], ()
    for i, cfg in enumerate(cfgs):
        node = build_node(cfg)
        t_cell = time.perf_counter()
        looks = SequentialLooks(cfg, node, plan)
        counts, start = collect_counts(verifier, cfg, node, chunk_stream, looks if looks.n_looks else None)
        stop = looks.stopped
        raw = stop.tests if stop is not None else raw_tests(counts, cfg) + tail_tests(counts, node.dim,
                                                                                     node.n_directions)
        runs.append((cfg, node, counts, raw, start, time.perf_counter() - t_cell, stop, looks.n_looks))
        decisive = stop is not None or any(t.pvalue <= plan.final_alpha / m_total for _, t in raw
                                           if not np.isnan(t.pvalue))
        decisive = decisive or counts[0].n_rows > 0 and contract_violated(counts)
        if o["stop_early"] and decisive and i < len(cfgs) - 1:
            skipped = tuple((c.K, c.delta, c.dim) for c in cfgs[i + 1:])
            break
    # far tails pooled over the grid (cells of one dimension pool together)
    grid_raw = []
    dims = {(c.dim, c.n_directions) for c in cfgs}
    for key in sorted(dims):
        pooled = [c for run in runs if (run[0].dim, run[0].n_directions) == key for c in run[2]]
        if not pooled:
            continue
        prefix = "grid/" if len(dims) == 1 else f"grid(dim={key[0]})/"
        grid_raw += tail_tests(pooled, key[0], key[1], prefix)
    all_p = [t.pvalue for run in runs for _, t in run[3]] + [t.pvalue for _, t in grid_raw]
    n_missing = m_total - len(all_p)
    reject, p_adj = T.holm(all_p + [1.0] * max(n_missing, 0), plan.final_alpha)
    reports, offset = [], 0
    for cfg, node, counts, raw, start, elapsed, stop, n_looks in runs:
        k = len(raw)
        rj, pa = (reject[offset:offset + k], p_adj[offset:offset + k]) if stop is None else interim_adjusted(raw, plan)
        reports.append(make_report(counts, node, cfg, raw, pa, rj, elapsed, start, n_family=m_total,
                                   stop_look=None if stop is None else stop.look, n_looks=n_looks,
                                   level=plan.final_alpha))
        offset += k
    grid_tests = tuple(StatisticalTest(name, t.statistic, t.pvalue, float(pa),
                                       bool(np.isnan(t.pvalue) or not rj), t.detail)
                       for (name, t), pa, rj in zip(grid_raw, p_adj[offset:], reject[offset:]))
    passed = all(r.passed for r in reports) and all(t.passed for t in grid_tests) and not skipped
    regime_text = build_node(cfgs[0]).describe_regime() if cfgs else ""
    result = ExactnessReport.from_cells(tuple(reports), passed=passed, alpha=alpha, n_tests=m_total,
                                        elapsed_seconds=time.perf_counter() - t0, seed=root, grid_tests=grid_tests,
                                        skipped=skipped, regime=regime_text)
    if show:
        if console is None:
            from rich.console import Console

            console = Console()
        console.print(result.to_rich_table())
    return result
