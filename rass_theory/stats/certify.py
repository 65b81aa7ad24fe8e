"""``certify``: the exactness harness over a grid of nodes, family-wise error held across the grid.

Every cell ``(K, delta, dim)`` is run exactly as :func:`rass_theory.check_exactness` runs it (its
own independent seed), then **one** Holm procedure covers every statistical test of every cell.
Holm controls the family-wise error rate under any dependence, so the probability that an exact
verifier fails *anywhere* on the grid is at most ``alpha``.  Holm was preferred to a Bonferroni
split ``alpha / n_cells`` per cell: it is uniformly more powerful and gives the same guarantee.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from . import tests as T
from .harness import (DEFAULT_N_SAMPLES, _config, _family_size, build_node, collect_counts, make_report,
                      permutations_for, raw_tests)

__all__ = ["certify", "CertifyResult", "default_cells"]


def default_cells(verifier=None) -> list:
    """The default grid: ``K in {2, 4}`` (or the verifier's fixed ``K``), ``delta in {0, 0.5, 2}``, ``dim = 8``."""
    fixed_K = getattr(verifier, "K", None)
    Ks = (fixed_K,) if isinstance(fixed_K, int) else (2, 4)
    return [(K, delta, 8) for K in Ks for delta in (0.0, 0.5, 2.0)]


def _normalise_cells(cells) -> list:
    out = []
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
            out.append((c["K"], c["delta"], c["dim"]))
        else:
            try:
                K, delta, dim = c
            except (TypeError, ValueError) as exc:
                raise ValueError(f"cells[{i}] must be a (K, delta, dim) triple, got {c!r}") from exc
            out.append((K, delta, dim))
    return out


@dataclass(frozen=True)
class CertifyResult:
    """Verdict of :func:`certify`.

    Attributes
    ----------
    passed : bool
        Every cell passed (Holm over the whole grid at level ``alpha``).
    alpha : float
    reports : tuple of ExactnessReport
        One per cell, with grid-wide Holm-adjusted p-values.
    n_tests : int
        Size of the grid-wide Holm family.
    elapsed_seconds : float
    """

    passed: bool
    alpha: float
    reports: tuple
    n_tests: int
    elapsed_seconds: float

    def _rows(self):
        for r in self.reports:
            stat = [t for t in r.tests if t.name != "contract"]
            worst = min(stat, key=lambda t: (np.nan_to_num(t.pvalue_adjusted, nan=1.0)))
            exp = "n/a" if r.expected_acceptance is None else f"{r.expected_acceptance:.5f}"
            failed = ", ".join(t.name for t in r.failed_tests) or "-"
            yield (str(r.K), f"{r.delta:g}", str(r.dim), f"{r.n_samples:,}", f"{r.acceptance_rate:.5f}", exp,
                   f"{worst.name} {worst.pvalue_adjusted:.3g}", f"{r.detectable_ks_distance:.4f}",
                   "pass" if r.passed else "FAIL", failed)

    _HEADER = ("K", "delta", "dim", "n", "acceptance", "exact", "smallest p (Holm, grid)", "detectable KS",
               "result", "failed tests")

    def to_table(self) -> str:
        rows = [self._HEADER] + list(self._rows())
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEADER))]
        head = (f"certify: {'PASSED' if self.passed else 'FAILED'} over {len(self.reports)} cells, "
                f"{self.n_tests} tests, family-wise alpha={self.alpha:g} (Holm), {self.elapsed_seconds:.1f} s")
        return "\n".join([head] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows])

    def __str__(self) -> str:
        return self.to_table()

    def to_rich_table(self):
        from rich.table import Table

        verifier = self.reports[0].verifier_name if self.reports else "?"
        table = Table(title=f"certify {verifier}: {'PASSED' if self.passed else 'FAILED'} "
                            f"(Holm over {self.n_tests} tests, alpha={self.alpha:g})", title_justify="left")
        for col in self._HEADER:
            table.add_column(col)
        for row in self._rows():
            row = list(row)
            row[8] = "[green]pass[/green]" if row[8] == "pass" else "[bold red]FAIL[/bold red]"
            table.add_row(*row)
        return table

    def to_dict(self) -> dict:
        return {"passed": self.passed, "alpha": self.alpha, "n_tests": self.n_tests,
                "elapsed_seconds": self.elapsed_seconds, "cells": [r.to_dict() for r in self.reports]}


def certify(verifier, cells=None, *, n_samples=DEFAULT_N_SAMPLES, alpha=1e-3, rng=0, show=True, console=None,
            **kwargs) -> CertifyResult:
    """Check ``verifier`` on every cell of a grid with the family-wise error held across the grid.

    Parameters
    ----------
    verifier : callable
        As for :func:`rass_theory.check_exactness`.
    cells : iterable of (K, delta, dim) or of dicts with those keys, optional
        Default :func:`default_cells`.
    n_samples, alpha, rng
        As for ``check_exactness``; ``alpha`` is the error rate of the whole grid.  Cell ``i`` runs
        with the seed ``SeedSequence(seed, spawn_key=(4, i))``.
    show : bool, default True
        Print one rich table.
    console : rich.console.Console, optional
    **kwargs
        Any other keyword of ``check_exactness`` except ``checkpoint`` (e.g. ``chunk_size``,
        ``sigma``, ``backend``), applied to every cell.

    Returns
    -------
    CertifyResult

    Notes
    -----
    With ``m_c`` tests in cell ``c`` the family has ``m = sum_c m_c`` hypotheses and Holm rejects
    the ``i``-th smallest p-value when all of ``p_(j) <= alpha / (m - j + 1)``, ``j <= i``.  The
    energy test's permutation count defaults to ``ceil(1.5 m / alpha)`` (capped at 1e5) so it can
    reach Holm's first threshold, and each report's ``detectable_ks_distance`` uses the grid's
    ``m``.
    """
    t0 = time.perf_counter()
    if "checkpoint" in kwargs:
        raise TypeError("certify does not take checkpoint; checkpoint single cells with check_exactness")
    cells = default_cells(verifier) if cells is None else _normalise_cells(cells)
    from .harness import _seed_entropy
    from .node import stream_seed

    root = _seed_entropy(rng)
    user_perms = kwargs.pop("n_permutations", None)
    expected = kwargs.pop("expected_acceptance", None)
    cfgs = []
    for i, (K, delta, dim) in enumerate(cells):
        cfgs.append(_config(verifier, K, delta, dim, n_samples, alpha, stream_seed(root, (4, i)), expected,
                            kwargs.get("sigma", 1.0), kwargs.get("chunk_size", None), kwargs.get("n_directions"),
                            kwargs.get("n_bins", 4096), kwargs.get("two_sample_size", 400), user_perms,
                            kwargs.get("false_pass_rate", 0.01), kwargs.get("backend", "numpy"),
                            kwargs.get("device"), kwargs.get("backend_options"), None, 1,
                            kwargs.get("progress", False)))
    unknown = set(kwargs) - {"sigma", "chunk_size", "n_directions", "n_bins", "two_sample_size",
                             "false_pass_rate", "backend", "device", "backend_options", "progress"}
    if unknown:
        raise TypeError(f"certify got unexpected keyword argument(s) {sorted(unknown)}")
    m_total = sum(_family_size(c) for c in cfgs)
    if user_perms is None:
        perms = permutations_for(m_total, alpha)
        cfgs = [_replace_perms(c, perms) for c in cfgs]
    runs = []
    for cfg in cfgs:
        node = build_node(cfg)
        t_cell = time.perf_counter()
        counts, start = collect_counts(verifier, cfg, node)
        raw = raw_tests(counts, node, cfg)
        runs.append((cfg, node, counts, raw, start, time.perf_counter() - t_cell))
    all_p = [t.pvalue for run in runs for _, t in run[3]]
    reject, p_adj = T.holm(all_p, alpha)
    reports, offset = [], 0
    for cfg, node, counts, raw, start, elapsed in runs:
        k = len(raw)
        reports.append(make_report(counts, node, cfg, raw, p_adj[offset:offset + k], reject[offset:offset + k],
                                   elapsed, start, n_family=m_total))
        offset += k
    result = CertifyResult(all(r.passed for r in reports), alpha, tuple(reports), m_total, time.perf_counter() - t0)
    if show:
        if console is None:
            from rich.console import Console

            console = Console()
        console.print(result.to_rich_table())
    return result


def _replace_perms(cfg, perms):
    from dataclasses import replace

    return replace(cfg, n_permutations=perms)
