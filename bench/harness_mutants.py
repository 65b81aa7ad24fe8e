"""Does the exactness harness at its defaults reject every mutant and pass every exact rule?

Runs ``rass_theory.check_exactness(v)`` with no options (the default grid of
``rass_theory.stats.grid.DEFAULT_CELLS``: K in {2, 3, 8} at dim 8 with 100,000 rows per dtype
pass, K = 4 at dim 256 with 20,000 rows, and the 2.5-million-row float64 power cell at K = 4;
rows spread over delta in [1e-3, 12] and ||mu_draft||/sigma in {0} u [0.01, 1e4]; one Holm
family at alpha = 1e-3; the run stops after the first cell that decides a failure) on every exact
built-in rule and every mutant of :mod:`rass_theory.mutants`, and prints one row each: verdict,
wall time, the smallest Holm-adjusted p-value and the test that reached it (``contract`` when the
verifier broke the contract), and the cells run.  The threshold-policy rule solves its optimal
policy for every new delta, so it runs the grid at ``--threshold-n`` rows per cell.  Saves the
table to ``bench/results/harness_mutants.md`` (``--backend torch``: ``harness_mutants_torch.md``,
the torch twins of the exact rules and the mutants that run on tensors).

Usage: ``python bench/harness_mutants.py [--seed S] [--only NAME ...] [--n-samples N] [--no-exact]
[--backend numpy|torch]``.  The machine this runs on is shared (five sessions on 2 cores), so wall
times are upper bounds of a quiet machine's; the process CPU time (single-threaded NumPy) is what
the run costs on a quiet core.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import rass_theory as rt
from rass_theory.mutants import MUTANT_CATCHES, MUTANTS

OUT = os.path.join(os.path.dirname(__file__), "results", "harness_mutants.md")


def exact_rules(backend="numpy"):
    if backend == "torch":
        from rass_theory.torch import verifiers as tv

        return {"rmc": tv.rmc(), "dgrs": tv.dgrs(), "rass": tv.rass(), "resample": tv.resample(),
                "optimal_list": tv.optimal_list(), "threshold": tv.threshold(K=4)}
    return {"rmc": rt.verifiers.rmc(), "dgrs": rt.verifiers.dgrs(), "rass": rt.verifiers.rass(),
            "resample": rt.verifiers.resample(), "optimal_list": rt.verifiers.optimal_list(),
            "threshold": rt.verifiers.threshold(K=4)}


def smallest(res):
    """(name, adjusted p) of the decisive test: the contract if broken, else the smallest Holm p."""
    tests = list(res.tests)
    broken = [t for t in tests if t.name.endswith("contract") and not t.passed]
    if broken:
        return broken[0].name, 0.0
    t = min(tests, key=lambda t: np.nan_to_num(t.pvalue_adjusted, nan=1.0))
    return t.name, float(t.pvalue_adjusted)


def run(name, verifier, seed, n_samples, expect_pass, backend="numpy"):
    kw = {} if n_samples is None else {"n_samples": n_samples}
    if backend == "torch":
        kw.update(backend="torch", device="cpu")
    t0, c0 = time.perf_counter(), time.process_time()
    res = rt.check_exactness(verifier, rng=seed, **kw)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    test, p = smallest(res)
    ok = res.passed == expect_pass
    cells = " ".join(f"K={r.K},d={r.dim}:{r.elapsed_seconds:.1f}" for r in res.cells)
    return (name, "exact" if expect_pass else "mutant", "PASSED" if res.passed else "FAILED",
            "ok" if ok else "WRONG", f"{p:.2g}", test, f"{wall:.1f}", f"{cpu:.1f}", cells,
            f"{res.correction_fraction:.1%}")


def power_table() -> str:
    """Detectable discrepancy per statistic at the defaults (``detectable_discrepancies``), per cell."""
    from rass_theory.stats.config import harness_config
    from rass_theory.stats.family import family_size, tail_test_names
    from rass_theory.stats.grid import default_cells
    from rass_theory.stats.power import detectable_discrepancies

    cells = default_cells(rt.verifiers.rass())
    cfgs = [harness_config(rt.verifiers.rass(), c["K"], c["delta"], c["dim"], n_samples=c["n_samples"], rng=0,
                           checkpoint_every=1, dtype=c.get("dtype")) for c in cells]
    m = sum(family_size(c) for c in cfgs) + sum(len(tail_test_names(d, nd))
                                                 for d, nd in {(c.dim, c.n_directions) for c in cfgs})
    lines = [f"default grid: {len(cfgs)} cells, Holm family m = {m} (read from the code), alpha = 1e-3, beta = 0.01", ""]
    for c, cfg in zip(cells, cfgs):
        lines += [f"cell K={c['K']}, delta={c['delta']:g}, dim={c['dim']}, n = {cfg.n_samples:,} rows per pass "
                  f"({', '.join(cfg.dtypes)})", "", "| statistic | detectable discrepancy | unit |", "|---|---|---|"]
        for name, (value, unit) in detectable_discrepancies(cfg.n_samples, 1e-3, m, 0.01, dim=cfg.dim,
                                                            n_groups=len(cfg.deltas)).items():
            lines.append(f"| {name} | {float(value):.4g} | {unit} |")
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--n-samples", type=int, default=None)
    ap.add_argument("--no-exact", action="store_true")
    ap.add_argument("--power", action="store_true", help="print the detectable discrepancy per statistic and exit")
    ap.add_argument("--backend", default="numpy", choices=("numpy", "torch"))
    ap.add_argument("--threshold-n", type=int, default=300)
    args = ap.parse_args()
    if args.power:
        text = "# Detectable discrepancy per statistic at the defaults\n\n`python bench/harness_mutants.py --power`\n\n"
        text += power_table()
        print(text)
        with open(os.path.join(os.path.dirname(OUT), "harness_power.md"), "w") as fh:
            fh.write(text + "\n")
        return
    from rass_theory.mutants import MUTANT_BACKENDS
    rows = []
    header = ("verifier", "kind", "verdict", "as expected", "smallest p (Holm)", "test", "wall s", "CPU s",
              "wall s per cell", "corrections")
    print(" | ".join(header), flush=True)
    todo = [] if args.no_exact else [(n, v, True) for n, v in exact_rules(args.backend).items()]
    if args.backend == "torch":
        from rass_theory.torch.mutants import all_mutants as torch_mutants

        todo += [(n, v, False) for n, v in torch_mutants(4).items()]
    else:
        todo += [(n, f(4), False) for n, f in MUTANTS.items() if "numpy" in MUTANT_BACKENDS[n]]
    if args.only:
        todo = [t for t in todo if t[0] in args.only]
    for name, v, expect in todo:
        n = args.threshold_n if name == "threshold" else args.n_samples
        row = run(name, v, args.seed, n, expect, args.backend)
        rows.append(row)
        print(" | ".join(row), flush=True)
    lines = ["# Exactness harness at its defaults: exact rules and mutants", "",
             f"`python bench/harness_mutants.py --seed {args.seed}`"
             + (f" --n-samples {args.n_samples}" if args.n_samples else "")
             + (f" --backend {args.backend}" if args.backend != "numpy" else "")
             + f"; the default grid (DEFAULT_CELLS: K=2,3,8 at dim 8 and 100k rows x 2 dtypes, K=4 at dim 256 and "
               f"20k rows x 2 dtypes, the K=4 power cell with 2.5M float64 rows), alpha = 1e-3 (one Holm family), "
               f"stopping after the first cell that decides a failure and, within a cell, at the first interim look "
               f"(after chunks 1, 2, 4, ...) with a decisive rejection (stats/looks.py); threshold at {args.threshold_n} rows per cell. "
               "Shared 2-core machine (five sessions): wall times are upper bounds; CPU s is the process's CPU time.",
             "", "| " + " | ".join(header) + " | expected to be caught by |",
             "|" + "---|" * (len(header) + 1)]
    for row in rows:
        lines.append("| " + " | ".join(row) + f" | {MUTANT_CATCHES.get(row[0], '-')} |")
    if not args.only:
        out = OUT if args.backend == "numpy" else OUT.replace(".md", f"_{args.backend}.md")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
