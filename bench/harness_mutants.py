"""Does the exactness harness at its defaults reject every mutant and pass every exact rule?

Runs ``rass_theory.check_exactness(v)`` with no options (the default grid: K in {2, 4}, delta in
{0.5, 1, 2}, dim 8, float64 and float32 passes, one Holm family at alpha = 1e-3) on every exact
built-in rule and every mutant of :mod:`rass_theory.mutants`, and prints one row each: verdict,
wall time, the smallest Holm-adjusted p-value and the test that reached it (``contract`` when the
verifier broke the contract).  Saves the table to ``bench/results/harness_mutants.md``.

Usage: ``python bench/harness_mutants.py [--seed S] [--only NAME ...] [--n-samples N] [--no-exact]``.
The machine this runs on is shared (7 sessions on 2 cores when the table was made), so the wall
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


def exact_rules():
    return {"rmc": rt.verifiers.rmc(), "dgrs": rt.verifiers.dgrs(), "rass": rt.verifiers.rass(),
            "resample": rt.verifiers.resample()}


def smallest(res):
    """(name, adjusted p) of the decisive test: the contract if broken, else the smallest Holm p."""
    tests = list(res.tests)
    broken = [t for t in tests if t.name.endswith("contract") and not t.passed]
    if broken:
        return broken[0].name, 0.0
    t = min(tests, key=lambda t: np.nan_to_num(t.pvalue_adjusted, nan=1.0))
    return t.name, float(t.pvalue_adjusted)


def run(name, verifier, seed, n_samples, expect_pass):
    kw = {} if n_samples is None else {"n_samples": n_samples}
    t0, c0 = time.perf_counter(), time.process_time()
    res = rt.check_exactness(verifier, rng=seed, **kw)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    test, p = smallest(res)
    ok = res.passed == expect_pass
    cells = " ".join(f"{r.elapsed_seconds:.1f}" for r in res.reports)
    return (name, "exact" if expect_pass else "mutant", "PASSED" if res.passed else "FAILED",
            "ok" if ok else "WRONG", f"{p:.2g}", test, f"{wall:.1f}", f"{cpu:.1f}", cells,
            f"{res.correction_fraction:.1%}")


def power_table() -> str:
    """Detectable discrepancy per statistic at the defaults (``detectable_discrepancies``)."""
    from rass_theory.stats.certify import default_cells
    from rass_theory.stats.harness import DEFAULT_N_SAMPLES, _config, _family_size, tail_test_names
    from rass_theory.stats.power import detectable_discrepancies

    cfgs = [_config(rt.verifiers.rass(), K, d, dim, DEFAULT_N_SAMPLES, 1e-3, 0, None, None, None, None, 4096, 400,
                    None, 0.01, "numpy", None, None, None, 1, False) for K, d, dim in default_cells()]
    m = sum(_family_size(c, with_tails=False) for c in cfgs) + len(tail_test_names(8, 2))
    rows_all = len(cfgs) * len(cfgs[0].dtypes) * DEFAULT_N_SAMPLES
    lines = [f"default grid: {len(cfgs)} cells, n = {DEFAULT_N_SAMPLES:,} rows per pass and cell, Holm family m = {m}, "
             f"alpha = 1e-3, beta = 0.01; far tails pooled over {rows_all:,} rows", "",
             "| statistic | detectable discrepancy | unit |", "|---|---|---|"]
    for name, (value, unit) in detectable_discrepancies(DEFAULT_N_SAMPLES, 1e-3, m, 0.01,
                                                        n_tail_rows=rows_all).items():
        lines.append(f"| {name} | {float(value):.4g} | {unit} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--n-samples", type=int, default=None)
    ap.add_argument("--no-exact", action="store_true")
    ap.add_argument("--power", action="store_true", help="print the detectable discrepancy per statistic and exit")
    args = ap.parse_args()
    if args.power:
        print(power_table())
        return
    rows = []
    header = ("verifier", "kind", "verdict", "as expected", "smallest p (Holm)", "test", "wall s", "CPU s",
              "wall s per cell", "corrections")
    print(" | ".join(header), flush=True)
    todo = [] if args.no_exact else [(n, v, True) for n, v in exact_rules().items()]
    todo += [(n, f(4), False) for n, f in MUTANTS.items()]
    if args.only:
        todo = [t for t in todo if t[0] in args.only]
    for name, v, expect in todo:
        row = run(name, v, args.seed, args.n_samples, expect)
        rows.append(row)
        print(" | ".join(row), flush=True)
    lines = ["# Exactness harness at its defaults: exact rules and mutants", "",
             f"`python bench/harness_mutants.py --seed {args.seed}`"
             + (f" --n-samples {args.n_samples}" if args.n_samples else "")
             + "; grid K in {2, 4} x delta in {0.5, 1, 2}, dim 8, float64 + float32 passes, alpha = 1e-3 "
               "(one Holm family). Shared 2-core machine under load from other sessions (load average 6-9): wall "
               "times are upper bounds; CPU s is the process's CPU time, about the wall time on a quiet core.",
             "", "| " + " | ".join(header) + " | expected to be caught by |",
             "|" + "---|" * (len(header) + 1)]
    for row in rows:
        lines.append("| " + " | ".join(row) + f" | {MUTANT_CATCHES.get(row[0], '-')} |")
    if not args.only:
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
