"""Benchmark: batched verification time relative to drawing the children, in one process.

Run ``python bench/bench_verifiers.py [--n 200000] [--K 4] [--d 64] [--delta 0.5] [--repeat 3]``.

For each rule the script prints ``time(verify) / time(rng.standard_normal((n, K, d)))``, both
measured in this process (best of ``--repeat``), so machine load affects both alike.  Issue 3
asks for RASS <= 0.6.  The optimal weights (a cvxpy solve) and the residual table are computed
once in a warm-up call, as they would be in a long run.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from rass_theory import verifiers


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--K", type=int, default=4)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--delta", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    n, K, d, delta = args.n, args.K, args.d, args.delta

    rng = np.random.default_rng(0)
    mu_draft = np.broadcast_to(rng.standard_normal(d), (n, d))
    e = rng.standard_normal(d)
    e /= np.linalg.norm(e)
    mu_target = mu_draft + delta * e
    holder = {}

    def draw():
        holder["children"] = rng.standard_normal((n, K, d))

    t_draw = best_of(draw, args.repeat)
    children = mu_draft[:, None, :] + holder["children"]
    children_k1 = np.ascontiguousarray(children[:, :1])

    rules = [
        ("rass (optimal weights)", verifiers.rass(), children),
        ("rass (uniform weights)", verifiers.rass(weights="uniform"), children),
        ("dgrs", verifiers.dgrs(), children),
        ("rmc (K=1 children)", verifiers.rmc(), children_k1),
        ("resample", verifiers.resample(), children),
    ]
    print(f"n = {n}, K = {K}, d = {d}, delta = {delta}; drawing children: {t_draw:.3f} s (best of {args.repeat})")
    print(f"{'rule':28s} {'verify [s]':>10s} {'ratio':>7s} {'accept':>7s}")
    for name, verifier, ch in rules:
        verifier(ch[:1000], mu_draft[:1000], mu_target[:1000], 1.0, rng)  # warm-up: weights, tables
        res = {}

        def run():
            res["r"] = verifier(ch, mu_draft, mu_target, 1.0, rng)

        t = best_of(run, args.repeat)
        issues = verifiers.check_contract(res["r"], ch)
        assert not issues, issues
        print(f"{name:28s} {t:10.3f} {t / t_draw:7.3f} {res['r'].acceptance_rate:7.4f}")


if __name__ == "__main__":
    main()
