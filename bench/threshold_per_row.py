"""Threshold verifier at per-row deltas: before (one optimisation per distinct delta) and after (certified table).

Every time is a ratio against drawing the children of the same batch in the same process
(``K = 4``, ``d = 64``, NumPy ``standard_normal``), so the figures survive a busy machine.
"Before" is ``verifiers.threshold(parameters="optimal")``, the behaviour before issue 18: one
``optimal_threshold_policy`` solve per distinct delta.  It is timed on ``--before-deltas``
distinct deltas and extrapolated linearly (the solves are independent, one per delta), because
2,000 of them take longer than the benchmark should.  "After" is the default
``verifiers.threshold()`` (table interpolated per row), on NumPy and on torch (CPU).

Usage::

    python bench/threshold_per_row.py            # writes bench/results/threshold_per_row.md
    python bench/threshold_per_row.py --quick    # 2,000 and 10,000 rows, 5 solves for "before"
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from _common import RESULTS


def batch(n, K, d, rng):
    """``n`` nodes with distinct deltas uniform on [0.05, 3] (sigma log-uniform), and the child-draw time."""
    mu_d = rng.standard_normal((n, d))
    e = rng.standard_normal((n, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    delta = rng.uniform(0.05, 3.0, n)
    sigma = np.exp(rng.uniform(-1.0, 1.0, n))
    mu_t = mu_d + (sigma * delta)[:, None] * e
    t0 = time.perf_counter()
    children = mu_d[:, None, :] + sigma[:, None, None] * rng.standard_normal((n, K, d))
    return children, mu_d, mu_t, sigma, time.perf_counter() - t0


def timed(fn, repeats=1):
    """Best CPU time (``time.process_time``) of ``repeats`` calls and the last result."""
    best = np.inf
    out = None
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def timed_rounds(fns, draw, rounds):
    """Best CPU time of each of ``fns`` and of ``draw``, all timed in turn ``rounds`` times
    (draw, fn_1, draw, fn_2, ...), so a busy machine slows the baseline as it slows the verifiers."""
    best = [np.inf] * len(fns)
    best_draw = np.inf
    outs = [None] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best_draw = min(best_draw, timed(draw)[0])
            t, outs[i] = timed(fn)
            best[i] = min(best[i], t)
    return best, best_draw, outs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--before-deltas", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds (best of, the draw timed in each)")
    ap.add_argument("--out", default=str(RESULTS / "threshold_per_row.md"))
    args = ap.parse_args()
    import torch

    from rass_theory import verifiers as V
    from rass_theory.optimize.threshold_table import threshold_table
    from rass_theory.torch import verifiers as TV

    torch.set_num_threads(1)
    K, d = 4, 64
    sizes = (2_000, 10_000) if args.quick else (2_000, 50_000)
    n_before = args.before_deltas or (5 if args.quick else 12)
    rng = np.random.default_rng(20261201)
    warm = batch(50, K, d, rng)
    V.threshold()(*warm[:4], rng)          # load the table, import scipy.optimize
    V.optimal_list()(*warm[:4], rng)
    TV.threshold()(*(torch.as_tensor(a) for a in warm[:4]), torch.Generator().manual_seed(0))
    rows = []
    for n in sizes:
        children, mu_d, mu_t, sigma, _ = batch(n, K, d, rng)
        tens = [torch.as_tensor(a) for a in (children, mu_d, mu_t, sigma)]
        fns = [lambda: V.threshold()(children, mu_d, mu_t, sigma, rng),
               lambda: TV.threshold()(*tens, torch.Generator().manual_seed(1)),
               lambda: V.rass("interpolated")(children, mu_d, mu_t, sigma, rng),
               lambda: V.optimal_list()(children, mu_d, mu_t, sigma, rng)]
        (t_np, t_tc, t_rass, t_ol), t_draw, outs = timed_rounds(
            fns, lambda: rng.standard_normal((n, K, d)), args.rounds)
        res, res_ol = outs[0], outs[3]
        rows.append((n, t_draw, t_np, t_tc, t_rass, t_ol, float(res.accepted.mean()), float(res_ol.accepted.mean())))
    # before: one optimisation per distinct delta (a fresh verifier: its solves are cached per delta)
    import importlib

    importlib.import_module("rass_theory.verifiers.threshold")._optimal_threshold.cache_clear()
    children, mu_d, mu_t, sigma, t_draw_b = batch(n_before, K, d, rng)
    t_before, _ = timed(lambda: V.threshold(parameters="optimal")(children, mu_d, mu_t, sigma, rng))
    per_delta = t_before / n_before
    tab = threshold_table(K)
    lines = [
        "# Threshold verifier at per-row deltas",
        "",
        f"Command: `python bench/threshold_per_row.py{' --quick' if args.quick else ''}`; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end (shared machine: compare ratios, not seconds; "
        f"CPU seconds, best of {args.rounds} rounds, the child draw timed in turn with each verifier). "
        f"K = {K}, d = {d}, every row its own delta (uniform on [0.05, 3]) and sigma; one thread.",
        "",
        "## After: certified table, parameters interpolated per row (`verifiers.threshold()`)",
        "",
        "| rows | child draw (s) | NumPy threshold (s) | ratio to draw | torch CPU threshold (s) | ratio | "
        "NumPy RASS interpolated (s) | ratio | NumPy optimal_list (s) | ratio | acceptance threshold | "
        "acceptance optimal_list |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, td, tn, tt, tr, tol, acc, acc_ol in rows:
        lines.append(f"| {n:,} | {td:.3f} | {tn:.3f} | {tn / td:.2f} | {tt:.3f} | {tt / td:.2f} | {tr:.3f} | "
                     f"{tr / td:.2f} | {tol:.3f} | {tol / td:.2f} | {acc:.4f} | {acc_ol:.4f} |")
    lines += [
        "",
        "## Before: one optimisation per distinct delta (`verifiers.threshold(parameters=\"optimal\")`)",
        "",
        f"{n_before} rows with {n_before} distinct deltas: {t_before:.1f} s, i.e. {per_delta:.2f} s per distinct "
        f"delta. Extrapolated (independent solves): 2,000 distinct deltas {2000 * per_delta:,.0f} s, "
        f"50,000 distinct deltas {50000 * per_delta:,.0f} s.",
        "",
        "## The table (K = 4)",
        "",
        f"{tab.grid.size} grid deltas on [0, {tab.grid[-1]:g}], {tab.check_delta.size} check points; largest loss "
        f"of acceptance against the optimiser at a check point: {tab.max_gap:.2e} "
        "(`rass_theory.optimize.threshold_table.threshold_table(K).max_gap`; proofs/P8-value-aware-policies.md, P8.5).",
        "",
    ]
    from pathlib import Path

    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
