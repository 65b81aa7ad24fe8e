"""Test assembly of the exactness harness: which tests form the Holm family, named by the code that runs them.

Each dtype pass contributes the tests of :func:`pass_plan`, a list of ``(name, run)`` pairs with
``run(counts) -> TestStatistic``; the far tails pooled over passes and cells are
:func:`tail_plan`'s.  The family's names (:func:`pass_test_names`, :func:`tail_test_names`) and its
size (:func:`family_size`, which sets the energy test's permutations and the stated power) are
read from the same plans that :func:`raw_tests` and :func:`tail_tests` evaluate, so a test
cannot be run without being counted, nor counted without being run.

==========================  =================================================================
``s_*``                     ``s - delta ~ N(0, 1)``: ``_ks`` binned KS (smooth shifts),
                            ``_chi2`` Pearson on 32 bins, ``_chi2_fine`` Pearson on every fine
                            bin (atoms, lattices: precision bugs)
``rperp_*``                 ``||z_perp||^2 ~ chi^2(dim - 1)``, same three tests
``dir{j}_*``                ``<v_j, z> ~ N(0, 1)`` on fixed random unit ``v_j`` orthogonal to ``e``
``joint_chi2``              ``(s, ||z_perp||^2)`` PITs independent uniform, 8 x 8 cells
``acceptance_binomial``     accepted count ~ Binomial(n, exact acceptance) (when known)
``energy_two_sample``       first ``two_sample_size`` states vs direct ``N(mu_target, sigma^2 I)``
                            draws, energy distance, permutation p-value
``contract``                no row broke the verifier contract (not a statistical test)
==========================  =================================================================
"""
from __future__ import annotations

import math

import numpy as np

from . import tests as T
from .config import HarnessConfig
from .node import PERMUTATION_KEY, TARGET_KEY, stream_seed
from .report import StatisticalTest
from .rowstats import tail_probability
from .streaming import INDEP_STATS, MAX_MESSAGES, SEQUENCE_KINDS, TAILS, VIOLATION_KINDS, ExactnessCounts

__all__ = ["pass_plan", "tail_plan", "pass_test_names", "tail_test_names", "raw_tests", "tail_tests", "family_size",
           "permutations_for", "contract_test", "contract_violated", "N_CHI2_BINS"]

N_CHI2_BINS = 32


def _prefix(p: int, cfg: HarnessConfig) -> str:
    return "" if p == 0 else f"{cfg.dtypes[p]}:"


def _histogram_plan(prefix, field, n_bins) -> list:
    """KS at the bin edges, chi-square on 32 coarse bins, chi-square on the fine bins of ``field(counts)``."""
    return [(f"{prefix}_ks", lambda c: T.binned_ks_test(field(c))),
            (f"{prefix}_chi2", lambda c: T.binned_chisquare_test(field(c), N_CHI2_BINS)),
            (f"{prefix}_chi2_fine", lambda c: T.binned_chisquare_test(field(c), n_bins, min_expected=5,
                                                                      min_rows=T.MIN_FINE_ROWS))]


def pass_plan(cfg: HarnessConfig, p: int) -> list:
    """``[(name, run)]``: the tests of dtype pass ``p``, in family order (``run(counts of the pass)``)."""
    pre, B, dim, nd = _prefix(p, cfg), cfg.n_bins, cfg.dim, cfg.n_directions
    plan = _histogram_plan(f"{pre}s", lambda c: c.s_counts, B)
    if dim > 1:
        plan += _histogram_plan(f"{pre}rperp", lambda c: c.r_counts, B)
        for j in range(nd):
            plan += _histogram_plan(f"{pre}dir{j}", lambda c, j=j: c.dir_counts[j], B)
        if nd:
            plan += _histogram_plan(f"{pre}diag", lambda c: c.diag_counts, B)
        plan.append((f"{pre}joint_chi2", lambda c: T.joint_chisquare_test(c.joint_counts, B)))
        if nd:
            plan.append((f"{pre}joint_s_dir0_chi2", lambda c: T.joint_chisquare_test(c.joint_sd_counts, B)))
        plan.append((f"{pre}xcov_s", lambda c: T.studentised_form_test(c.xcov_sums[0], c.xcov_matrix[0],
                                                                        "sum t P z_perp: ")))
        plan.append((f"{pre}xcov_s2", lambda c: T.studentised_form_test(c.xcov_sums[1], c.xcov_matrix[1],
                                                                         "sum (t^2-1) P z_perp: ")))
    plan.append((f"{pre}proj_ks", lambda c: T.projection_ks_test(c.proj_counts)))
    active = [q for q, nm in enumerate(INDEP_STATS) if nm == "s" or dim > 1 and (nm == "rperp" or nd)]
    labels = [INDEP_STATS[q] for q in active]
    for k, label in enumerate(("half", "next")):
        plan.append((f"{pre}indep_{label}", lambda c, k=k: T.independence_test(c.indep_sums[k, active],
                                                                              int(c.indep_pairs[k]), B, labels)))
    plan.append((f"{pre}indep_calls", lambda c: T.independence_test(c.seq_sums[active], int(c.seq_pairs[0]), B,
                                                                     labels)))
    if pre.startswith("bfloat16"):  # bfloat16 nodes and states live on a lattice: repeats are expected
        plan.append((f"{pre}repeats", lambda c: T.TestStatistic(float("nan"), float("nan"),
                                                                "not run on the bfloat16 lattice")))
    else:
        plan.append((f"{pre}repeats", lambda c: T.poisson_excess_test(int(c.repeat_counts.sum()),
                                                                      float(c.repeat_expected.sum()),
                                                                      "values closer than 1e-11 within a call: ")))
    groups = [f"{d:g}" for d in cfg.deltas]
    if any(not math.isnan(x) for x in cfg.expected):
        plan.append((f"{pre}acceptance_binomial", lambda c: T.grouped_binomial_test(
            c.group_accepted.tolist(), c.group_rows.tolist(), list(cfg.expected), groups)))
    plan.append((f"{pre}acceptance_bound", lambda c: T.bound_exceedance_test(
        c.group_accepted.tolist(), c.group_rows.tolist(), list(cfg.bounds), groups)))
    if p == 0 and cfg.two_sample_size:
        plan.append(("energy_two_sample", lambda c: _energy_test(c, cfg)))
    return plan


def _energy_test(c: ExactnessCounts, cfg: HarnessConfig):
    m = c.subsample.shape[0]
    target = np.random.default_rng(stream_seed(cfg.seed, TARGET_KEY)).standard_normal((max(m, 2), cfg.dim))
    perm_rng = np.random.default_rng(stream_seed(cfg.seed, PERMUTATION_KEY))
    return T.energy_test(c.subsample, target[:m], n_permutations(cfg), perm_rng)


def pass_test_names(cfg: HarnessConfig) -> list:
    """Names of the Holm family's per-pass tests, in order (read from :func:`pass_plan`)."""
    return [name for p in range(len(cfg.dtypes)) for name, _ in pass_plan(cfg, p)]


def raw_tests(counts, cfg: HarnessConfig) -> list:
    """``[(name, TestStatistic)]`` of every per-pass test of the family, raw p-values."""
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    return [(name, run(c)) for p, c in enumerate(counts) for name, run in pass_plan(cfg, p)]


def _tails_apply(stat, dim, n_directions) -> bool:
    return stat == "t" or (dim > 1 and (stat == "r" or n_directions > 0))


def tail_plan(dim, n_directions, prefix="") -> list:
    """``[(name, k, col, side, threshold)]``: the far-tail tests (``k`` the tail, ``col`` the row selection)."""
    return [(f"{prefix}{sel}{name}", k, col, side, thr) for col, sel in enumerate(("", "large_delta:"))
            for k, (name, stat, side, thr) in enumerate(TAILS) if _tails_apply(stat, dim, n_directions)]


def tail_test_names(dim, n_directions, prefix="") -> list:
    """Names of the far-tail tests (pooled over every pass of the run), read from :func:`tail_plan`."""
    return [name for name, *_ in tail_plan(dim, n_directions, prefix)]


def tail_tests(counts, dim, n_directions, prefix="") -> list:
    """Exact binomial tests of the far-tail counts, pooled over ``counts`` (any passes and cells).

    Every valid row's statistic has the same null law whatever its node, so the pooled count is
    ``Binomial(rows, p)`` with ``p`` from :func:`~rass_theory.stats.rowstats.tail_probability`; the
    ``large_delta:`` tests count only rows with ``delta >= 2``.
    """
    total = sum(c.tail_counts for c in counts)
    rows = sum(c.tail_rows for c in counts)
    out = []
    for name, k, col, side, thr in tail_plan(dim, n_directions, prefix):
        p = tail_probability(side, thr)
        kk, nn = int(total[k, col]), int(rows[col])
        t = T.binomial_test(kk, nn, p) if nn else T.TestStatistic(float("nan"), float("nan"), "no rows")
        out.append((name, T.TestStatistic(t.statistic, t.pvalue, f"{kk} of {nn} rows beyond, expected {nn * p:.3g}")))
    return out


def family_size(cfg: HarnessConfig, with_tails: bool = True) -> int:
    """Tests of one cell in the Holm family (its far tails included unless ``with_tails`` is false)."""
    return len(pass_test_names(cfg)) + (len(tail_test_names(cfg.dim, cfg.n_directions)) if with_tails else 0)


def n_permutations(cfg: HarnessConfig) -> int:
    """Enough permutations that the energy test alone can pass Holm's first threshold ``alpha / m``."""
    if cfg.n_permutations is not None:
        return cfg.n_permutations
    return permutations_for(family_size(cfg), cfg.alpha)


def permutations_for(m: int, alpha: float) -> int:
    """``ceil(1.5 m / alpha)`` clipped to ``[999, 100000]``: the smallest attainable permutation
    p-value ``1 / (P + 1)`` is then below Holm's first threshold ``alpha / m``."""
    return int(min(100_000, max(999, math.ceil(1.5 * m / alpha))))


def _sequence_failures(counts) -> int:
    idx = [VIOLATION_KINDS.index(k) for k in SEQUENCE_KINDS]
    return int(sum(int(c.violations[idx].sum()) for c in counts))


def contract_violated(counts) -> bool:
    """Some row broke the contract, or the calls-in-sequence probe found a named failure."""
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    return any(c.n_rows != c.n_valid for c in counts) or _sequence_failures(counts) > 0


def contract_test(counts) -> StatisticalTest:
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    rows = sum(c.n_rows for c in counts)
    bad = sum(c.n_rows - c.n_valid for c in counts)
    ok = bad == 0 and rows > 0 and _sequence_failures(counts) == 0
    if ok:
        detail = "all rows satisfy the verifier contract"
    else:
        viol, msgs = {}, []
        for c in counts:
            for k, v in c.violation_dict().items():
                viol[k] = viol.get(k, 0) + v
            msgs += [m for m in c.messages if m not in msgs]
        detail = (f"{bad} of {rows} rows broke the contract, {_sequence_failures(counts)} sequence probe(s) failed: "
                  f"{viol}; " + " | ".join(msgs[:MAX_MESSAGES]))
    return StatisticalTest("contract", float(bad), 1.0 if ok else 0.0, 1.0 if ok else 0.0, ok, detail)
