"""Optimal-list cost with continuous per-row deltas: the rule's parameter solve and the verifier.

Ratios against drawing the children (``rng.standard_normal((n, K, d))``) in the same process,
CPU seconds (``time.process_time``, best of ``--repeats``), one thread, the batch of
``bench/bench_law_engine.py`` (``delta_i`` log-uniform on ``[0.05, 3]``, and one shared
``delta = 1``).  Rows: ``rule_params`` on ``n`` distinct deltas (solve + P10.6 certificate), the
NumPy and torch (CPU) ``optimal_list`` verifiers per-row and single-delta, timed in turn.  Only public APIs present in both trees
are used, so ``PYTHONPATH=/tmp/before`` gives the before figures.

Usage::

    OMP_NUM_THREADS=1 python bench/bench_list_rule_solve.py --label after   # writes bench/results/list_rule_solve.md
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from _common import RESULTS, cpu_best
from bench_law_engine import make_batch


def measure(n, K, d, repeats):
    """CPU seconds of each job and of the child draw, timed in turn (draw, NumPy, torch, ...), best of
    ``repeats`` each; a ratio is a job's best over the draw's best of the same rounds."""
    import torch

    from rass_theory import verifiers as V
    from rass_theory.torch import verifiers as TV
    from rass_theory.verifiers.optimal_list import rule_params

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    draw = lambda: rng.standard_normal((n, K, d))          # noqa: E731
    delta = np.exp(np.random.default_rng(3).uniform(np.log(0.05), np.log(3.0), n))
    jobs = {"solve": lambda: rule_params(K, delta)}
    v, tv = V.optimal_list(), TV.optimal_list()
    for per_row in (True, False):
        key = "per-row" if per_row else "single"
        children, mu_d, mu_t, sigma = make_batch(n, K, d, per_row, np.random.default_rng(1))
        tensors = tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in (children, mu_d, mu_t))
        jobs[key] = (lambda c=children, a=mu_d, b=mu_t, s=sigma: v(c, a, b, s, np.random.default_rng(2)))
        jobs["torch " + key] = (lambda t=tensors, s=sigma: tv(*t, s, torch.Generator().manual_seed(2)))
    for job in jobs.values():
        job()                                               # warm caches and imports
    best = dict.fromkeys(["draw", *jobs], np.inf)
    for _ in range(repeats):
        best["draw"] = min(best["draw"], cpu_best(draw, 1))
        for name, job in jobs.items():
            best[name] = min(best[name], cpu_best(job, 1))
    return dict(n=n, K=K, d=d, draw_seconds=best.pop("draw"), **best)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="after")
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    r = measure(args.n, args.K, args.d, args.repeats)
    print(json.dumps(r))
    path = RESULTS / f"list_rule_solve_{args.label}.json"
    path.write_text(json.dumps(r, indent=1))
    runs = {p.stem.split("_")[-1]: json.loads(p.read_text()) for p in sorted(RESULTS.glob("list_rule_solve_*.json"))}
    lines = ["# Optimal-list per-row cost (NumPy, one thread)", "",
             f"`OMP_NUM_THREADS=1 python bench/bench_list_rule_solve.py --label LABEL` (n = {args.n:,}, "
             f"K = {args.K}, d = {args.d}); CPU seconds, ratio to the child draw in the same process.", "",
             "| run | child draw (s) | rule_params, n distinct deltas | verifier per-row | verifier single delta "
             "| torch per-row (torch/NumPy) | torch single (torch/NumPy) |",
             "|---|---|---|---|---|---|---|"]

    def torch_cell(x, key):
        t = x.get("torch " + key)
        return "-" if t is None else f"{t:.3f} s ({t / x['draw_seconds']:.2f}x; {t / x[key]:.2f})"

    for label, x in runs.items():
        dr = x["draw_seconds"]
        lines.append(f"| {label} | {dr:.3f} | {x['solve']:.3f} s ({x['solve'] / dr:.2f}x) | "
                     f"{x['per-row']:.3f} s ({x['per-row'] / dr:.2f}x) | {x['single']:.3f} s ({x['single'] / dr:.2f}x) "
                     f"| {torch_cell(x, 'per-row')} | {torch_cell(x, 'single')} |")
    (RESULTS / "list_rule_solve.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
