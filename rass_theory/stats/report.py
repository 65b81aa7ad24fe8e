"""Result objects of the exactness harness: one test, one run (:class:`ExactnessReport`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["StatisticalTest", "ExactnessReport"]


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
    """Verdict of :func:`rass_theory.check_exactness`.

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

    Notes
    -----
    ``acceptance_rate``, ``acceptance_ci`` and ``expected_acceptance`` refer to the rows at the
    named ``delta`` of the first pass.
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
        """One line: verdict, node, n, acceptance and detectable distance."""
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
                f"{self.elapsed_seconds:.1f} s, seed {self.seed}" + (f"\n  rows: {self.regime}" if self.regime else ""))

    def to_table(self) -> str:
        """Plain-text table of every test."""
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
        """A ``rich.table.Table`` of the tests (for terminals)."""
        from rich.table import Table

        table = Table(title=title or self.summary(), title_justify="left")
        for col in ("test", "statistic", "p-value", "p (Holm)", "result", "detail"):
            table.add_column(col)
        for t in self.tests:
            table.add_row(t.name, f"{t.statistic:.5g}", f"{t.pvalue:.3g}", f"{t.pvalue_adjusted:.3g}",
                          "[green]pass[/green]" if t.passed else "[bold red]FAIL[/bold red]", t.detail)
        return table

    def to_dict(self, include_counts: bool = False) -> dict:
        """JSON-serialisable dictionary (histograms only with ``include_counts``)."""
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
            "named_share": self.named_share, "regime": self.regime,
            "groups": [{"delta": d, "rows": n, "acceptance": _num(a), "exact": _num(e)} for d, n, a, e in self.groups],
        }
        if include_counts and self.counts is not None:
            out["counts"] = [{k: v.tolist() for k, v in c.to_arrays().items()}
                             for c in (self.pass_counts or (self.counts,))]
        return out
