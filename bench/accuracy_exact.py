"""Worst errors of the exact closed forms against the independent mpmath reference.

Grid: K in {1, 2, 3, 4, 5, 8, 16, 32, 64} x delta in {1e-8, 1e-4, 0.01, 0.1, 0.5, 1, 2, 4, 8, 16}
(the one the issue names).  For each rule prints the worst absolute error of the acceptance and
the worst relative error of the rejection probability (``1 - acceptance``, computed directly),
with the cell where each occurs.  RASS is checked at uniform, top-rank and one fixed random
weight vector per K, and the optimiser's acceptance at its own weights when it is available.

Run:  python bench/accuracy_exact.py [--rules dgrs,bound,rmc,rass,optimal] [--K 1,2,4] [--delta 0.1,1]
Takes several minutes for the full grid (mpmath at 40 digits; gmpy2 makes it ~2x faster).
"""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "exact"))

import mp_reference as ref  # noqa: E402


def _parse(text, cast):
    return tuple(cast(x) for x in text.split(",")) if text else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", default="rmc,dgrs,bound,rass,optimal")
    parser.add_argument("--K", default="")
    parser.add_argument("--delta", default="")
    args = parser.parse_args(argv)
    rules = args.rules.split(",")
    Ks = _parse(args.K, int) or ref.GRID_K
    deltas = _parse(args.delta, float) or ref.GRID_DELTA
    have_rass = importlib.util.find_spec("rass_theory.exact.rass") is not None
    have_opt = importlib.util.find_spec("rass_theory.optimize.rank_weights") is not None

    worst = {}  # label -> [abs, abs_cell, rel, rel_cell, n, seconds]

    def record(label, cell, errs, seconds):
        w = worst.setdefault(label, [0.0, None, 0.0, None, 0, 0.0])
        if errs[0] >= w[0]:
            w[0], w[1] = errs[0], cell
        if errs[1] >= w[2]:
            w[2], w[3] = errs[1], cell
        w[4] += 1
        w[5] += seconds

    for rule in rules:
        if rule in ("rass", "optimal") and not have_rass and rule == "rass":
            print(f"# skipping {rule}: rass_theory.exact.rass not available", flush=True)
            continue
        if rule == "optimal" and not have_opt:
            print("# skipping optimal: rass_theory.optimize.rank_weights not available", flush=True)
            continue
        for K in ([1] if rule == "rmc" else Ks):
            for d in deltas:
                t0 = time.perf_counter()
                if rule == "rass":
                    for name, w in ref.weight_vectors(K).items():
                        t1 = time.perf_counter()
                        record(f"rass[{name}]", (K, d), ref.compare("rass", K, d, w), time.perf_counter() - t1)
                    continue
                if rule == "optimal":
                    if K == 1:
                        continue
                    from rass_theory.optimize.rank_weights import optimal_rank_weights

                    res = optimal_rank_weights(K, d)
                    acc, tv = ref.rass_tv(res.weights, d)
                    abs_err = abs(res.acceptance - float(acc))
                    rel_err = abs(res.tv - float(tv)) / float(tv) if tv > ref.REL_FLOOR else 0.0
                    record("rass[optimal]", (K, d), (abs_err, rel_err), time.perf_counter() - t0)
                    continue
                record(rule, (K, d), ref.compare(rule, K, d), time.perf_counter() - t0)
            print(f"# {rule} K={K} done", file=sys.stderr, flush=True)

    print(f"{'rule':<16}{'cells':>6}  {'max |acc - mp|':>15}  {'at (K, delta)':<16}{'max rel err rej':>16}  "
          f"{'at (K, delta)':<16}{'mp seconds':>10}")
    for label, (a, ac, r, rc, n, sec) in worst.items():
        print(f"{label:<16}{n:>6}  {a:>15.3e}  {str(ac):<16}{r:>16.3e}  {str(rc):<16}{sec:>10.1f}")


if __name__ == "__main__":
    main()
