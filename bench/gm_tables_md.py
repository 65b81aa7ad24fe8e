"""Markdown for the papers' Gaussian-mixture tables (called by ``bench/gm_speedup_table.py``)."""
from __future__ import annotations

import csv
import json
import os

import numpy as np

from rass_theory.diffusion import predict_speedup
from rass_theory.diffusion.traces import DeltaTrace

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLISHED = {"dgrs": {1: 1.77, 2: 1.83, 4: 1.89}, "rmc": {1: 1.78, 2: 1.93, 4: 1.91}}
RASS_SHAPES = [(2, 3), (2, 5), (3, 4), (4, 4)]


def load_trace(path):
    z = np.load(path, allow_pickle=False)
    meta = json.loads(str(z["meta"]))
    return DeltaTrace(step=z["step"], depth=z["depth"],
                      source_class=__import__("rass_theory.diffusion.traces", fromlist=["x"]).source_class(z["source"]),
                      delta=z["delta"], n_std=meta["n_std"], first_step=meta["first_step"],
                      widths=tuple(meta["widths"]), prefetch=meta["prefetch"],
                      evaluate_leaves=meta["evaluate_leaves"], target_calls=z["target_calls"],
                      verifier=meta["verifier"])


def _json(path):
    """The JSON file's content, or None when it does not exist."""
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def _f(r, key="speedup", se="speedup_se"):
    return "—" if r is None else f"{float(r[key]):.3f} ± {float(r[se]):.3f}"


def _gain(a, b, key="speedup", se="speedup_se"):
    """(a/b - 1) in percent with its SE (independent runs)."""
    if a is None or b is None:
        return "—"
    sa, sb = float(a[key]), float(b[key])
    ea, eb = float(a[se]), float(b[se])
    g = sa / sb
    se = g * np.hypot(ea / sa, eb / sb)
    return f"{100 * (g - 1):+.1f}% ± {100 * se:.1f}%"


def _optimal_list_notes(by, table, title, alpha=0.01):
    """Paragraph on the optimal_list arms of one table (b) variant: gains over RASS and D-GRS, exactness verdicts."""
    arms = {(K, Lv): [by.get((table, v, K, Lv, "tree", "nearest", "paper")) for v in ("optimal_list", "rass", "dgrs")]
            for K, Lv in RASS_SHAPES}
    arms = {s: a for s, a in arms.items() if None not in a}
    if not arms:
        return []
    over = {v: [float(a[0]["speedup"]) / float(a[i]["speedup"]) - 1 for a in arms.values()]
            for i, v in ((1, "RASS"), (2, "D-GRS"))}
    failed = [(s, a[0]) for s, a in arms.items() if float(a[0]["pvalue"]) < alpha]
    out = ["", (f"`optimal_list` over RASS ({title}): {100 * min(over['RASS']):+.1f}% to "
                f"{100 * max(over['RASS']):+.1f}%; over D-GRS: {100 * min(over['D-GRS']):+.1f}% to "
                f"{100 * max(over['D-GRS']):+.1f}% (SE about 0.3 points each, independent runs). These arms were rerun "
                "after the large-delta residual fix of the list rule (commit d083021), with the same arm seeds as the "
                "run they replace.")]
    if failed:
        out[-1] += (" Exactness at alpha = 0.01 (Bonferroni over the three statistics): fails in "
                    + ", ".join(f"({s[0]}, {s[1]}) (p = {float(r['pvalue']):.2g}, radius test "
                                f"{float(r['p_radius']):.2g})" for s, r in failed)
                    + "; see the rechecks with fresh seeds below.")
    else:
        ps = ", ".join(f"{float(a[0]['pvalue']):.2g}" for a in arms.values())
        out[-1] += (f" Exactness at alpha = 0.01 (Bonferroni over the three statistics): all {len(arms)} arms pass "
                    f"(p = {ps}).")
    return out


def write_markdown(out_dir, path, optimal_list=False):
    with open(os.path.join(out_dir, "paper_tables.csv"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    by = {}
    for r in rows:
        by[(r["table"], r["verifier"], int(r["K"]), int(r["L"]), r["budget"], r["prefetch"], r["protocol"])] = r
    n = int(rows[0]["n"]) if rows else 0
    L = ["# The papers' Gaussian-mixture tables, reproduced", "",
         f"Target `GaussianMixture.random(dim=512, n_components=5, seed=20260714)` (means U(-2, 2)^d, sds "
         f"U(0.10, 0.25)); 30 steps, eps = 0.06; {n} trajectories per arm; produced by "
         "`python bench/gm_speedup_table.py` on a loaded 2-core machine (7 sessions sharing it). The mixture is "
         "drawn from `numpy.random.default_rng(20260714)`: all means first (shape (5, 512)), then the 5 sds; the "
         "authors' public implementation was not found in the reference corpus searched, so that order is an "
         "assumption that the agreement of table (a) supports but does not prove.", "",
         "**Protocol `paper`** (`ChurnSchedule(protocol='paper')`): time grid `linspace(1000, 1, 30)/1000` then 0; "
         "per-step noise variance `eps^2 * 2 s/(1 - s) * h` (eps scales the diffusion coefficient); the first and "
         "last steps deterministic, 28 stochastic steps counted; start N(0, I) at the first stochastic step. "
         "**Prefetch `nearest`**: a round that ends with a correction takes the next frozen velocity from the "
         "drafted sibling nearest to the committed state (free: it is in the round's batch).", "",
         "**Estimators.** `speedup` = 28 / mean target calls (ratio of means, ± delta-method SE); "
         "`mean of ratios` = mean over trajectories of 28 / calls_i (the papers' estimator, ± SE). Tables quote "
         "the ratio of means unless the column says otherwise. Exactness: every arm is tested against its own "
         "independent plain replicate (energy distance, occupancy, radius; Bonferroni p shown; alpha = 0.01).", "",
         "## (a) The D-GRS paper's table (L = 3, leaves off, RMC = chain of 1 + K + K^2, nearest, paper protocol)", "",
         "| K | D-GRS | D-GRS mean of ratios | published | diff | RMC chain | RMC mean of ratios | published | diff | p (D-GRS / RMC) |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for K in (1, 2, 4):
        d = by.get(("a", "dgrs", K, 3, "tree", "nearest", "paper"))
        c = by.get(("a", "rmc", K, 3, "target_nodes", "nearest", "paper"))
        cells = [f"{K}", _f(d), _f(d, "speedup_mor", "speedup_mor_se"), f"{PUBLISHED['dgrs'][K]:.2f}",
                 "—" if d is None else f"{float(d['speedup']) - PUBLISHED['dgrs'][K]:+.3f}",
                 _f(c), _f(c, "speedup_mor", "speedup_mor_se"), f"{PUBLISHED['rmc'][K]:.2f}",
                 "—" if c is None else f"{float(c['speedup']) - PUBLISHED['rmc'][K]:+.3f}",
                 "—" if d is None or c is None else f"{float(d['pvalue']):.2g} / {float(c['pvalue']):.2g}"]
        L.append("| " + " | ".join(cells) + " |")
    verifs = ["rass", "dgrs"] + (["optimal_list"] if optimal_list else [])
    for table, title, leaves in (("b", "leaves off", False), ("b_leaves", "leaves evaluated", True)):
        if not any(r["table"] == table for r in rows):
            continue
        head = "| (K, L) | " + " | ".join({"rass": "RASS", "dgrs": "D-GRS"}.get(v, v) for v in verifs)
        sep = "|---|" + "---|" * len(verifs)
        if not leaves:
            head += " | RMC, target budget | RMC, drafted budget"
            sep += "---|---|"
        head += " | RASS over D-GRS | same, mean of ratios"
        sep += "---|---|"
        if optimal_list:
            head += " | optimal_list over RASS | optimal_list over D-GRS"
            sep += "---|---|"
        head += " | p (each arm) |"
        sep += "---|"
        L += ["", f"## (b) The RASS paper's configurations, {title}, nearest, paper protocol", "", head, sep]
        for K, Lv in RASS_SHAPES:
            arms = [by.get((table, v, K, Lv, "tree", "nearest", "paper")) for v in verifs]
            if not leaves:
                arms += [by.get((table, "rmc", K, Lv, b, "nearest", "paper")) for b in ("target_nodes", "drafted_nodes")]
            cells = [f"({K}, {Lv})"] + [_f(a) for a in arms] + [_gain(arms[0], arms[1]),
                                                              _gain(arms[0], arms[1], "speedup_mor", "speedup_mor_se")]
            if optimal_list:
                cells += [_gain(arms[2], arms[0]), _gain(arms[2], arms[1])]
            cells.append(" / ".join("—" if a is None else f"{float(a['pvalue']):.2g}" for a in arms))
            L.append("| " + " | ".join(cells) + " |")
        gains = []
        for K, Lv in RASS_SHAPES:
            a = by.get((table, "rass", K, Lv, "tree", "nearest", "paper"))
            b = by.get((table, "dgrs", K, Lv, "tree", "nearest", "paper"))
            if a is not None and b is not None:
                gains.append(float(a["speedup"]) / float(b["speedup"]) - 1)
        if gains:
            verdict = "reaches" if max(gains) >= 0.055 else "does not reach"
            L += ["", f"RASS over D-GRS ({title}): {100 * min(gains):.1f}% to {100 * max(gains):.1f}% "
                  f"(SE about 0.3 points each); the gain {verdict} the roughly 6% the RASS paper reports for this "
                  "target. Both are exact, so the gain is the difference in acceptance at the deltas met."]
        if not optimal_list:
            L += ["", "`optimal_list` (issue 13) was not registered when these runs were made; its column is absent."]
        if optimal_list:
            L += _optimal_list_notes(by, table, title)
    rech = _json(os.path.join(out_dir, "rechecks.json"))
    if rech:
        L += ["", "## Rechecks with fresh seeds", "",
              f"About {len(rows)} arms are each tested at alpha = 0.01, so about {0.01 * len(rows):.1f} false alarms are "
              "expected. Arms with a low p-value were rerun with new seeds (`--recheck`):", "",
              "| verifier | (K, L) | leaves | seed | speedup | p (Bonferroni) | p radius |", "|---|---|---|---|---|---|---|"]
        for r in rech:
            L.append(f"| {r['verifier']} | ({r['K']}, {r['L']}) | {r['evaluate_leaves']} | {r['seed']} | "
                     f"{r['speedup']:.3f} | {r['pvalue']:.2g} | {r['p_radius']:.2g} |")
    if any(r["table"] == "c" for r in rows):
        L += ["", "## (c) How much is prefetching: table (a)'s arms under each prefetch mode", "",
              "| arm | K | nearest (paper) | parent (paper) | none (paper) | nearest (default protocol) |",
              "|---|---|---|---|---|---|"]
        for v, budget in (("dgrs", "tree"), ("rmc", "target_nodes")):
            for K in (1, 2, 4):
                cells = [_f(by.get(("a", v, K, 3, budget, "nearest", "paper")))]
                cells += [_f(by.get(("c", v, K, 3, budget, pf, "paper"))) for pf in ("parent", "none")]
                cells += [_f(by.get(("c", v, K, 3, budget, "nearest", "default")))]
                L.append(f"| {'D-GRS' if v == 'dgrs' else 'RMC chain'} | {K} | " + " | ".join(cells) + " |")
    L += ["", "## Predicted vs measured speedup", "",
          "Prediction (`diffusion.predict_speedup`): exact per-node acceptance alpha(rule, K, delta) at the recorded "
          "deltas, averaged per (step, depth, drift-source class), fed to the round-length dynamic programme with the "
          "prefetch transitions (P9 section 6). z = (measured - predicted) / SE.", "",
          "| table | arm | widths | prefetch | protocol | leaves | measured | predicted | z |",
          "|---|---|---|---|---|---|---|---|---|"]
    seen = set()
    for r in rows:
        key = (r["verifier"], r["widths"], r["prefetch"], r["protocol"], r["evaluate_leaves"])
        trace_path = os.path.join(HERE, r["trace"]) if r.get("trace") else ""
        if key in seen or not trace_path or not os.path.exists(trace_path):
            continue
        seen.add(key)
        try:
            p = predict_speedup(load_trace(trace_path))
            pred, z = f"{p.predicted_speedup:.3f}", f"{p.z:+.2f}"
        except ValueError as exc:
            pred, z = f"— ({exc})", "—"
        w = r["widths"] if len(r["widths"]) < 20 else f"chain {len(r['widths'].split('-'))}"
        L.append(f"| {r['table']} | {r['verifier']} | {w} | {r['prefetch']} | {r['protocol']} | {r['evaluate_leaves']} "
                 f"| {_f(r)} | {pred} | {z} |")
    t = _json(os.path.join(out_dir, "timing_paper.json"))
    if t:
        L += ["", "## Cost", "",
              f"Wall time of 1,000 trajectories, d = 512, K = 4, L = 3, D-GRS, nearest, paper protocol, this loaded "
              f"machine: lazy expansion {t['lazy']:.1f} s, full-tree expansion {t['full']:.1f} s; plain sampling in "
              f"the same process {t['plain']:.1f} s (ratios {t['lazy'] / t['plain']:.1f}x and {t['full'] / t['plain']:.1f}x)."]
    L += ["", "## What changed since the earlier table", "",
          "The earlier table (D-GRS 1.383 / 1.472 / 1.566 at L = 3) used the toolkit's default kernel and took each "
          "round's frozen velocity from the last verified node (`prefetch='parent'`). The published protocol is now "
          "implemented as `protocol='paper'`, and the authors' root-drift prefetching as `prefetch='nearest'` (the "
          "default): with both, table (a) matches the published numbers; table (c) shows that prefetching, not the "
          "verifier, accounts for most of the gap (parent: about 1.28-1.40).", "",
          ("The `optimal_list` arms of table (b) were first run (commit 8d0b7f7) with a list-rule residual draw that "
          "got stuck at the bracket end at large delta; they failed the exactness check in five of eight arms (radius "
          "test) and in their rechecks. After the fix (commit d083021) they were rerun with "
          "`python bench/gm_speedup_table.py --tables b,bl --only-verifiers optimal_list`, which replaces only those "
          "rows; the pre-fix rows and rechecks remain in the git history. The node-level check that failed before "
          "(`rt.check_exactness(verifiers.optimal_list(), K=K, delta=delta, n_samples=200_000, rng=20261201)`, "
          "Holm alpha = 1e-3) now passes at K = 2, 4 and delta = 3, 6, 12.")]
    with open(path, "w") as fh:
        fh.write("\n".join(L) + "\n")
