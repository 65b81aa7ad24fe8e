"""Report building of the exactness harness: Holm-adjusted tests and merged counts into an :class:`ExactnessReport`."""
from __future__ import annotations

import math

from . import tests as T
from .family import contract_test
from .power import detectable_ks_distance
from .report import ExactnessReport, StatisticalTest
from .streaming import MAX_MESSAGES, ExactnessCounts

__all__ = ["make_report"]


def make_report(counts, node, cfg, raw, p_adjusted, reject, elapsed, start_chunk, n_family=None, stop_look=None,
                n_looks=0, level=None) -> ExactnessReport:
    """Assemble the report from raw tests and their (family-wise) adjusted p-values.

    ``n_family`` is the size of the Holm family (default ``len(raw)``; the grid's for ``certify``);
    ``stop_look`` the interim look that stopped the cell (``None``: it ran to the end) and
    ``n_looks`` its scheduled interim looks (:mod:`rass_theory.stats.looks`); ``level`` the final
    Holm's level (default ``cfg.alpha``; ``0.99 alpha`` with looks), at which the report's
    ``detectable_ks_distance`` is stated.
    """
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    tests = []
    for (name, t), p_adj, rej in zip(raw, p_adjusted, reject):
        ran = not math.isnan(t.pvalue)
        # a test that could not run (too few rows, nothing declared) does not fail the run by itself;
        # no valid rows at all means every row broke the contract, which fails it
        tests.append(StatisticalTest(name, t.statistic, t.pvalue, float(p_adj), bool(not ran or not rej), t.detail))
    tests.append(contract_test(counts))
    c0 = counts[0]
    n_named, k_named = int(c0.group_rows[0]), int(c0.group_accepted[0])
    rate = k_named / n_named if n_named else float("nan")
    ci = T.clopper_pearson(k_named, n_named, 1 - cfg.alpha)
    detectable = (detectable_ks_distance(c0.n_valid, cfg.alpha if level is None else level,
                                         max(n_family or len(raw), 1), cfg.false_pass_rate, node.n_bins)
                  if c0.n_valid else float("inf"))
    valid = sum(c.n_valid for c in counts)
    corrections = 1.0 - sum(c.n_accepted for c in counts) / valid if valid else float("nan")
    groups = tuple((d, int(n), (int(k) / int(n)) if n else float("nan"), e)
                   for d, n, k, e in zip(cfg.deltas, c0.group_rows, c0.group_accepted, cfg.expected))
    passed = all(t.passed for t in tests)
    violations = {}
    messages = []
    for c in counts:
        for k, v in c.violation_dict().items():
            violations[k] = violations.get(k, 0) + v
        messages += [m for m in c.messages if m not in messages]
    return ExactnessReport(passed, tuple(tests), rate, ci, cfg.expected_acceptance, c0.n_rows, c0.n_valid,
                           cfg.alpha, detectable, cfg.false_pass_rate, elapsed, cfg.seed, cfg.K, cfg.delta,
                           cfg.dim, cfg.sigma, cfg.backend, cfg.verifier_name, violations,
                           tuple(messages[:MAX_MESSAGES]), start_chunk, c0, dtypes=cfg.dtypes,
                           correction_fraction=corrections, groups=groups,
                           named_share=float(node.group_probs[0]), pass_counts=tuple(counts),
                           regime=node.describe_regime(), stop_look=stop_look, n_looks=int(n_looks),
                           rows_used=int(sum(c.n_rows for c in counts)))
