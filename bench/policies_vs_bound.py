"""Table: RMC, D-GRS, RASS (optimal weights), best threshold-rank policy, best two-level
threshold policy and the list-coupling bound for K in {2, 4, 8} and delta in {0.25, 0.5, 1, 1.5, 2}.

Usage:  python bench/policies_vs_bound.py [--out table.csv]
"""
from __future__ import annotations

import argparse
import csv
import sys
import time

import numpy as np
from scipy.special import ndtr


def bound(K, delta):
    try:
        import rass_theory as rt

        return float(rt.acceptance_bound(K, delta)), "rt.acceptance_bound"
    except Exception:  # theory B not available: dense grid minimum
        t = np.linspace(-8, delta + 8, 400001)
        return float(np.min(ndtr(t - delta) + 1 - ndtr(t) ** K)), "grid"


def rule(name, K, delta):
    try:
        import rass_theory as rt

        return float(rt.acceptance(name, K, delta))
    except Exception:
        return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from rass_theory.optimize.policies import optimal_threshold_policy, optimal_two_level_policy

    rows = []
    print("K delta rmc dgrs rass threshold t two_level t1 t2 bound threshold/bound two_level/bound "
          "gap_closed_by_two_level bound_source seconds")
    for K in (2, 4, 8):
        for d in (0.25, 0.5, 1.0, 1.5, 2.0):
            t0 = time.perf_counter()
            thr = optimal_threshold_policy(K, d)
            two = optimal_two_level_policy(K, d)
            b, src = bound(K, d)
            closed = ((two.acceptance - thr.acceptance) / (b - thr.acceptance)
                      if b - thr.acceptance > 1e-9 else float("nan"))
            row = dict(K=K, delta=d, rmc=rule("rmc", 1, d), dgrs=rule("dgrs", K, d),
                       rass=thr.rass_acceptance, threshold=thr.acceptance, t=thr.t,
                       two_level=two.acceptance, t1=two.t1, t2=two.t2, bound=b,
                       ratio=thr.acceptance / b, ratio_two=two.acceptance / b, gap_closed=closed,
                       bound_source=src, seconds=time.perf_counter() - t0)
            rows.append(row)
            print(f"{K} {d:g} {row['rmc']:.6f} {row['dgrs']:.6f} {row['rass']:.6f} {row['threshold']:.6f} "
                  f"{row['t']:.4f} {row['two_level']:.6f} {row['t1']:.4f} {row['t2']:.4f} {b:.6f} "
                  f"{row['ratio']:.6f} {row['ratio_two']:.6f} {closed:.3f} {src} {row['seconds']:.1f}",
                  flush=True)
    if args.out:
        with open(args.out, "w", newline="") as fh:
            wr = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
            wr.writeheader()
            wr.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
