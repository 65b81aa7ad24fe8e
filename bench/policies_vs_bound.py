"""Table: RMC, D-GRS, RASS (optimal weights), best threshold-rank policy, best two-level
threshold policy and the list-coupling bound for K in {2, 4, 8} and delta in {0.25, 0.5, 1, 1.5, 2}.

Usage:  python bench/policies_vs_bound.py [--out table.csv]
        python bench/policies_vs_bound.py --speed   # optimal_threshold_policy vs the reference

``--speed`` times :func:`optimal_threshold_policy` against ``_optimal_threshold_policy_reference``
(the pre-speed-up search: last-point warm start, golden section to ``xtol`` only) in the same
process, for K in {2, 4, 8} and delta in {0.25, 0.5, 1, 2}, and prints the acceptance difference.
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


def _optimal_threshold_policy_reference(K, delta, *, n_grid=25, xtol=1e-6):
    """The search before the speed-up (kept here only as the timing/accuracy baseline)."""
    from rass_theory.optimize.policies import _best_threshold_result, _grid_maxima, _inner
    from rass_theory.optimize.rank_weights import optimal_rank_weights

    rass = optimal_rank_weights(K, delta)
    cache = {}
    start = {"w": rass.weights}

    def a(t):
        t = float(t)
        if t not in cache:
            cache[t] = _inner(K, delta, t, start["w"])
            start["w"] = cache[t][1]
        return cache[t][0]

    ts, cand = _grid_maxima(a, delta, n_grid)
    invphi = (np.sqrt(5.0) - 1.0) / 2.0
    for i in cand:
        lo, hi = ts[max(i - 1, 0)], ts[min(i + 1, n_grid - 1)]
        x1, x2 = hi - invphi * (hi - lo), lo + invphi * (hi - lo)
        f1, f2 = a(x1), a(x2)
        for _ in range(40):
            if hi - lo < xtol:
                break
            if f1 >= f2:
                hi, x2, f2 = x2, x1, f1
                x1 = hi - invphi * (hi - lo)
                f1 = a(x1)
            else:
                lo, x1, f1 = x1, x2, f2
                x2 = lo + invphi * (hi - lo)
                f2 = a(x2)
    return _best_threshold_result(K, cache, rass)


def speed():
    from rass_theory.optimize.policies import optimal_threshold_policy

    optimal_threshold_policy(2, 1.0)  # imports and solver set-up outside the timings
    print("K delta reference_s new_s ratio acceptance_new acceptance_ref diff t_new t_ref")
    worst, tot_ref, tot_new = 0.0, 0.0, 0.0
    for K in (2, 4, 8):
        for d in (0.25, 0.5, 1.0, 2.0):
            t0 = time.perf_counter()
            ref = _optimal_threshold_policy_reference(K, d)
            t1 = time.perf_counter()
            new = optimal_threshold_policy(K, d)
            t2 = time.perf_counter()
            diff = new.acceptance - ref.acceptance
            worst = max(worst, abs(diff))
            tot_ref, tot_new = tot_ref + t1 - t0, tot_new + t2 - t1
            print(f"{K} {d:g} {t1 - t0:.2f} {t2 - t1:.2f} {(t1 - t0) / (t2 - t1):.1f} "
                  f"{new.acceptance:.15f} {ref.acceptance:.15f} {diff:.1e} {new.t:.6f} {ref.t:.6f}",
                  flush=True)
    print(f"total reference {tot_ref:.1f} s, new {tot_new:.1f} s, ratio {tot_ref / tot_new:.1f}; "
          f"max |acceptance difference| {worst:.1e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--speed", action="store_true")
    args = ap.parse_args()
    if args.speed:
        return speed()
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
