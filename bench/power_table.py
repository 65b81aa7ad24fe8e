"""Power table: for each mutant, the smallest n_samples at which check_exactness rejects it.

For every mutant of ``rass_theory.mutants`` (K = 4, delta = 0.5, dim = 8, every other harness
setting at its default) this walks the doubling grid n = 1000 * 2^k and, at each n, runs
independent seeds until one of them *passes* (then n is too small) or ``--reps`` of them have all
failed (then n is recorded).  "Rejected with probability >= 0.99" is read as "rejected in every
one of R replicates": with R = 20 the one-sided 95% Clopper-Pearson lower bound on the rejection
probability is 0.86, with R = 50 it is 0.94; the table states R.

    python bench/power_table.py                  # all mutants, R = 20, writes bench/results/power_table.{csv,md}
    python bench/power_table.py --reps 50 --mutants precision_bf16_residual
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time

from scipy import stats


def smallest_rejecting_n(verifier, grid, reps, seed0=1000, log=print):
    """Walk ``grid`` upward; return (n, runs, seconds) of the first n where all reps reject."""
    import rass_theory as rt

    runs = 0
    t0 = time.perf_counter()
    for n in grid:
        ok = True
        for r in range(reps):
            rep = rt.check_exactness(verifier, n_samples=n, rng=seed0 + 7919 * r + n,
                                     chunk_size=min(n, 100_000))
            runs += 1
            if rep.passed:
                log(f"    n={n:>9,}: passed on replicate {r + 1} -> too small")
                ok = False
                break
        if ok:
            log(f"    n={n:>9,}: rejected in all {reps} replicates")
            return n, runs, time.perf_counter() - t0
    return None, runs, time.perf_counter() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--min-n", type=int, default=1000)
    parser.add_argument("--max-n", type=int, default=1_024_000)
    parser.add_argument("--mutants", nargs="*", default=None)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "power_table"))
    args = parser.parse_args(argv)

    from rass_theory.mutants import MUTANT_CATCHES, all_mutants
    from rass_theory.stats.config import DEFAULT_N_SAMPLES

    mutants = all_mutants(4)
    names = args.mutants or list(mutants)
    grid = []
    n = args.min_n
    while n <= args.max_n:
        grid.append(n)
        n *= 2
    lower = stats.beta.ppf(0.05, args.reps, 1)  # one-sided 95% CP lower bound when all reps reject
    rows = []
    for name in names:
        print(f"{name} (expected to be caught by: {MUTANT_CATCHES.get(name, '?')})", flush=True)
        n_star, runs, secs = smallest_rejecting_n(mutants[name], grid, args.reps,
                                                  log=lambda s: print(s, flush=True))
        rows.append({"mutant": name, "smallest_n": n_star if n_star else f"> {grid[-1]}",
                     "reps": args.reps, "power_lower_95": round(float(lower), 3),
                     "below_default": bool(n_star and n_star <= DEFAULT_N_SAMPLES),
                     "runs": runs, "seconds": round(secs, 1), "catches": MUTANT_CATCHES.get(name, "")})
        print(f"  -> {rows[-1]['smallest_n']}  ({runs} runs, {secs:.0f} s)", flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(args.out + ".md", "w") as fh:
        fh.write(f"Smallest n_samples (doubling grid from {args.min_n}) at which check_exactness "
                 f"(K=4, delta=0.5, dim=8, defaults otherwise) rejected the mutant in all {args.reps} "
                 f"replicates (95% lower bound on power {lower:.3f}); default n_samples = {DEFAULT_N_SAMPLES:,}.\n\n")
        fh.write("| mutant | smallest n | caught by | runs | seconds |\n| --- | --- | --- | --- | --- |\n")
        for r in rows:
            n_txt = f"{r['smallest_n']:,}" if isinstance(r["smallest_n"], int) else r["smallest_n"]
            fh.write(f"| {r['mutant']} | {n_txt} | {r['catches']} | {r['runs']} | {r['seconds']} |\n")
    print(open(args.out + ".md").read())
    return 0 if all(r["below_default"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
