"""Sequential looks within a cell: default-grid CPU time of decisively wrong mutants, before and after.

Runs ``rt.check_exactness(mutant, rng=SEED)`` (the default grid, no other option) on five
mutants that the first cell rejects with p ~ 0 (and on the exact rules ``resample`` and ``rmc``,
which run every look: the cost of the looks), and writes each run's verdict, process CPU
seconds (``time.process_time``), rows run and, where the tree has it, the look that stopped the
cell (``ExactnessReport.stop_look``) to JSON.  The script uses only APIs of both trees::

    PYTHONPATH=/tmp/before nice -n 10 python bench/harness_looks.py --out /tmp/looks_before.json
    nice -n 10 python bench/harness_looks.py --out /tmp/looks_after.json --compare /tmp/looks_before.json

``--compare`` writes ``bench/results/harness_looks.md``: CPU seconds before and after and the
ratio after / before per mutant and in total.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import rass_theory as rt
from rass_theory.mutants import MUTANTS

NAMES = ("residual_from_target", "dgrs_sorted_order", "dgrs_level_off_by_one", "rass_drafting_order",
         "always_accept_top")
#: exact rules timed too: what the looks cost a verifier that runs every chunk
EXACT = ("resample", "rmc")
OUT = os.path.join(os.path.dirname(__file__), "results", "harness_looks.md")


def rows_run(res):
    cells = res.cells or (res,)
    return sum(sum(c.n_rows for c in cell.pass_counts) for cell in cells)


def measure(seed):
    rt.check_exactness(rt.verifiers.resample(), 4, 0.5, n_samples=2_000, rng=0)   # warm-up (imports, caches)
    out = {}
    for name in NAMES + EXACT:
        v = MUTANTS[name](4) if name in MUTANTS else getattr(rt.verifiers, name)()
        c0 = time.process_time()
        res = rt.check_exactness(v, rng=seed)
        cpu = time.process_time() - c0
        cells = res.cells or (res,)
        out[name] = {"passed": bool(res.passed), "cpu_s": cpu, "rows": rows_run(res), "cells_run": len(cells),
                     "stop_look": [getattr(c, "stop_look", None) for c in cells]}
        print(name, out[name], flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare", default=None)
    args = ap.parse_args()
    res = measure(args.seed)
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    if args.compare is None:
        return
    with open(args.compare) as fh:
        before = json.load(fh)
    lines = ["# Sequential looks within a cell: decisively wrong mutants on the default grid", "",
             f"`PYTHONPATH=<tree before> python bench/harness_looks.py --seed {args.seed} --out before.json` then "
             f"`python bench/harness_looks.py --seed {args.seed} --out after.json --compare before.json` "
             "(process CPU seconds, `rt.check_exactness(mutant, rng=seed)`, shared 2-core machine, niced; "
             "tree before: a `git archive` of main before the sequential looks, 14e1bc2).", "",
             "| verifier | verdict before | verdict after | rows before | rows after | stop look after | "
             "CPU s before | CPU s after | after / before |", "|---|---|---|---|---|---|---|---|---|"]
    tb = ta = 0.0
    for name in NAMES + EXACT:
        b, a = before[name], res[name]
        if name in NAMES:
            tb, ta = tb + b["cpu_s"], ta + a["cpu_s"]
        lines.append(f"| {name} | {'PASSED' if b['passed'] else 'FAILED'} | {'PASSED' if a['passed'] else 'FAILED'} "
                     f"| {b['rows']:,} | {a['rows']:,} | {a['stop_look']} | {b['cpu_s']:.2f} | {a['cpu_s']:.2f} "
                     f"| {a['cpu_s'] / b['cpu_s']:.2f} |")
        if name == NAMES[-1]:
            lines.append(f"| total of the {len(NAMES)} mutants | | | | | | {tb:.2f} | {ta:.2f} | {ta / tb:.2f} |")
    with open(OUT, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
