"""Verifier cost on the one law engine: ratios against drawing the children, NumPy and torch CPU.

For each rule (``rass`` at optimal weights, ``optimal_list``, ``threshold``, ``dgrs``) and two
batches (continuous per-row deltas, ``delta_i`` log-uniform on ``[0.05, 3]``, and one shared
``delta = 1``), the verification CPU time (``time.process_time``, best of ``--repeats``) is
divided by the CPU time of ``rng.standard_normal((n, K, d))`` measured in the same process
(best of ``--repeats``, the two timed in turn so a busy machine slows both alike), at ``n = 50,000``, ``K = 4``, ``d = 64``, one thread.  The torch rows
also give the torch/NumPy ratio, on both CPU engines of tensors (``rass_theory.torch.cpu_engine``:
``"numpy"``, the default, and ``"torch"``, the accelerator code, rows ``torch_ns``).  Run it on the tree before the change with
``PYTHONPATH=/tmp/before`` (only public verifier factories are used, which exist in both).

Usage::

    OMP_NUM_THREADS=1 python bench/bench_law_engine.py --label before   # with PYTHONPATH=/tmp/before
    OMP_NUM_THREADS=1 python bench/bench_law_engine.py --label after    # writes bench/results/law_engine.md
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from _common import RESULTS, cpu_best

RULES = ("rass", "optimal_list", "threshold", "dgrs")


def make_batch(n, K, d, per_row, rng):
    mu_d = rng.standard_normal((n, d))
    e = rng.standard_normal((n, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    delta = np.exp(rng.uniform(np.log(0.05), np.log(3.0), n)) if per_row else np.full(n, 1.0)
    sigma = 1.0
    mu_t = mu_d + (sigma * delta)[:, None] * e
    children = mu_d[:, None, :] + sigma * rng.standard_normal((n, K, d))
    return children, mu_d, mu_t, sigma


def factories(backend):
    if backend == "numpy":
        from rass_theory import verifiers as V
    else:
        from rass_theory.torch import verifiers as V
    return {"rass": V.rass, "optimal_list": V.optimal_list, "threshold": V.threshold, "dgrs": V.dgrs}


def paired_best(fn, draw, repeats):
    """Best CPU time of ``fn`` and of ``draw``, each timed right after the other ``repeats`` times
    (a busy machine slows both alike; the ratio of the two bests is the figure)."""
    best_fn = best_draw = np.inf
    for _ in range(repeats):
        best_draw = min(best_draw, cpu_best(draw, 1))
        best_fn = min(best_fn, cpu_best(fn, 1))
    return best_fn, best_draw


#: the CPU engine of each torch row: ``"torch"`` the default one, ``"torch_ns"`` the torch namespace
ENGINE = {"torch": "numpy", "torch_ns": "torch"}


def in_engine(name, v, *args):
    """``v(*args)`` with CPU tensors decided by the engine ``name`` (``rass_theory.torch.cpu_engine``)."""
    from rass_theory.torch import cpu_engine

    with cpu_engine(name):
        return v(*args)


def measure(args):
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    n, K, d = args.n, args.K, args.d
    draw_fn = lambda: rng.standard_normal((n, K, d))             # noqa: E731
    draw = cpu_best(draw_fn, args.repeats)
    rows = []
    for per_row in (True, False):
        children, mu_d, mu_t, sigma = make_batch(n, K, d, per_row, np.random.default_rng(1))
        tensors = tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in (children, mu_d, mu_t))
        for backend in ("numpy", "torch", "torch_ns"):
            made = factories(backend)
            for rule in RULES:
                try:
                    v = made[rule]()
                    if backend == "numpy":
                        call = (lambda v=v: v(children, mu_d, mu_t, sigma, np.random.default_rng(2)))
                    else:
                        call = (lambda v=v, e=ENGINE[backend]: in_engine(e, v, *tensors, sigma,
                                                                       torch.Generator().manual_seed(2)))
                    call()                                       # warm caches and imports
                    t, t_draw = paired_best(call, draw_fn, args.repeats)
                    rows.append(dict(batch="per-row" if per_row else "single", backend=backend, rule=rule,
                                     seconds=t, draw_seconds=t_draw, ratio=t / t_draw))
                except Exception as exc:                         # a rule missing in one tree
                    rows.append(dict(batch="per-row" if per_row else "single", backend=backend, rule=rule,
                                     seconds=None, ratio=None, error=f"{type(exc).__name__}: {exc}"[:120]))
                print(rows[-1], flush=True)
    return dict(draw_seconds=draw, n=n, K=K, d=d, rows=rows)


def write_markdown(path):
    data = {}
    for label in ("before", "after"):
        f = RESULTS / f"law_engine_{label}.json"
        if f.exists():
            data[label] = json.loads(f.read_text())
    lines = ["# Verifier cost on the one law engine", "",
             "Ratio = verification CPU time / CPU time of `rng.standard_normal((n, K, d))` in the same",
             "process, each the best of 5 timed in turn (draw, verify, ...), n = 50,000, K = 4, d = 64, one thread.  Per-row: delta_i log-uniform",
             "on [0.05, 3]; single: delta = 1.  Command: `OMP_NUM_THREADS=1 python bench/bench_law_engine.py",
             "--label {before,after}` (before with `PYTHONPATH=/tmp/before`).", ""]
    for label, run in data.items():
        lines.append(f"child draw: {run['draw_seconds']:.3f} CPU-s ({label})")
    lines += ["", "torch after: CPU tensors on the default engine (`cpu_engine(\"numpy\")`, NumPy views);",
              "torch-ns after: `cpu_engine(\"torch\")`, the torch namespace that accelerators run.", "",
              "| batch | rule | NumPy before | NumPy after | torch before | torch after | torch/NumPy after "
              "| torch-ns after | torch-ns/NumPy after |",
              "|---|---|---|---|---|---|---|---|---|"]

    def get(label, batch, backend, rule):
        for r in data.get(label, {}).get("rows", []):
            if (r["batch"], r["backend"], r["rule"]) == (batch, backend, rule):
                return r["ratio"]
        return None

    def fmt(x):
        return "-" if x is None else f"{x:.3f}"

    for batch in ("per-row", "single"):
        for rule in RULES:
            nb, na = get("before", batch, "numpy", rule), get("after", batch, "numpy", rule)
            tb, ta = get("before", batch, "torch", rule), get("after", batch, "torch", rule)
            ns = get("after", batch, "torch_ns", rule)
            ratio = None if (na is None or ta is None) else ta / na
            ratio_ns = None if (na is None or ns is None) else ns / na
            lines.append(f"| {batch} | {rule} | {fmt(nb)} | {fmt(na)} | {fmt(tb)} | {fmt(ta)} | {fmt(ratio)} "
                         f"| {fmt(ns)} | {fmt(ratio_ns)} |")
    path.write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", choices=("before", "after"), default="after")
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(RESULTS / "law_engine.md"))
    args = ap.parse_args()
    if os.environ.get("OMP_NUM_THREADS") != "1":
        print("note: set OMP_NUM_THREADS=1 for one-thread figures")
    run = measure(args)
    (RESULTS / f"law_engine_{args.label}.json").write_text(json.dumps(run, indent=1))
    write_markdown(__import__("pathlib").Path(args.out))


if __name__ == "__main__":
    main()
