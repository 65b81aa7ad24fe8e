"""CPU and wall time of the default grid for one rule, per cell and in total (issue 19: rass within 90 s).

Runs every cell of ``rass_theory.stats.grid.DEFAULT_CELLS`` through ``rt.certify`` one at a time
(the cell's own rows, dtypes and seed), timing each with ``time.process_time`` (single-threaded
NumPy: the wall time of a quiet core) and ``time.perf_counter`` (wall on this shared machine).

    python bench/harness_grid_time.py [--rule rass] [--seed 20261201] [--out PATH]

Writes ``bench/results/harness_grid_time.md``.
"""
from __future__ import annotations

import argparse
import os
import time

OUT = os.path.join(os.path.dirname(__file__), "results", "harness_grid_time.md")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rule", default="rass")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", default=OUT, help="where to write the table (default bench/results/harness_grid_time.md)")
    args = ap.parse_args(argv)
    import rass_theory as rt
    from rass_theory.stats.grid import default_cells

    verifier = getattr(rt.verifiers, args.rule)()
    rt.check_exactness(verifier, K=4, delta=1.0, n_samples=2000, rng=0)   # warm imports and weight tables
    rows, cpu_total, wall_total = [], 0.0, 0.0
    for cell in default_cells(verifier):
        c0, w0 = time.process_time(), time.perf_counter()
        res = rt.certify(verifier, [cell], rng=args.seed, show=False)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        cpu_total += cpu
        wall_total += wall
        r = res.cells[0]
        rows.append(f"| K={cell['K']}, delta={cell['delta']:g}, dim={cell['dim']} | {r.n_samples:,} x "
                    f"{len(r.dtypes)} | {cpu:.1f} | {wall:.1f} | {'pass' if res.passed else 'FAIL'} |")
        print(rows[-1], flush=True)
    load = os.getloadavg()
    lines = [f"# Default grid time for `{args.rule}`", "",
             f"`python bench/harness_grid_time.py --rule {args.rule} --seed {args.seed}`; load average "
             f"{load[0]:.1f} on 2 cores during the run (CPU s is the quiet-core wall time).", "",
             "| cell | rows x dtypes | CPU s | wall s | verdict |", "|---|---|---|---|---|", *rows,
             f"| **total** | | **{cpu_total:.1f}** | {wall_total:.1f} | |"]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
