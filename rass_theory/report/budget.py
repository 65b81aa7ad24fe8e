"""The report's cost model: work units per section, their seconds, and the budgets they must fit.

Each section's work is counted in the units its progress bar counts (:func:`section_work`), from
the configuration alone, so the total is known before anything runs.  ``UNIT_SECONDS`` turns
units into seconds; the rates were measured section by section on the project's 2-core machine
(one core per process, ``bench/readme_figures.py`` remeasures the whole report).  The budgets are
what the README promises: the default report in at most :data:`DEFAULT_LIMIT_SECONDS` and
``--quick`` in at most :data:`QUICK_LIMIT_SECONDS`, with room left for sections added later
(:data:`RESERVED_SECONDS`).  ``tests/test_report_budget.py`` fails when a section's estimated cost
at the embedded defaults grows past its budget.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UNIT_SECONDS", "BUDGETS", "QUICK_BUDGETS", "DEFAULT_LIMIT_SECONDS", "QUICK_LIMIT_SECONDS",
           "RESERVED_SECONDS", "SectionCost", "section_work", "estimate", "check_budget", "budgets_for"]

#: Wall-clock promise of the README for ``rass-theory report`` at its defaults, and with ``--quick``.
DEFAULT_LIMIT_SECONDS = 240.0
QUICK_LIMIT_SECONDS = 60.0
#: Seconds of each limit left for sections that are not in the cost model (a new section must add
#: its own entry; until then it runs inside this reserve).
RESERVED_SECONDS = {"default": 20.0, "quick": 8.0}

#: Seconds per unit of work (CPU seconds on one core of the project's 2-core machine), by
#: ``section.unit``.  Fitted to the per-section CPU seconds of one default and one quick report
#: (``manifest.json``'s ``cpu_seconds``, ``bench/readme_figures.py``, 2026-12-01; the machine was
#: shared, load average 10-13 on 2 cores, so CPU rather than wall time).
UNIT_SECONDS = {
    "acceptance.closed_form": 0.003,       # one (rule, K, delta) closed-form acceptance
    "acceptance.policy": 1.2,              # one optimal threshold policy (search over t; untabulated K)
    "acceptance.policy_table": 0.005,      # one exact acceptance of the tabulated threshold policy
    "weights.solve": 0.01,                 # one certified optimal_rank_weights (most are cached)
    "trees.point": 0.004,                  # one (K, L) pair of predicted speedups (D-GRS and RASS)
    "exactness.row": 4.0e-6,               # one harness row of one precision pass
    "exactness.run": 0.35,                 # fixed cost of one harness run (tests, two-sample test)
    "power.row": 3.5e-6,                   # one mutant harness row of one precision pass
    "power.run": 0.14,                     # fixed cost of one mutant run
    "diffusion.trajectory": 1.2e-4,        # one trajectory of one arm, per 64 dimensions (at least 1)
    "diffusion.fixed": 2.0,                # the mixture and the sampler's first call
    "learned.trajectory": 0.0027,          # one digits trajectory of one arm (torch tree sampler, one thread)
    "learned.fixed": 10.0,                 # model, plain-chain quality metrics, figures (measured 8 to 14 s)
    "mnist.fixed": 3.0,                    # reads bench/mnist_speedup.py's saved summary, draws 4 figures
    "section.fixed": 0.8,                  # figures and data files of any section
}

#: Per-section budgets (CPU seconds) at the embedded defaults and in quick mode.
BUDGETS = {"acceptance": 15.0, "weights": 10.0, "trees": 5.0, "exactness": 70.0, "power": 25.0,
           "diffusion": 15.0, "learned": 60.0, "mnist": 8.0}
QUICK_BUDGETS = {"acceptance": 3.0, "weights": 3.0, "trees": 2.0, "exactness": 18.0, "power": 5.0,
                 "diffusion": 5.0, "learned": 12.0, "mnist": 4.0}


@dataclass(frozen=True)
class SectionCost:
    """Work of one section: ``units`` (``{unit: count}``), the progress total and estimated seconds."""

    key: str
    units: dict
    seconds: float

    @property
    def total(self) -> int:
        """Units the section's progress bar counts (see :func:`section_work`)."""
        return int(sum(v for k, v in self.units.items() if not k.endswith(".fixed")))


def _n_dtypes(options) -> int:
    return len(options.get("dtype", ("float64", "float32")))


def section_work(key: str, config) -> dict:
    """``{unit: count}`` for section ``key`` under ``config`` (a :class:`~rass_theory.report.config.ReportConfig`)."""
    from ..plot import theory
    from .config import SECTION_KEYS

    cfg = config
    if key not in SECTION_KEYS:
        raise ValueError(f"unknown report section {key!r}; sections: {', '.join(SECTION_KEYS)}")
    work = {"section.fixed": 1}
    if key == "acceptance":
        grid = set(cfg.deltas) | set(cfg.policy_deltas)
        fast = [r for r in theory.ACCEPTANCE_RULES if r != "threshold"]
        work["acceptance.closed_form"] = len(fast) * len(cfg.K_values) * len(grid)
        from ..optimize.threshold_table import tabulated_K

        tab = sum(1 for K in cfg.K_values if K in tabulated_K() or K == 1)
        work["acceptance.policy_table"] = tab * len(cfg.policy_deltas)
        work["acceptance.policy"] = (len(cfg.K_values) - tab) * len(cfg.policy_deltas)
    elif key == "weights":
        work["weights.solve"] = len(cfg.weights_K) * len(cfg.weights_deltas)
    elif key == "trees":
        work["trees.point"] = len(cfg.K_values) * len(cfg.tree_L)
    elif key == "exactness":
        n_v = len(cfg.cert_verifiers)
        dt = _n_dtypes(cfg.cert_harness)
        work["exactness.row"] = n_v * dt * (cfg.n_samples + cfg.qq_seeds * cfg.qq_n_samples)
        work["exactness.run"] = n_v * (1 + cfg.qq_seeds)
    elif key == "power":
        work["power.row"] = cfg.power_reps * sum(cfg.power_ns) * _n_dtypes(cfg.cert_harness)
        work["power.run"] = cfg.power_reps * len(cfg.power_ns)
    elif key == "diffusion":
        if cfg.gm_csv is None:
            arms = sum(1 if K == 1 else 2 for K, _ in cfg.gm_trees)
            work["diffusion.trajectory"] = arms * cfg.gm_n_samples * max(1, -(-cfg.gm_dim // 64))
            work["diffusion.fixed"] = 1
    elif key == "learned":
        from .learned import learned_arms

        arms, n = learned_arms(cfg)
        work["learned.trajectory"] = (len(arms) + 1) * n
        work["learned.fixed"] = 1
    elif key == "mnist":
        work["mnist.fixed"] = 1
    return work


def estimate(config) -> dict:
    """``{section: SectionCost}`` for the sections ``config`` builds."""
    out = {}
    for key in config.sections:
        units = section_work(key, config)
        out[key] = SectionCost(key, units, float(sum(UNIT_SECONDS[u] * c for u, c in units.items())))
    return out


def budgets_for(config) -> tuple:
    """``(per-section budgets, total limit)`` of ``config``'s mode (quick or default)."""
    if config.quick:
        return QUICK_BUDGETS, QUICK_LIMIT_SECONDS
    return BUDGETS, DEFAULT_LIMIT_SECONDS


def check_budget(config, max_seconds=None) -> dict:
    """Estimate ``config``'s cost; raise ``ValueError`` if it cannot fit ``max_seconds``.

    Parameters
    ----------
    config : ReportConfig
    max_seconds : float, optional
        A wall-clock limit for the whole report (positive, finite); ``None`` only estimates.

    Returns
    -------
    dict
        :func:`estimate`'s result.

    Raises
    ------
    ValueError
        ``max_seconds`` is not a positive finite number, or the estimate exceeds it (the message
        lists every section's estimate, largest first).
    """
    import math

    costs = estimate(config)
    if max_seconds is None:
        return costs
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float)) or not math.isfinite(max_seconds) \
            or max_seconds <= 0:
        raise ValueError(f"budget must be a positive number of seconds, got {max_seconds!r}")
    total = sum(c.seconds for c in costs.values())
    if total > max_seconds:
        parts = ", ".join(f"{c.key} {c.seconds:.0f} s" for c in sorted(costs.values(), key=lambda c: -c.seconds))
        raise ValueError(f"the report is estimated at {total:.0f} s, over the budget of {max_seconds:g} s "
                         f"({parts}); drop sections with --sections or use --quick")
    return costs
