"""The report's sections: each computes its data, saves figures and tables, returns blocks.

A section that needs a package which is not installed (yet) raises
:class:`~rass_theory.report.builder.SectionUnavailable` with the reason, never placeholder data.
"""
from __future__ import annotations

import numpy as np

from ..plot.table import concat
from .context import SectionContext, SectionUnavailable, unavailable_from
from .document import Note, Paragraph, TableBlock
from .learned import section_learned
from .mnist import section_mnist

__all__ = ["SECTIONS"]


def _probe(what: str, fn):
    """Run ``fn`` (an import); turn a missing ``rass_theory`` module into SectionUnavailable."""
    try:
        return fn()
    except (ImportError, AttributeError) as exc:
        raise unavailable_from(exc, what) from exc


def _probe_rule(rule):
    """Return None if ``rule``'s implementation imports, else the reason it does not."""
    from ..plot.theory import _rule_function

    try:
        _rule_function(rule)
    except (ImportError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# -- acceptance and gap -----------------------------------------------------------------------
def section_acceptance(ctx: SectionContext):
    from ..plot import theory

    cfg = ctx.config
    missing = {r: why for r in theory.ACCEPTANCE_RULES if (why := _probe_rule(r)) is not None}
    skipped = {}
    if not cfg.policy_deltas and "threshold" not in missing:
        skipped["threshold"] = "skipped by the configuration (no policy deltas)"
    fast = [r for r in theory.ACCEPTANCE_RULES if r not in missing and r not in skipped and r != "threshold"]
    if not fast:
        raise SectionUnavailable("no acceptance function is available: " +
                                 "; ".join(f"{r}: {w}" for r, w in missing.items()))
    grid = np.union1d(cfg.deltas, cfg.policy_deltas) if cfg.policy_deltas else np.asarray(cfg.deltas)
    n_fast = len(fast) * len(cfg.K_values) * grid.size
    n_slow = 0 if ("threshold" in missing or "threshold" in skipped) else len(cfg.K_values) * len(cfg.policy_deltas)
    total = n_fast + n_slow  # the progress units of rass_theory.report.budget.section_work

    def cb(done, _total):
        if ctx.progress:
            ctx.progress(done, total)

    table = theory.acceptance_data(cfg.K_values, grid, fast, progress=cb)
    if n_slow:
        table = concat([table, threshold_acceptance_table(cfg.K_values, cfg.policy_deltas,
                                                          progress=lambda d, _t: cb(n_fast + d, total))])
    data = ctx.save_data("acceptance", table)
    blocks = [Paragraph(
        "Exact per-node acceptance probability (no Monte Carlo) against the standardised displacement "
        "`delta = ||mu_target - mu_draft|| / sigma`, for each rule and the list-coupling bound "
        "`alpha*(K, delta) = min_t [Phi(t - delta) + 1 - Phi(t)^K]`. RMC is the single-draft rule (K = 1), "
        "repeated on each panel as a reference." + (
            f" The value-aware threshold policy is shown at delta in {{{_fmt_grid(cfg.policy_deltas)}}} with the "
            "parameters its verifier uses, `rt.verifiers.threshold()`: read from the certified table "
            "(`rass_theory.optimize.threshold_table`, within 1e-4 of the optimised policy) where K is tabulated, "
            "optimised per delta otherwise." if cfg.policy_deltas else ""))]
    blocks.append(ctx.save_figure("acceptance_vs_delta", theory.plot_acceptance(table), data=data,
                                  alt="acceptance against delta for each K",
                                  caption="Acceptance per node; every rule stays below the bound."))
    for rule, why in missing.items():
        blocks.append(Note(f"rule {rule!r} is not shown: {why}", "unavailable"))
    for rule, why in skipped.items():
        blocks.append(Note(f"rule {rule!r} is not shown: {why}", "info"))
    if "bound" not in missing and any(r in table["rule"] for r in ("dgrs", "rass", "threshold")):
        gaps = theory.gap_data(table)
        gdata = ctx.save_data("gap_to_bound", gaps)
        if any(k > 1 for k in cfg.K_values):
            blocks.append(ctx.save_figure(
                "gap_to_bound", theory.plot_gap_to_bound(gaps), data=gdata, alt="gap to the bound",
                caption="Bound minus acceptance (K = 1 omitted: there every rule attains the bound)."))
        worst = {}
        for r in ("dgrs", "rass", "threshold", "optimal_list"):
            sub = gaps.where(rule=r)
            if len(sub):
                worst[r] = (float(sub["gap"].max()), float(sub["gap"].min()))
        if worst:
            blocks.append(Paragraph("Largest gap to the bound on this grid: " + "; ".join(
                f"{r}: {hi:.4f} (smallest {lo:.2e})" for r, (hi, lo) in worst.items()) + "."))
    header, rows = theory.acceptance_summary(table)
    blocks.append(TableBlock(tuple(header), tuple(tuple(r) for r in rows),
                             caption="Acceptance at selected deltas (exact).",
                             align=("r",) * len(header)))
    return blocks


def threshold_acceptance_table(K_values, deltas, progress=None):
    """Exact acceptance of the threshold verifier's policy (the table's where ``K`` is tabulated,
    else the optimiser's) on a grid: the ``acceptance_data`` columns with ``rule = "threshold"``."""
    from ..plot._common import Progress
    from ..plot.table import Table
    from ..verifiers import threshold

    v = threshold()
    prog = Progress(len(K_values) * len(deltas), progress)
    rows = []
    for K in K_values:
        for d in deltas:
            rows.append({"rule": "threshold", "K": int(K), "delta": float(d),
                         "acceptance": float(v.expected_acceptance(int(K), float(d)))})
            prog.step()
    return Table.from_records(rows, meta={"rule": "threshold", "parameters": "rass_theory.verifiers.threshold()"})


def _fmt_grid(grid):
    g = np.asarray(grid)
    if g.size > 2 and np.allclose(np.diff(g), g[1] - g[0]):
        return f"{g[0]:g} to {g[-1]:g} in steps of {g[1] - g[0]:g}"
    return ", ".join(f"{x:g}" for x in g)


# -- optimal weights --------------------------------------------------------------------------
def section_weights(ctx: SectionContext):
    from ..plot import weights

    cfg = ctx.config
    _probe("rass_theory.optimal_rank_weights", lambda: __import__("rass_theory").optimal_rank_weights)
    table = weights.optimal_weights_data(cfg.weights_K, cfg.weights_deltas, progress=ctx.progress)
    data = ctx.save_data("optimal_weights", table)
    blocks = [Paragraph(
        "Optimal RASS rank weights `w* = argmin_w TV(g_w, f)` from `rt.optimal_rank_weights`, on "
        f"{_fmt_grid(cfg.weights_deltas)}. Ranks ascend in `s`; the top rank is the child furthest "
        "toward the target. At delta = 0 the uniform weights are optimal; mass moves to the top ranks "
        "as delta grows.")]
    blocks.append(ctx.save_figure("optimal_weights", weights.plot_optimal_weights(table), data=data,
                                  alt="optimal rank weights against delta",
                                  caption="Optimal rank weights, stacked from the lowest rank (dark) up."))
    rows = []
    for K in cfg.weights_K:
        sub = table.where(K=K, rank=0)
        statuses = sorted(set(sub["status"].tolist()))
        gap = sub["gap"]
        rows.append((str(K), str(len(sub)), ", ".join(statuses),
                     "n/a" if np.all(np.isnan(gap)) else f"{np.nanmax(gap):.2e}"))
    blocks.append(TableBlock(("K", "deltas solved", "solver status", "largest certified gap"), tuple(rows),
                             caption="Solver diagnostics of the weight optimisation.", align=("r", "r", "l", "r")))
    return blocks


# -- tree speedup -----------------------------------------------------------------------------
def section_trees(ctx: SectionContext):
    from ..plot import trees

    cfg = ctx.config
    _probe("rass_theory.acceptance", lambda: __import__("rass_theory").acceptance)
    table = trees.tree_speedup_data(cfg.K_values, cfg.tree_L, cfg.tree_delta, progress=ctx.progress)
    data = ctx.save_data("tree_speedup", table)
    blocks = [Paragraph(
        "Speedup per round predicted from per-node acceptance `a = rt.acceptance(rule, K, delta)` at "
        f"delta = {cfg.tree_delta:g}, for uniform trees of width K and depth L: the walk commits one state "
        "at every depth it reaches, so the expected committed length per target call is "
        "`E[N] = sum_{j<L} a^j = (1 - a^L) / (1 - a)`, approaching `1 / (1 - a)` for deep trees. The right "
        "panel puts the same numbers against the number of drafted nodes, the parallel cost of a round.")]
    blocks.append(ctx.save_figure("tree_speedup", trees.plot_tree_speedup(table), data=data,
                                  alt="predicted speedup for trees",
                                  caption="Predicted speedup; solid RASS, dashed D-GRS; colour is K."))
    Ls = cfg.tree_L
    header = ["K", "rule", "a"] + [f"L = {L}" for L in Ls] + ["L → ∞"]
    rows = []
    for K in cfg.K_values:
        for rule in ("dgrs", "rass"):
            sub = table.where(K=K, rule=rule)
            rows.append([str(K), rule, f"{sub['node_acceptance'][0]:.4f}"] +
                        [f"{x:.3f}" for x in sub["speedup"]] + [f"{sub['asymptote'][0]:.3f}"])
    blocks.append(TableBlock(tuple(header), tuple(tuple(r) for r in rows), caption="Predicted speedup per round.",
                             align=("r", "l") + ("r",) * (len(header) - 2)))
    return blocks


# -- exactness ----------------------------------------------------------------------------------
def section_exactness(ctx: SectionContext):
    from ..plot import exactness

    cfg = ctx.config
    _probe("rass_theory.check_exactness", lambda: __import__("rass_theory").check_exactness)
    allv = _probe("the built-in verifiers", lambda: exactness.builtin_verifiers(cfg.cert_K))
    verifiers = {k: v for k, v in allv.items() if k in cfg.cert_verifiers}
    skipped = [k for k in allv if k not in verifiers]
    n_v = len(verifiers)
    cost_cert = n_v * cfg.n_samples
    cost_qq = n_v * cfg.qq_seeds * cfg.qq_n_samples
    total = cost_cert + cost_qq

    def part(base, unit):
        return (lambda done, _t: ctx.progress(base + done * unit, total)) if ctx.progress else None

    cert = exactness.certificate_data(verifiers, K=cfg.cert_K, delta=cfg.cert_delta, dim=cfg.cert_dim,
                                      n_samples=cfg.n_samples, alpha=cfg.alpha, seed=cfg.seed,
                                      harness_options=dict(cfg.cert_harness), progress=part(0, cfg.n_samples))
    cdata = ctx.save_data("exactness_certificate", cert)
    blocks = [Paragraph(
        f"Each built-in verifier through `rt.check_exactness` at K = {cfg.cert_K} (RMC at K = 1), "
        f"delta = {cfg.cert_delta:g}, dim = {cfg.cert_dim}, n = {cfg.n_samples:,} committed states, "
        f"family-wise alpha = {cfg.alpha:g}. The harness tests the whole state (projection, orthogonal "
        "norm and directions, acceptance count, two-sample test against direct target draws).")]
    blocks.append(ctx.save_figure("exactness_certificate", exactness.plot_certificate(cert, alpha=cfg.alpha),
                                  data=cdata, alt="p-values of every exactness test",
                                  caption="Raw p-values per test; the verdict uses Holm-adjusted p-values."))
    rows = []
    for name in dict.fromkeys(cert["verifier"].tolist()):
        sub = cert.where(verifier=name)
        rows.append((name, str(int(sub["K"][0])), "PASS" if sub["passed"][0] else "FAIL",
                     f"{sub['acceptance_rate'][0]:.4f}", f"{np.min(sub['pvalue']):.3g}",
                     _nan(np.nanmin(sub["pvalue_adjusted"]) if not np.all(np.isnan(sub["pvalue_adjusted"])) else np.nan),
                     _nan(sub["detectable_ks_distance"][0])))
    blocks.append(TableBlock(("verifier", "K", "verdict", "acceptance rate", "smallest raw p", "smallest adjusted p",
                              "detectable KS distance"), tuple(rows), caption="Certificate summary.",
                             align=("l", "r", "l", "r", "r", "r", "r")))
    if not all(cert["passed"]):
        blocks.append(Note("at least one built-in verifier FAILED its exactness check; see the table.", "fail"))
    if skipped:
        blocks.append(Note(f"not certified in this run (configuration): {', '.join(skipped)}.", "info"))
    qq = exactness.pvalue_qq_data(verifiers, n_seeds=cfg.qq_seeds, K=cfg.cert_K, delta=cfg.cert_delta,
                                  dim=cfg.cert_dim, n_samples=cfg.qq_n_samples, alpha=cfg.alpha, seed=cfg.seed,
                                  harness_options={**cfg.cert_harness, **exactness.LIGHT_HARNESS},
                                  progress=part(cost_cert, cfg.qq_n_samples))
    qdata = ctx.save_data("pvalue_qq", qq)
    n_fail = sum(1 for v in dict.fromkeys(qq["verifier"].tolist())
                 for r in range(cfg.qq_seeds) if not qq.where(verifier=v, rep=r)["passed"][0])
    blocks.append(ctx.save_figure("pvalue_qq", exactness.plot_pvalue_qq(qq), data=qdata,
                                  alt="QQ plot of p-values over seeds",
                                  caption=f"{cfg.qq_seeds} independent seeds per verifier at n = "
                                          f"{cfg.qq_n_samples:,} (199 permutations, 200-point two-sample "
                                          f"subsample); {n_fail} of {cfg.qq_seeds * n_v} runs failed (expected "
                                          f"about {cfg.alpha * cfg.qq_seeds * n_v:.2g}). Tests of one run share "
                                          "data (e.g. KS and chi-square of the same statistic), so the pooled "
                                          "p-values are dependent and the band, drawn for independent uniforms, "
                                          "is a guide; p = 1 for the acceptance test of `resample` (it never "
                                          "accepts) is exact."))
    return blocks


def _nan(x):
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3g}"


# -- power ------------------------------------------------------------------------------------
def section_power(ctx: SectionContext):
    from ..plot import exactness, power

    cfg = ctx.config
    _probe("rass_theory.check_exactness", lambda: __import__("rass_theory").check_exactness)
    fam = power.harness_family(cfg.cert_K, cfg.cert_delta, cfg.cert_dim, cfg.alpha)
    dkw = power.detectable_distance_data(cfg.power_ns, alpha=cfg.alpha, **fam)
    blocks = [Paragraph(
        "Power of the harness: the smallest Kolmogorov-Smirnov distance between the committed law and "
        f"the target that a run of n samples detects (alpha = {cfg.alpha:g}, Holm family of {fam['n_tests']} "
        f"tests, {fam['n_bins']} PIT bins: the harness's DKW formula), "
        "and the measured rejection rate of a known-wrong verifier from `rass_theory.mutants`.")]
    try:
        mutant = power.default_mutant(cfg.power_mutant)
    except (ImportError, AttributeError) as exc:
        mutant, why = None, f"{type(exc).__name__}: {exc}"
    emp = None
    if mutant is not None:
        emp = power.mutant_power_data(mutant, cfg.power_ns, reps=cfg.power_reps, K=cfg.cert_K,
                                      delta=cfg.cert_delta, dim=cfg.cert_dim, alpha=cfg.alpha, seed=cfg.seed,
                                      harness_options={**cfg.cert_harness, **exactness.LIGHT_HARNESS},
                                      progress=ctx.progress)
        ctx.save_data("mutant_power", emp)
    data = ctx.save_data("detectable_distance", dkw)
    blocks.append(ctx.save_figure("power_curve", power.plot_power(dkw, emp), data=data,
                                  alt="detectable KS distance against n",
                                  caption="Detectable distance falls as 1/sqrt(n); the mutant's rejection rate "
                                          "rises to 1."))
    if mutant is None:
        blocks.append(Note(f"the mutant catalogue is not available, so no empirical power is shown: {why}",
                           "unavailable"))
    else:
        rows = tuple((f"{r['n']:,}", f"{r['rejections']}/{r['reps']}", f"{r['rate']:.2f}",
                      f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]") for r in emp.records())
        blocks.append(TableBlock(("n", "rejections", "rate", "95% Clopper-Pearson"), rows,
                                 caption=f"Rejection rate of mutant {emp.meta['mutant']!r}.",
                                 align=("r", "r", "r", "r")))
    return blocks


# -- diffusion ----------------------------------------------------------------------------------
def section_diffusion(ctx: SectionContext):
    from ..plot import diffusion as dplot

    cfg = ctx.config
    if cfg.gm_csv:
        table = dplot.read_sweep_csv(cfg.gm_csv)
        source = f"read from `{cfg.gm_csv}` (written by `rass-theory sweep-gm`)"
    else:
        _probe("rass_theory.diffusion.speculative_sample",
               lambda: __import__("rass_theory.diffusion", fromlist=["speculative_sample"]).speculative_sample)
        table = dplot.embedded_sweep(dim=cfg.gm_dim, n_samples=cfg.gm_n_samples, trees=cfg.gm_trees,
                                     seed=cfg.seed, progress=ctx.progress)
        source = (f"a small embedded sweep (dim = {cfg.gm_dim}, {cfg.gm_n_samples} trajectories per arm, "
                  "5 components, 30 steps, churn 0.06, D-GRS and RASS); run `rass-theory sweep-gm` for the full d = 512 "
                  "setting and pass its CSV with `--gm-csv`")
    data = ctx.save_data("gm_speedup", table)
    return [Paragraph(f"Measured speedup (standard steps / target calls, ratio of means) on the Gaussian-mixture "
                      f"target, {source}. Each round's frozen draft velocity comes from the drafted sibling nearest "
                      "to a committed correction (`prefetch='nearest'`, the default; proofs/P9-tree-exactness.md "
                      "section 3)."),
            ctx.save_figure("gm_speedup", dplot.plot_gm_speedup(table), data=data, alt="speedup bars",
                            caption="Speedup per verifier and tree (K, L); error bars are ±1 standard error; "
                                    "diamonds (when present) are the speedups predicted from per-node acceptance.")
            ] + _published_gm_table()


_PUBLISHED_GM = {"dgrs": {1: 1.77, 2: 1.83, 4: 1.89}, "rmc": {1: 1.78, 2: 1.93, 4: 1.91}}


def _published_gm_table():
    """The D-GRS paper's table next to the reproduction in bench/results (when the checkout has it)."""
    import csv
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "results" / "gm_speedup" / "paper_tables.csv"
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        got = {(r["verifier"], int(r["K"])): r for r in csv.DictReader(fh)
               if r["table"] == "a" and r["prefetch"] == "nearest" and r["protocol"] == "paper"}
    rows = []
    for K in (1, 2, 4):
        cells = [str(K)]
        for v in ("dgrs", "rmc"):
            r = got.get((v, K))
            cells += ["—" if r is None else f"{float(r['speedup']):.3f} ± {float(r['speedup_se']):.3f}",
                      f"{_PUBLISHED_GM[v][K]:.2f}"]
        rows.append(tuple(cells))
    return [Paragraph("The published protocol is reproduced as `protocol='paper'` (time grid linspace(1000, 1, 30)/1000 "
                      "then 0; per-step noise variance eps^2 (2 s/(1 - s)) h; first and last steps deterministic, 28 "
                      "counted; start N(0, I) at the first stochastic step) on `GaussianMixture.random(dim=512, "
                      "n_components=5, seed=20260714)`, with nearest-sibling prefetching: the table below is the D-GRS "
                      "paper's (L = 3, RMC as the chain of 1 + K + K^2). Full tables, including the RASS paper's "
                      "configurations and every prefetch mode: bench/results/gm_speedup_table.md."),
            TableBlock(("K", "D-GRS measured", "D-GRS published", "RMC chain measured", "RMC published"), tuple(rows),
                       caption="Speedup = 28 / mean target calls ± SE, 1,000 trajectories per arm.",
                       align=("r", "r", "r", "r", "r"))]


SECTIONS = {
    "acceptance": ("Acceptance and the bound", section_acceptance),
    "weights": ("Optimal rank weights", section_weights),
    "trees": ("Predicted speedup for draft trees", section_trees),
    "exactness": ("Exactness certificate", section_exactness),
    "power": ("Power of the exactness harness", section_power),
    "diffusion": ("Gaussian-mixture speedups", section_diffusion),
    "learned": ("Learned model: 8x8 digits", section_learned),
    "mnist": ("Learned model: MNIST 28x28 UNet (saved protocol results)", section_mnist),
}
