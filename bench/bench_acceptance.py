"""Speed of the exact acceptance probabilities (``acceptance("dgrs", 8, delta)`` target: < 20 us).

Baselines run in the same process:
- ``naive scipy``: the same D-GRS closed form written with ``scipy.stats.norm`` scalar calls
  (``P_k = Q(c_k - delta) - S_k Q(c_k)``), i.e. what one would write without care for speed;
- ``vectorised``: the NumPy row-vectorised level recursion the verifiers use, on one row.

Run:  python bench/bench_acceptance.py
"""
from __future__ import annotations

import math
import timeit

import numpy as np
from scipy import stats

import rass_theory as rt
from rass_theory.exact.laws import DGRSLaw


def naive_scipy_dgrs(K: int, delta: float) -> float:
    P = []
    p = 2 * stats.norm.cdf(delta / 2) - 1
    P.append(p)
    for _ in range(1, K):
        S_k = 1.0 + sum(P)
        c = delta / 2 + math.log(S_k) / delta
        p = stats.norm.sf(c - delta) - S_k * stats.norm.sf(c)
        P.append(p)
    return 1.0 - P[-1]


def per_call_us(fn, number=2000, repeat=5) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main():
    K = 8
    # calibration: timings on a shared machine drift with its load; a ratio to a fixed cheap
    # operation measured in the same process is more portable than the raw microseconds
    t_erfc = per_call_us(lambda: math.erfc(0.3), number=200000)
    t_ref = per_call_us(lambda: rt.acceptance("dgrs", K, 1.0), number=20000)
    print(f"calibration: math.erfc call {t_erfc:.3f} us; acceptance('dgrs', {K}, 1.0) = "
          f"{t_ref / t_erfc:.0f} erfc-call equivalents")
    print(f"acceptance('dgrs', {K}, delta): microseconds per call (best of 5)")
    print(f"{'delta':>8}  {'rt.acceptance':>14}  {'naive scipy':>12}  {'vectorised n=1':>15}  {'speed-up vs naive':>18}")
    for delta in (0.25, 0.5, 1.0, 1.5, 2.0, 4.0, 0.05, 1e-4):
        d_arr = np.array([delta])
        t_fast = per_call_us(lambda: rt.acceptance("dgrs", K, delta), number=20000)
        t_naive = per_call_us(lambda: naive_scipy_dgrs(K, delta), number=500)
        t_vec = per_call_us(lambda: DGRSLaw(K, d_arr).P, number=2000)
        assert abs(naive_scipy_dgrs(K, delta) - rt.acceptance("dgrs", K, delta)) < 1e-9
        print(f"{delta:>8g}  {t_fast:>14.2f}  {t_naive:>12.2f}  {t_vec:>15.2f}  {t_naive / t_fast:>17.1f}x")
    print()
    for label, fn in [("acceptance('rmc', 1, 1.0)", lambda: rt.acceptance("rmc", 1, 1.0)),
                      ("acceptance_bound(8, 1.0)", lambda: rt.acceptance_bound(8, 1.0)),
                      ("acceptance_bound(1024, 0.5)", lambda: rt.acceptance_bound(1024, 0.5)),
                      ("acceptance('dgrs', 64, 1.0)", lambda: rt.acceptance("dgrs", 64, 1.0))]:
        print(f"{label:<32}{per_call_us(fn, number=5000):>10.2f} us")


if __name__ == "__main__":
    main()
