"""The optimal list rule: acceptance minus bound on the issue's grid, solve times, verifier speed.

1. ``acceptance - acceptance_bound`` per cell of K in {2, 3, 4, 8, 16} x delta in
   {0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4}, the relative difference of the rejections, and
   the worst difference against an independent mpmath bound (40 digits; the reference of
   ``tests/optimize/test_list_rule.py``).
2. Solve time per (K, delta): cold (``lru_cache`` cleared), warm (cached), and the vectorised
   per-row solve of 100,000 distinct deltas.
3. Verifier time per call against RASS (optimal weights) in the same process, n = 200,000,
   K = 4, d = 64: one shared delta and per-row deltas ~ U(0, 3); median of ``--repeats`` calls.
4. Gaussian-mixture speedup (``GaussianMixture.random(dim=512, n_components=5, seed=20260714)``,
   30 steps, churn 0.06, ``prefetch="nearest"``, default protocol) of D-GRS, RASS and the optimal
   list rule on the trees (K, L) = (4, 4) and (2, 3), ``--gm-n`` trajectories each (0 skips).

Run:  python bench/optimal_list.py [--repeats 5] [--gm-n 2000] [--out bench/results/optimal_list.md]
"""
from __future__ import annotations

import argparse
import pathlib
import platform
import statistics
import time

import numpy as np

import rass_theory as rt
from rass_theory.optimize import list_rule as lr

GRID_K = (2, 3, 4, 8, 16)
GRID_DELTA = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)


def gap_table():
    lines = ["| K \\ delta | " + " | ".join(f"{d:g}" for d in GRID_DELTA) + " |",
             "| ---: |" + " ---: |" * len(GRID_DELTA)]
    worst, worst_cell, worst_rel, all_ok = 0.0, None, 0.0, True
    for K in GRID_K:
        cells = []
        for d in GRID_DELTA:
            rule = rt.optimal_list_rule(K, d)
            gap = rule.acceptance - rt.acceptance_bound(K, d)
            rej_b = rt.exact.bound.bound_rejection_probability(K, d)
            rel = abs(rule.rejection_probability - rej_b) / rej_b if rej_b > 0 else 0.0
            worst_rel = max(worst_rel, rel)
            if abs(gap) >= abs(worst):
                worst, worst_cell = gap, (K, d)
            all_ok &= rule.status == "optimal"
            cells.append(f"{gap:.1e}" if rule.status == "optimal" else f"{gap:.1e} ({rule.status})")
        lines.append(f"| {K} | " + " | ".join(cells) + " |")
    return lines, worst, worst_cell, worst_rel, all_ok


def mpmath_check():
    """Worst ``|acceptance - alpha*_mpmath|`` over the grid, and its cell."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "optimize"))
    from test_list_rule import _mp_bound

    worst, cell = 0.0, None
    for K in GRID_K:
        for d in GRID_DELTA:
            err = abs(rt.optimal_list_rule(K, d).acceptance - float(_mp_bound(K, d)[0]))
            if err >= worst:
                worst, cell = err, (K, d)
    return worst, cell


def solve_times():
    cold, warm = [], []
    for K in GRID_K:
        for d in GRID_DELTA:
            lr._cached_rule.cache_clear()
            t0 = time.perf_counter()
            rt.optimal_list_rule(K, d)
            t1 = time.perf_counter()
            for _ in range(100):
                rt.optimal_list_rule(K, d)
            t2 = time.perf_counter()
            cold.append(t1 - t0)
            warm.append((t2 - t1) / 100)
    deltas = np.random.default_rng(0).uniform(0.0, 3.0, 100_000)
    t0 = time.perf_counter()
    P = lr.solve_list_rule(4, deltas)
    vec = time.perf_counter() - t0
    assert P.converged.all()
    return cold, warm, vec


def _nodes(n, K, d, delta, rng):
    mu_d = np.zeros((n, d))
    mu_t = np.zeros((n, d))
    mu_t[:, 0] = delta
    children = mu_d[:, None, :] + rng.standard_normal((n, K, d))
    return children, mu_d, mu_t


def _median_time(verifier, args, repeats, rng):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        verifier(*args, 1.0, rng)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def speed(repeats):
    rng = np.random.default_rng(1)
    n, K, d = 200_000, 4, 64
    rows = []
    for label, delta in (("shared delta = 0.5", 0.5), ("shared delta = 1", 1.0),
                         ("per-row delta ~ U(0, 3)", rng.uniform(0.0, 3.0, n))):
        args = _nodes(n, K, d, delta, rng)
        ol, ra = rt.verifiers.optimal_list(), rt.verifiers.rass()
        ol(*args, 1.0, rng)  # warm both (solves and tables cached)
        ra(*args, 1.0, rng)
        t_ol = _median_time(ol, args, repeats, rng)
        t_ra = _median_time(ra, args, repeats, rng)
        rows.append((label, t_ol, t_ra))
    return rows


def gm_speedups(n):
    from rass_theory.diffusion import GaussianMixture, speculative_sample

    target = GaussianMixture.random(dim=512, n_components=5, seed=20260714)
    rows = []
    for K, L in ((4, 4), (2, 3)):
        for v in ("dgrs", "rass", "optimal_list"):
            t0 = time.perf_counter()
            res = speculative_sample(target, v, K=K, L=L, n_samples=n, n_steps=30, churn=0.06,
                                     rng=np.random.default_rng(7), prefetch="nearest")
            rows.append((K, L, v, res.speedup, res.speedup_se, time.perf_counter() - t0))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gm-n", type=int, default=2000)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "optimal_list.md"))
    args = parser.parse_args(argv)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    intro = (f"`python bench/optimal_list.py --repeats {args.repeats}`; {stamp}, {platform.machine()}, "
             f"numpy {np.__version__}. The machine was shared with other jobs (2 cores, several sessions), so "
             "absolute times are noisy; ratios are measured in one process, back to back.")
    out = ["# Optimal list rule: acceptance at the bound, solve time, verifier speed", "", intro, "",
           "## Acceptance minus bound (`optimal_list_rule(K, delta).acceptance - acceptance_bound(K, delta)`)", ""]
    lines, worst, cell, worst_rel, all_ok = gap_table()
    out += lines
    status = "Every cell has status `optimal`." if all_ok else "Some cells did NOT reach status `optimal` (see table)."
    out += ["", (f"Worst cell: K = {cell[0]}, delta = {cell[1]:g}, acceptance - bound = {worst:.2e}; worst relative "
                 f"difference of the rejections (rule vs bound module) = {worst_rel:.2e}. {status}"), ""]
    mp_worst, mp_cell = mpmath_check()
    out += [(f"Against an independent mpmath bound (40 digits): worst |acceptance - alpha*| = {mp_worst:.2e} "
             f"at K = {mp_cell[0]}, delta = {mp_cell[1]:g}."), ""]
    cold, warm, vec = solve_times()
    out += ["## Solve time per (K, delta), 50 cells", "",
            "| | median | max |", "| --- | ---: | ---: |",
            f"| cold (cache cleared) | {1e3 * statistics.median(cold):.2f} ms | {1e3 * max(cold):.2f} ms |",
            f"| warm (lru_cache hit) | {1e6 * statistics.median(warm):.2f} us | {1e6 * max(warm):.2f} us |",
            "", (f"Vectorised per-row solve of 100,000 distinct deltas (K = 4): {vec:.2f} s "
                 f"({1e6 * vec / 1e5:.1f} us per row)."), ""]
    out += [f"## Verifier time per call, n = 200,000, K = 4, d = 64 (median of {args.repeats})", "",
            "| batch | optimal_list | RASS (optimal weights) | ratio |", "| --- | ---: | ---: | ---: |"]
    for label, t_ol, t_ra in speed(args.repeats):
        out.append(f"| {label} | {t_ol:.3f} s | {t_ra:.3f} s | {t_ol / t_ra:.2f} |")
    if args.gm_n:
        out += ["", f"## Gaussian-mixture speedup, prefetch nearest ({args.gm_n} trajectories per arm, seed 7)", "",
                ("dim 512, 5 components (seed 20260714), 30 steps, churn 0.06, default protocol; speedup = "
                 "standard steps / target calls (ratio of means) ± SE."), "",
                "| K | L | verifier | speedup | run time |", "| ---: | ---: | --- | ---: | ---: |"]
        for K, L, v, sp, se, el in gm_speedups(args.gm_n):
            out.append(f"| {K} | {L} | {v} | {sp:.3f} ± {se:.3f} | {el:.0f} s |")
    text = "\n".join(out) + "\n"
    print(text)
    pathlib.Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
