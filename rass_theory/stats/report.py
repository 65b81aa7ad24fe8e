"""Result objects of the exactness harness: one test (:class:`StatisticalTest`), one run (:class:`ExactnessReport`).

A run is one cell or a grid; a grid's result is an :class:`ExactnessReport` whose ``cells`` hold
one report per cell (:meth:`ExactnessReport.from_cells`), so ``rt.check_exactness`` returns one
type whatever it ran.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

__all__ = ["StatisticalTest", "ExactnessReport", "POWER_SCOPE"]

#: What the stated power covers, printed with every grid result.
POWER_SCOPE = ("Stated power (detectable KS distance per cell) covers each tested statistic's law pooled over the "
               "cell's rows (float64 pass); a defect confined to some rows (the correction branch, one delta "
               "group, one dtype) is diluted by their share, and laws outside the tested statistics (other "
               "directions, dependence beyond row pairs (i, i+1), (i, i+n/2)) carry no power guarantee.")


@dataclass(frozen=True)
class StatisticalTest:
    """One test of a harness run.

    Attributes
    ----------
    name : str
        ``"s_ks"``, ``"s_chi2"``, ``"rperp_ks"``, ``"rperp_chi2"``, ``"dir{j}_ks"``,
        ``"dir{j}_chi2"``, ``"joint_chi2"``, ``"acceptance_binomial"``, ``"energy_two_sample"``
        or ``"contract"``.
    statistic : float
    pvalue : float
        Raw p-value (NaN when the test could not run).
    pvalue_adjusted : float
        Holm-adjusted p-value within the run's family (the whole grid for :func:`certify`).
        The ``contract`` check is not a statistical test: its p-value is 0 (violations) or 1 and it
        is not part of the family.
    passed : bool
    detail : str
    """

    __test__ = False  # not a pytest test class

    name: str
    statistic: float
    pvalue: float
    pvalue_adjusted: float
    passed: bool
    detail: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "statistic": _num(self.statistic), "pvalue": _num(self.pvalue),
                "pvalue_adjusted": _num(self.pvalue_adjusted), "passed": bool(self.passed),
                "detail": self.detail}


def _num(x):
    x = float(x)
    return None if math.isnan(x) else x


@dataclass(frozen=True)
class ExactnessReport:
    """Verdict of :func:`rass_theory.check_exactness` (one cell or a grid) and :func:`rass_theory.certify`.

    Attributes
    ----------
    passed : bool
        No contract violation and no test rejected at family-wise level ``alpha`` (Holm).
    tests : tuple of StatisticalTest
    acceptance_rate : float
        Accepted fraction of the valid rows.
    acceptance_ci : (float, float)
        Clopper-Pearson interval at level ``1 - alpha``.
    expected_acceptance : float or None
        Exact acceptance the count was tested against (``None``: not tested).
    n_samples, n_valid : int
        Rows drawn, and rows that satisfied the contract.
    alpha : float
        Family-wise significance level.
    detectable_ks_distance : float
        Smallest KS distance of any tested one-dimensional statistic from its null law that the
        run rejects with probability ``>= 1 - false_pass_rate``
        (:func:`rass_theory.stats.power.detectable_ks_distance`).
    false_pass_rate : float
    elapsed_seconds : float
    seed : int
        Entropy of the run's ``SeedSequence`` (reproduces it exactly).
    K, delta, dim, sigma : the node.
    backend : str
    verifier_name : str
    violations : dict
        Rows violating the contract, by kind.
    messages : tuple of str
        Contract messages.
    resumed_from_chunk : int
        First chunk computed in this call (0 unless resumed from a checkpoint).
    counts : ExactnessCounts
        The merged statistics of the float64 (first) pass; ``pass_counts`` has every pass's.
    dtypes : tuple of str
        Precision passes run (tests of pass ``p > 0`` are prefixed ``"<dtype>:"``).
    correction_fraction : float
        Fraction of valid rows (all passes) that took the correction branch.
    groups : tuple of (delta, rows, acceptance, exact)
        The delta groups of the first pass (the named delta first; ``exact`` NaN if undeclared).
    named_share : float
        Share of rows at the named delta.
    regime : str
        The law of the rows' ``(delta, sigma, ||mu_draft||/sigma)``: the default regime or the
        recorded one (``check_exactness(..., regime=trace)``).
    cells : tuple of ExactnessReport
        A grid's per-cell reports (grid-wide Holm p-values); empty for one cell.
    grid_tests : tuple of StatisticalTest
        A grid's far-tail tests pooled over every cell and pass (part of the same Holm family).
    skipped : tuple of (K, delta, dim)
        A grid's cells not run because an earlier cell decided the failure (``stop_early``).
    n_tests : int
        Size of the Holm family (a grid's: every cell's tests and the pooled tails).
    stop_look : int or None
        The interim look (1-based) at which the cell stopped, FAILED, on a decisive rejection or
        a contract violation; ``None`` when it ran to its final look
        (:mod:`rass_theory.stats.looks`).  A grid: its stopped cell's, if any.
    n_looks : int
        Interim looks scheduled in the cell (a grid: in the cells run).
    rows_used : int
        Rows run, every dtype pass together (a grid: every cell run).

    Notes
    -----
    ``acceptance_rate``, ``acceptance_ci`` and ``expected_acceptance`` refer to the rows at the
    named ``delta`` of the first pass; for a grid, of the first cell (the node fields ``K``,
    ``delta``, ``dim``, ... too, see ``cells`` for the others).  A grid's ``tests`` are every
    cell's, named ``"K=<K>,delta=<delta>/<test>"``, then the pooled tails ``"grid/<test>"``; its
    ``detectable_ks_distance`` is the smallest over the cells (the power cell's) and its
    ``correction_fraction`` is over every valid row of the grid.
    """

    passed: bool
    tests: tuple
    acceptance_rate: float
    acceptance_ci: tuple
    expected_acceptance: float | None
    n_samples: int
    n_valid: int
    alpha: float
    detectable_ks_distance: float
    false_pass_rate: float
    elapsed_seconds: float
    seed: int
    K: int
    delta: float
    dim: int
    sigma: float
    backend: str
    verifier_name: str
    violations: dict = field(default_factory=dict)
    messages: tuple = ()
    resumed_from_chunk: int = 0
    counts: object = field(default=None, repr=False, compare=False)
    dtypes: tuple = ("float64",)
    correction_fraction: float = float("nan")
    groups: tuple = ()
    named_share: float = 1.0
    pass_counts: tuple = field(default=(), repr=False, compare=False)
    regime: str = ""
    cells: tuple = field(default=(), repr=False)
    grid_tests: tuple = ()
    skipped: tuple = ()
    n_tests: int = 0
    stop_look: int | None = None
    n_looks: int = 0
    rows_used: int = 0

    @classmethod
    def from_cells(cls, cells, *, passed, alpha, n_tests, elapsed_seconds, seed, grid_tests=(), skipped=(),
                   regime="") -> "ExactnessReport":
        """The result of a grid: one report whose ``cells`` are the per-cell reports (see Notes)."""
        cells = tuple(cells)
        first = cells[0]
        tests = tuple(replace(t, name=f"K={r.K},delta={r.delta:g}/{t.name}") for r in cells for t in r.tests)
        rows = sum(r.n_valid * len(r.dtypes) for r in cells)
        corrections = (sum(r.correction_fraction * r.n_valid * len(r.dtypes) for r in cells) / rows if rows
                       else float("nan"))
        violations, messages = {}, []
        for r in cells:
            for k, v in r.violations.items():
                violations[k] = violations.get(k, 0) + v
            messages += [m for m in r.messages if m not in messages]
        return cls(bool(passed), tests + tuple(grid_tests), first.acceptance_rate, first.acceptance_ci,
                   first.expected_acceptance, first.n_samples, first.n_valid, alpha,
                   min(r.detectable_ks_distance for r in cells), first.false_pass_rate, elapsed_seconds, seed,
                   first.K, first.delta, first.dim, first.sigma, first.backend, first.verifier_name, violations,
                   tuple(messages), max(r.resumed_from_chunk for r in cells), first.counts, first.dtypes, corrections,
                   first.groups, first.named_share, first.pass_counts, regime, cells, tuple(grid_tests),
                   tuple(skipped), int(n_tests),
                   next((r.stop_look for r in cells if r.stop_look is not None), None),
                   sum(r.n_looks for r in cells), sum(r.rows_used for r in cells))

    def test(self, name: str) -> StatisticalTest:
        """The test called ``name`` (``KeyError`` if absent)."""
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(f"no test named {name!r}; tests are {[t.name for t in self.tests]}")

    @property
    def failed_tests(self) -> tuple:
        return tuple(t for t in self.tests if not t.passed)

    def summary(self) -> str:
        """One line: verdict, node, n, acceptance and detectable distance (a grid: its header)."""
        if self.cells:
            return self._grid_header()
        verdict = "PASSED" if self.passed else "FAILED"
        exp = "n/a" if self.expected_acceptance is None else f"{self.expected_acceptance:.6f}"
        lo, hi = self.acceptance_ci
        others = ", ".join(f"{g[0]:g}" for g in self.groups[1:])
        rows = (f"{self.named_share:.0%} of rows at delta={self.delta:g}, the rest at {{{others}}}" if others
                else f"rows at delta={self.delta:g}")
        return (f"{verdict}: {self.verifier_name} at K={self.K}, delta={self.delta:g}, dim={self.dim}, "
                f"n={self.n_samples:,} per dtype {list(self.dtypes)} (valid {self.n_valid:,}), alpha={self.alpha:g}; "
                f"{rows}; {self.correction_fraction:.1%} of rows took the correction branch; acceptance at "
                f"delta={self.delta:g} {self.acceptance_rate:.6f} [{lo:.6f}, {hi:.6f}] vs exact {exp}; detects a "
                f"pooled KS distance >= {self.detectable_ks_distance:.4g} with prob >= {1 - self.false_pass_rate:g}; "
                f"{self.elapsed_seconds:.1f} s, seed {self.seed}" + self._look_text()
                + (f"\n  rows: {self.regime}" if self.regime else ""))

    def _look_text(self) -> str:
        if self.stop_look is None:
            return ""
        return (f"; stopped at interim look {self.stop_look} of {self.n_looks} after {self.rows_used:,} rows "
                f"(rass_theory.stats.looks)")

    def to_table(self) -> str:
        """Plain-text table of every test (a grid: one row per cell)."""
        if self.cells:
            return self._grid_table()
        rows = [("test", "statistic", "p-value", "p (Holm)", "result", "detail")]
        for t in self.tests:
            rows.append((t.name, f"{t.statistic:.5g}", f"{t.pvalue:.3g}", f"{t.pvalue_adjusted:.3g}",
                         "pass" if t.passed else "FAIL", t.detail))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = [self.summary()]
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5])
        if self.messages:
            lines.append("contract: " + " | ".join(self.messages))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_table()

    def to_rich_table(self, title: str | None = None):
        """A ``rich.table.Table`` of the tests (a grid: one row per cell; for terminals)."""
        from rich.table import Table

        if self.cells:
            return self._grid_rich_table(Table)

        table = Table(title=title or self.summary(), title_justify="left")
        for col in ("test", "statistic", "p-value", "p (Holm)", "result", "detail"):
            table.add_column(col)
        for t in self.tests:
            table.add_row(t.name, f"{t.statistic:.5g}", f"{t.pvalue:.3g}", f"{t.pvalue_adjusted:.3g}",
                          "[green]pass[/green]" if t.passed else "[bold red]FAIL[/bold red]", t.detail)
        return table

    def to_dict(self, include_counts: bool = False) -> dict:
        """JSON-serialisable dictionary (histograms only with ``include_counts``; a grid: its cells')."""
        if self.cells:
            return {"passed": self.passed, "alpha": self.alpha, "n_tests": self.n_tests, "seed": self.seed,
                    "correction_fraction": self.correction_fraction, "power_scope": POWER_SCOPE,
                    "elapsed_seconds": self.elapsed_seconds,
                    "cells": [r.to_dict(include_counts) for r in self.cells],
                    "regime": self.regime, "skipped": [list(c) for c in self.skipped],
                    "stop_look": self.stop_look, "n_looks": self.n_looks, "rows_used": self.rows_used}
        out = {
            "passed": bool(self.passed), "tests": [t.to_dict() for t in self.tests],
            "acceptance_rate": _num(self.acceptance_rate), "acceptance_ci": [_num(x) for x in self.acceptance_ci],
            "expected_acceptance": self.expected_acceptance, "n_samples": self.n_samples,
            "n_valid": self.n_valid, "alpha": self.alpha, "detectable_ks_distance": self.detectable_ks_distance,
            "false_pass_rate": self.false_pass_rate, "elapsed_seconds": self.elapsed_seconds, "seed": self.seed,
            "K": self.K, "delta": self.delta, "dim": self.dim, "sigma": self.sigma, "backend": self.backend,
            "verifier_name": self.verifier_name, "violations": dict(self.violations),
            "messages": list(self.messages), "resumed_from_chunk": self.resumed_from_chunk,
            "dtypes": list(self.dtypes), "correction_fraction": _num(self.correction_fraction),
            "named_share": self.named_share, "regime": self.regime, "stop_look": self.stop_look,
            "n_looks": self.n_looks, "rows_used": self.rows_used,
            "groups": [{"delta": d, "rows": n, "acceptance": _num(a), "exact": _num(e)} for d, n, a, e in self.groups],
        }
        if include_counts and self.counts is not None:
            out["counts"] = [{k: v.tolist() for k, v in c.to_arrays().items()}
                             for c in (self.pass_counts or (self.counts,))]
        return out

    # ------------------------------------------------------------------ a grid's rendering
    _GRID_HEADER = ("K", "delta", "dim", "n", "acceptance", "exact", "corrections", "smallest p (Holm, grid)",
                    "detectable KS", "s/cell", "result", "failed tests")

    def _grid_rows(self):
        for r in self.cells:
            stat = [t for t in r.tests if t.name != "contract"]
            worst = min(stat, key=lambda t: (np.nan_to_num(t.pvalue_adjusted, nan=1.0)))
            exp = "n/a" if r.expected_acceptance is None else f"{r.expected_acceptance:.5f}"
            failed = ", ".join(t.name for t in r.failed_tests) or "-"
            yield (str(r.K), f"{r.delta:g}", str(r.dim), f"{r.n_samples:,}", f"{r.acceptance_rate:.5f}", exp,
                   f"{r.correction_fraction:.1%}", f"{worst.name} {worst.pvalue_adjusted:.3g}",
                   f"{r.detectable_ks_distance:.4f}", f"{r.elapsed_seconds:.1f}", "pass" if r.passed else "FAIL",
                   failed)

    def _grid_header(self) -> str:
        return (f"certify: {'PASSED' if self.passed else 'FAILED'} over {len(self.cells)} cells, "
                f"{self.n_tests} tests, family-wise alpha={self.alpha:g} (Holm), {self.elapsed_seconds:.1f} s, "
                f"seed {self.seed}; {self.correction_fraction:.1%} of rows took the correction branch\n"
                + self._regime_line() + POWER_SCOPE)

    def _grid_table(self) -> str:
        rows = [self._GRID_HEADER] + list(self._grid_rows())
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._GRID_HEADER))]
        lines = [self._grid_header()] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        return "\n".join(lines + [self._grid_line()] + ([self._skipped_line()] if self.skipped else []))

    def _regime_line(self) -> str:
        return f"rows: {self.regime}\n" if self.regime else ""

    def _skipped_line(self) -> str:
        cells = ", ".join(f"K={k},delta={d:g},dim={m}" for k, d, m in self.skipped)
        return (f"stopped early: an earlier cell's p-value fell below alpha/m, which Holm rejects whatever the rest "
                f"gives, or a cell stopped at an interim look{self._look_text()}; not run: {cells}")

    def _grid_line(self) -> str:
        if not self.grid_tests:
            return ""
        worst = min(self.grid_tests, key=lambda t: np.nan_to_num(t.pvalue_adjusted, nan=1.0))
        failed = ", ".join(t.name for t in self.grid_tests if not t.passed) or "-"
        return (f"far tails pooled over the grid ({len(self.grid_tests)} tests): smallest p (Holm) "
                f"{worst.name} {worst.pvalue_adjusted:.3g} ({worst.detail}); failed: {failed}")

    def _grid_rich_table(self, Table):
        table = Table(title=f"certify {self.verifier_name}: {'PASSED' if self.passed else 'FAILED'} "
                            f"(Holm over {self.n_tests} tests, alpha={self.alpha:g}, seed {self.seed}; "
                            f"{self.correction_fraction:.1%} of rows took the correction branch)",
                      caption=self._grid_line() + "\n" + self._regime_line() + POWER_SCOPE
                      + ("\n" + self._skipped_line() if self.skipped else ""),
                      title_justify="left", caption_justify="left")
        for col in self._GRID_HEADER:
            table.add_column(col)
        for row in self._grid_rows():
            row = list(row)
            row[10] = "[green]pass[/green]" if row[10] == "pass" else "[bold red]FAIL[/bold red]"
            table.add_row(*row)
        return table
