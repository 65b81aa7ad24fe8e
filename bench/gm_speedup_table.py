"""The papers' Gaussian-mixture comparison tables, reproduced (issue 10).

Target: ``GaussianMixture.random(dim=512, n_components=5, seed=20260714)``; 30 steps, eps = 0.06.
Every arm is one speculative run of ``--n`` trajectories, tested against its own independent plain
replicate (energy / occupancy / radius, Bonferroni at alpha = 0.01), with its delta trace saved
(``--traces``, not committed) so that predictions can be recomputed without rerunning.

Tables (written to ``bench/results/gm_speedup_table.md`` and ``bench/results/gm_speedup/paper_tables.csv``):

* (a) the D-GRS paper's table: L = 3, K = 1 / 2 / 4, leaves off, D-GRS on the (K, 3) tree and RMC
  as the chain of length 1 + K + K^2, prefetch 'nearest', paper protocol;
* (b) the RASS paper's configurations (K, L) in {(2,3), (2,5), (3,4), (4,4)}: RASS vs D-GRS vs RMC
  chains matched by target-evaluated nodes and by drafted nodes (plus 'optimal_list' when registered);
* (c) table (a)'s arms under all three prefetch modes, and the default protocol.

    python bench/gm_speedup_table.py --tables a,b,c      # run (resumes: finished arms are skipped)
    python bench/gm_speedup_table.py --table-only         # rebuild the markdown from CSV + traces
    python bench/gm_speedup_table.py --tables b,bl --only-verifiers optimal_list   # rerun those arms only

``--only-verifiers`` reruns the named verifiers' arms of the chosen tables even when they are already in
the CSV, and replaces their rows in place (same arm key, hence the same seeds as the run it replaces); the
other arms' rows are kept untouched.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
import zlib

import numpy as np

from rass_theory.diffusion import (
    GaussianMixture,
    TreeShape,
    matched_chain,
    plain_sample,
    speculative_sample,
)
from rass_theory.diffusion.exactness import compare_to_plain

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results", "gm_speedup")
MIXTURE_SEED = 20260714
N_STEPS, CHURN = 30, 0.06
PUBLISHED = {"dgrs": {1: 1.77, 2: 1.83, 4: 1.89}, "rmc": {1: 1.78, 2: 1.93, 4: 1.91}}
RASS_SHAPES = [(2, 3), (2, 5), (3, 4), (4, 4)]
FIELDS = ["table", "key", "verifier", "K", "L", "widths", "budget", "prefetch", "protocol", "evaluate_leaves",
          "n", "speedup", "speedup_se", "speedup_mor", "speedup_mor_se", "mean_calls", "pvalue", "p_energy",
          "p_occupancy", "p_radius", "exact_at_alpha", "wall_time_s", "trace"]


def arms_a(prefetch="nearest", protocol="paper", table="a"):
    out = []
    for K in (1, 2, 4):
        base = TreeShape.uniform(K, 3)
        out.append(dict(table=table, verifier="dgrs", K=K, L=3, shape=base, budget="tree", prefetch=prefetch,
                        protocol=protocol, evaluate_leaves=False))
        out.append(dict(table=table, verifier="rmc", K=K, L=3, shape=matched_chain(base, "target_nodes"),
                        budget="target_nodes", prefetch=prefetch, protocol=protocol, evaluate_leaves=False))
    return out


def arms_b(verifiers):
    out = []
    for K, L in RASS_SHAPES:
        base = TreeShape.uniform(K, L)
        for v in verifiers:
            if v == "rmc":
                for budget in ("target_nodes", "drafted_nodes"):
                    out.append(dict(table="b", verifier=v, K=K, L=L, shape=matched_chain(base, budget), budget=budget,
                                    prefetch="nearest", protocol="paper", evaluate_leaves=False))
            else:
                out.append(dict(table="b", verifier=v, K=K, L=L, shape=base, budget="tree", prefetch="nearest",
                                protocol="paper", evaluate_leaves=False))
    return out


def arms_b_leaves(verifiers=("rass", "dgrs")):
    """Table (b)'s tree arms with evaluate_leaves=True (the RASS paper's budget-matched runs use it)."""
    out = []
    for K, L in RASS_SHAPES:
        for v in verifiers:
            out.append(dict(table="b_leaves", verifier=v, K=K, L=L, shape=TreeShape.uniform(K, L), budget="tree",
                            prefetch="nearest", protocol="paper", evaluate_leaves=True))
    return out


def arms_c():
    out = []
    for pf in ("parent", "none"):
        out += arms_a(prefetch=pf, table="c")
    out += arms_a(prefetch="nearest", protocol="default", table="c")
    return out


def effective(arm):
    n_std = 28
    w = arm["shape"].truncated(n_std).widths
    return f"{arm['verifier']}|{'-'.join(map(str, w))}|{arm['prefetch']}|{arm['protocol']}|leaves={arm['evaluate_leaves']}"


def optimal_list_available():
    try:
        from rass_theory.diffusion._contract import resolve_verifier

        resolve_verifier("optimal_list", 2)
        return True
    except Exception:            # noqa: BLE001 - not registered yet
        return False


def run_one(target, arm, n, traces):
    key = effective(arm)
    s_spec, s_plain, s_perm = np.random.SeedSequence([0, zlib.crc32(key.encode())]).spawn(3)
    run = speculative_sample(target, arm["verifier"], K=arm["shape"].truncated(28).widths, L=None, n_samples=n,
                             n_steps=N_STEPS, churn=CHURN, rng=np.random.default_rng(s_spec),
                             prefetch=arm["prefetch"], protocol=arm["protocol"],
                             evaluate_leaves=arm["evaluate_leaves"])
    ref = plain_sample(target, n, N_STEPS, CHURN, rng=np.random.default_rng(s_plain), protocol=arm["protocol"])
    comp = compare_to_plain(run.samples, ref, target.means, alpha=0.01, rng=np.random.default_rng(s_perm),
                            detectable=False)
    os.makedirs(traces, exist_ok=True)
    path = os.path.join(traces, f"{zlib.crc32(key.encode()):08x}.npz")
    nd, rd = run.nodes, run.rounds
    np.savez_compressed(path, round_id=nd.round_id, depth=nd.depth, step=nd.step, delta=nd.delta,
                        accepted=nd.accepted, K=nd.K, source=nd.source, target_calls=run.target_calls,
                        r_start=rd.start_step, r_depth=rd.depth, r_committed=rd.committed, r_called=rd.called,
                        r_source=rd.drift_source, r_root_call=rd.root_call,
                        meta=json.dumps(dict(widths=run.shape.widths, n_std=run.n_standard_steps,
                                             first_step=run.first_step, prefetch=run.prefetch,
                                             evaluate_leaves=run.evaluate_leaves, verifier=arm["verifier"])))
    return {"key": key, "widths": "-".join(map(str, arm["shape"].widths)), "n": n, "speedup": run.speedup,
            "speedup_se": run.speedup_se, "speedup_mor": run.speedup_mean_of_ratios,
            "speedup_mor_se": run.speedup_mean_of_ratios_se, "mean_calls": float(run.target_calls.mean()),
            "pvalue": comp.pvalue, "p_energy": comp.energy.pvalue, "p_occupancy": comp.occupancy.pvalue,
            "p_radius": comp.radial.pvalue, "exact_at_alpha": comp.passed, "wall_time_s": run.wall_time_s,
            "trace": os.path.relpath(path, HERE)}


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


IDENT = ("table", "verifier", "K", "L", "budget", "prefetch", "protocol", "evaluate_leaves")


def write_csv(path, rows):
    """Write all rows (atomically: a temporary file renamed over ``path``)."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=FIELDS)
        wr.writeheader()
        for r in rows:
            wr.writerow({k: r.get(k, "") for k in FIELDS})
    os.replace(tmp, path)


def run_tables(tables, n, traces, verifiers_b, only=None):
    """Run the missing arms of ``tables``; with ``only``, rerun those verifiers' arms and replace their rows."""
    target = GaussianMixture.random(dim=512, n_components=5, seed=MIXTURE_SEED)
    path = os.path.join(OUT, "paper_tables.csv")
    os.makedirs(OUT, exist_ok=True)
    rows = read_csv(path)
    position = {tuple(str(r[k]) for k in IDENT): i for i, r in enumerate(rows)}
    arms = []
    if "a" in tables:
        arms += arms_a()
    if "b" in tables:
        arms += arms_b(verifiers_b)
    if "c" in tables:
        arms += arms_c()
    if "bl" in tables:
        arms += arms_b_leaves([v for v in verifiers_b if v != "rmc"])
    if only:
        unknown = set(only) - {a["verifier"] for a in arms}
        if unknown:
            raise ValueError(f"only_verifiers: {sorted(unknown)} have no arm in tables {tables}")
        arms = [a for a in arms if a["verifier"] in only]
    rerun = {effective(a) for a in arms} if only else set()
    cache = {r["key"]: r for r in rows if r["key"] not in rerun}
    for arm in arms:
        ident = tuple(str(arm[k]) for k in IDENT)
        if ident in position and not only:
            continue
        key = effective(arm)
        res = dict(cache[key]) if key in cache else run_one(target, arm, n, traces)
        row = {k: arm[k] for k in IDENT}
        row.update({k: v for k, v in res.items() if k in FIELDS and k not in row})
        row["widths"] = "-".join(map(str, arm["shape"].widths))
        cache[key] = row
        if ident in position:
            rows[position[ident]] = row
        else:
            position[ident] = len(rows)
            rows.append(row)
        write_csv(path, rows)
        print(f"{arm['table']} {key:<48} {float(row['speedup']):.3f} ± {float(row['speedup_se']):.3f} "
              f"p={float(row['pvalue']):.2g}", flush=True)


def recheck(specs, n=1000, seeds=(101, 202)):
    """Rerun arms with fresh seeds (multiplicity: ~50 arms at alpha = 0.01); append to rechecks.json.

    ``specs``: ``verifier:KxL[:leaves]`` items, e.g. ``dgrs:2x3:leaves``.
    """
    tgt = GaussianMixture.random(dim=512, n_components=5, seed=MIXTURE_SEED)
    path = os.path.join(OUT, "rechecks.json")
    out = json.load(open(path)) if os.path.exists(path) else []
    for spec in specs:
        parts = spec.split(":")
        K, L = (int(v) for v in parts[1].split("x"))
        leaves = len(parts) > 2 and parts[2] == "leaves"
        for seed in seeds:
            run = speculative_sample(tgt, parts[0], K=K, L=L, n_samples=n, rng=seed, protocol="paper",
                                     evaluate_leaves=leaves)
            ref = plain_sample(tgt, n, N_STEPS, CHURN, rng=seed + 1, protocol="paper")
            c = compare_to_plain(run.samples, ref, tgt.means, alpha=0.01, rng=seed + 2, detectable=False)
            out.append(dict(verifier=parts[0], K=K, L=L, evaluate_leaves=leaves, seed=seed, speedup=run.speedup,
                            pvalue=c.pvalue, p_energy=c.energy.pvalue, p_occupancy=c.occupancy.pvalue,
                            p_radius=c.radial.pvalue))
            print("recheck", out[-1], flush=True)
            with open(path, "w") as fh:
                json.dump(out, fh, indent=1)


def timing(n=1000, K=4, L=3):
    tgt = GaussianMixture.random(dim=512, n_components=5, seed=MIXTURE_SEED)
    out = {}
    t0 = time.perf_counter()
    plain_sample(tgt, n, N_STEPS, CHURN, rng=1, protocol="paper")
    out["plain"] = time.perf_counter() - t0
    for expansion in ("lazy", "full"):
        t0 = time.perf_counter()
        run = speculative_sample(tgt, "dgrs", K=K, L=L, n_samples=n, n_steps=N_STEPS, churn=CHURN, rng=2,
                                 expansion=expansion, prefetch="nearest", protocol="paper")
        out[expansion] = time.perf_counter() - t0
        out[f"{expansion}_speedup"] = run.speedup
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--tables", default="a,b,c,bl")
    ap.add_argument("--traces", default=os.path.join(OUT, "traces"))
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--recheck", default="", help="comma-separated verifier:KxL[:leaves] arms to rerun with new seeds")
    ap.add_argument("--only-verifiers", default="",
                    help="comma-separated verifiers: rerun only their arms of --tables, replacing their rows")
    args = ap.parse_args(argv)
    verifiers_b = ["rass", "dgrs", "rmc"] + (["optimal_list"] if optimal_list_available() else [])
    only = [v for v in args.only_verifiers.split(",") if v]
    if not args.table_only:
        run_tables(args.tables.split(","), args.n, args.traces, verifiers_b, only=only)
    if args.recheck:
        recheck(args.recheck.split(","), args.n)
    if args.timing:
        t = timing()
        print("timing", t, flush=True)
        with open(os.path.join(OUT, "timing_paper.json"), "w") as fh:
            json.dump(t, fh, indent=1)
    from gm_tables_md import write_markdown

    write_markdown(OUT, os.path.join(HERE, "results", "gm_speedup_table.md"), optimal_list=optimal_list_available())
    return 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
