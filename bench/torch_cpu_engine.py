"""Torch verifiers on CPU tensors against NumPy, calls interleaved: the default engine and the torch namespace.

For each rule (``rass``, ``optimal_list``, ``threshold``, ``dgrs``) and batch (per-row deltas
log-uniform on ``[0.05, 3]``, or one ``delta = 1``; n = 50,000, K = 4, d = 64, one thread, the
batches of ``bench_law_engine.py``) the three calls -- NumPy arrays, CPU tensors on the default
``cpu_engine("numpy")``, CPU tensors on ``cpu_engine("torch")`` -- are timed in turn, ``--repeats``
rounds, and the best CPU time of each gives the ratios torch/NumPy (a busy machine slows the
three alike; ``bench_law_engine.py`` times the back ends minutes apart, and its torch/NumPy
column moves by 10-15% between identical runs).

Usage::

    OMP_NUM_THREADS=1 python bench/torch_cpu_engine.py [--repeats 9] [--out bench/results/torch_cpu_engine.md]
"""
from __future__ import annotations

import argparse

import numpy as np

from _common import RESULTS, cpu_best
from bench_law_engine import ENGINE, RULES, in_engine, make_batch


def measure(n, K, d, repeats):
    import torch

    from rass_theory import verifiers as V

    torch.set_num_threads(1)
    rows = []
    for per_row in (True, False):
        children, mu_d, mu_t, sigma = make_batch(n, K, d, per_row, np.random.default_rng(1))
        tensors = tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in (children, mu_d, mu_t))
        for rule in RULES:
            v = getattr(V, rule)()
            calls = {"numpy": lambda v=v: v(children, mu_d, mu_t, sigma, np.random.default_rng(2))}
            calls.update({backend: (lambda v=v, e=engine: in_engine(e, v, *tensors, sigma, torch.Generator().manual_seed(2)))
                          for backend, engine in ENGINE.items()})
            for call in calls.values():
                call()                                     # warm caches and imports
            best = {name: np.inf for name in calls}
            for _ in range(repeats):
                for name, call in calls.items():
                    best[name] = min(best[name], cpu_best(call, 1))
            row = dict(batch="per-row" if per_row else "single", rule=rule, **{f"{k}_s": v for k, v in best.items()},
                       torch_ratio=best["torch"] / best["numpy"], torch_ns_ratio=best["torch_ns"] / best["numpy"])
            print(row, flush=True)
            rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out", default=str(RESULTS / "torch_cpu_engine.md"))
    args = ap.parse_args()
    rows = measure(args.n, args.K, args.d, args.repeats)
    lines = ["# Torch verifiers on CPU tensors against NumPy (calls interleaved)", "",
             f"`OMP_NUM_THREADS=1 python bench/torch_cpu_engine.py --repeats {args.repeats}`: n = {args.n:,}, "
             f"K = {args.K}, d = {args.d}, one thread; best CPU time of {args.repeats} rounds, each round timing",
             "the NumPy call, the CPU-tensor call on the default engine (`cpu_engine(\"numpy\")`) and on the torch",
             "namespace (`cpu_engine(\"torch\")`) in turn.", "",
             "| batch | rule | NumPy ms | torch ms | torch/NumPy | torch-ns ms | torch-ns/NumPy |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['rule']} | {1e3 * r['numpy_s']:.1f} | {1e3 * r['torch_s']:.1f} | "
                     f"{r['torch_ratio']:.3f} | {1e3 * r['torch_ns_s']:.1f} | {r['torch_ns_ratio']:.3f} |")
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
