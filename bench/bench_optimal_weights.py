"""Benchmark of rt.optimal_rank_weights: speed against the slack-variable 721-point HiGHS LP
(the public reference code's approach) run in the same process, cold-call time, certified
gaps and accuracy against an independent mpmath quadrature, and the interpolator's loss.

Usage:  python bench/bench_optimal_weights.py [--quick] [--skip-accuracy] [--skip-interp] [--repeats N]
        [--out bench/results/optimal_weights.md]
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def baseline_lp(K, delta, n=721):
    """Slack primal on a uniform 721-point grid: min sum_i c_i u_i, u_i >= f_i - (B w)_i."""
    from scipy.optimize import linprog
    from scipy.special import binom, ndtr
    from scipy.stats import norm

    s = np.linspace(-8.0, delta + 8.0, n)
    c = np.full(n, s[1] - s[0])
    c[[0, -1]] *= 0.5
    u = ndtr(s)[:, None]
    j = np.arange(K)
    B = K * norm.pdf(s)[:, None] * binom(K - 1, j) * u**j * (1 - u) ** (K - 1 - j)
    f = norm.pdf(s - delta)
    cost = np.concatenate([np.zeros(K), c])
    A_ub = np.hstack([-B, -np.eye(n)])
    A_eq = np.concatenate([np.ones(K), np.zeros(n)])[None, :]
    res = linprog(cost, A_ub=A_ub, b_ub=-f, A_eq=A_eq, b_eq=[1.0],
                  bounds=[(0, None)] * (K + n), method="highs")
    w = np.clip(res.x[:K], 0, None)
    return w / w.sum()


def mp_acceptance(weights, delta, breakpoints, dps=30):
    import mpmath as mp

    mp.mp.dps = dps
    K = len(weights)
    w = [mp.mpf(float(x)) for x in weights]
    d = mp.mpf(delta)
    coef = [mp.binomial(K - 1, j) for j in range(K)]

    def integrand(s):
        u = mp.ncdf(s)
        g = mp.npdf(s) * K * mp.fsum(w[j] * coef[j] * u**j * (1 - u) ** (K - 1 - j)
                                     for j in range(K) if w[j] != 0)
        return min(mp.npdf(s - d), g)

    pts = [-mp.inf] + [mp.mpf(float(c)) for c in sorted(breakpoints)] + [mp.inf]
    return mp.quad(integrand, pts)


def _best(fn, repeats, before=None):
    """Fastest of ``repeats`` calls of ``fn``: ``(wall s, CPU s, result)`` (``before`` runs untimed first)."""
    wall = cpu = np.inf
    for _ in range(repeats):
        if before is not None:
            before()
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu, out


def _ratios(label, pairs):
    """One summary line: median and max of ours/baseline over the deltas, wall and CPU."""
    wall = np.array([o[0] / b[0] for o, b in pairs])
    cpu = np.array([o[1] / b[1] for o, b in pairs])
    return (f"{label}: ours/baseline time ratio median {np.median(wall):.3f}, max {wall.max():.3f} "
            f"(CPU seconds: median {np.median(cpu):.3f}, max {cpu.max():.3f}) over {len(pairs)} deltas")


def speed(quick, repeats=3):
    """Each timing is the fastest of ``repeats`` calls, ours from an empty per-(K, delta) cache
    (the result is a function of (K, delta) alone, so every repeat does the whole solve)."""
    t0 = time.perf_counter()
    import cvxpy  # noqa: F401
    import rass_theory as rt
    from rass_theory.exact.segments import rass_evaluation
    from rass_theory.optimize import rank_weights as rw
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    cold = rt.optimal_rank_weights(8, 0.7)
    t_cold = time.perf_counter() - t0
    print(f"imports (rass_theory + cvxpy): {t_import:.2f} s; cold first call K=8 delta=0.7: "
          f"{t_cold:.3f} s (gap {cold.gap:.1e}, {cold.solver})")
    clear = rw._optimal_rank_weights.cache_clear
    summary = []

    def pair(d):
        ours = _best(lambda: rt.optimal_rank_weights(8, d), repeats, clear)
        return ours, _best(lambda: baseline_lp(8, d), repeats)

    deltas = [0.53, 1.17, 0.29, 1.91, 2.6, 0.81, 1.43] if not quick else [0.53, 1.17, 1.91]
    rows, losses = [], []
    for d in deltas:
        o, b = pair(d)
        ours, acc_b = o[2], rass_evaluation(b[2], d).acceptance
        rows.append((o, b))
        losses.append(ours.acceptance - acc_b)
        print(f"  delta={d:5.2f}  ours {1e3 * o[0]:8.1f} ms  baseline-LP {1e3 * b[0]:8.1f} ms  "
              f"ratio {o[0] / b[0]:5.2f}  acc ours {ours.acceptance:.15f} (gap {ours.gap:.1e})  "
              f"acc baseline {acc_b:.15f}  baseline loss {losses[-1]:.2e}  [{ours.solver}]")
    summary.append(_ratios("warm (far from solved deltas)", rows)
                   + f"; baseline acceptance loss: max {max(losses):.2e}")
    # more new deltas (fixed seed), each K=8 call from an empty per-process cache, so the only
    # warm start is the shipped table of certified optima; then the same with the table off
    new = np.round(np.random.default_rng(1).uniform(0.05, 3.0, 6 if quick else 15), 4)
    for use_table in (True, False):
        rw._TABLE_ENABLED = use_table
        rows = [pair(float(d)) for d in new]
        gaps = [o[2].gap for o, _ in rows]
        n_table = sum("table" in o[2].solver for o, _ in rows)
        summary.append(_ratios(f"new deltas in (0.05, 3), empty cache, table {'on ' if use_table else 'off'}", rows)
                       + f"; max gap {max(gaps):.1e}; {n_table} started from the table")
    rw._TABLE_ENABLED = True
    # sweep: each new delta 0.01 beyond the last solved one (a plot or a table)
    rows = []
    for d in np.round(1.50 + 0.01 * np.arange(1, 8 if not quick else 4), 2):
        o, b = pair(float(d))
        rows.append((o, b))
        print(f"  sweep delta={d:.2f}  ours {1e3 * o[0]:7.1f} ms  baseline {1e3 * b[0]:7.1f} ms  "
              f"gap {o[2].gap:.1e}  [{o[2].solver}]")
    summary.append(_ratios("warm (sweep step 0.01)", rows))
    for line in summary:
        print(line)
    return summary


def accuracy(quick, Ks=None):
    import rass_theory as rt

    Ks = Ks or ([1, 2, 3, 4, 5, 8, 16, 32, 64] if not quick else [1, 2, 4, 8])
    deltas = [1e-8, 1e-4, 0.01, 0.1, 0.5, 1, 2, 4, 8, 16]
    worst_gap, worst_err, worst_rel = 0.0, 0.0, 0.0
    print("K delta acceptance gap |acc - mpmath| rel_err status time_s")
    for K in Ks:
        for d in deltas:
            t0 = time.perf_counter()
            res = rt.optimal_rank_weights(K, d)
            el = time.perf_counter() - t0
            ref = mp_acceptance(res.weights, d, res.crossings, dps=30 if d < 8 else 40)
            err = abs(res.acceptance - float(ref))
            rel = err / float(ref)
            worst_gap, worst_err, worst_rel = max(worst_gap, res.gap), max(worst_err, err), max(worst_rel, rel)
            print(f"{K} {d:g} {res.acceptance:.16g} {res.gap:.2e} {err:.2e} {rel:.2e} {res.status} {el:.2f}",
                  flush=True)
    print(f"worst certified gap {worst_gap:.2e}; worst |acc - mpmath| {worst_err:.2e}; "
          f"worst relative {worst_rel:.2e}")


def interpolation(quick):
    import rass_theory as rt
    from rass_theory.exact.segments import rass_evaluation

    test = np.concatenate([np.geomspace(2e-3, 0.14, 6), np.linspace(0.17, 5.9, 23), [6.6, 9.1, 13.0]])
    for K in ([2, 4, 8] if not quick else [2, 4]):
        t0 = time.perf_counter()
        interp = rt.optimize.optimal_weights_interpolator(K)
        tb = time.perf_counter() - t0
        W = interp(test)
        losses = [rt.optimal_rank_weights(K, d).acceptance - rass_evaluation(w, d).acceptance
                  for d, w in zip(test, W)]
        i = int(np.argmax(losses))
        print(f"interpolator K={K}: build {tb:.1f} s, worst acceptance loss {losses[i]:.2e} at "
              f"delta={test[i]:.3g} over {test.size} off-grid deltas")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-interp", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--Ks", type=int, nargs="*", default=None, help="K values of the accuracy grid")
    ap.add_argument("--repeats", type=int, default=3, help="timings are the fastest of this many calls")
    ap.add_argument("--out", default="bench/results/optimal_weights.md", help="speed summary file ('' for none)")
    args = ap.parse_args()
    if not args.skip_speed:
        lines = speed(args.quick, args.repeats)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write("# bench/bench_optimal_weights.py: warm weight solve against the 721-point LP\n\n"
                         f"`OMP_NUM_THREADS=1 python bench/bench_optimal_weights.py --skip-accuracy --skip-interp"
                         f" --repeats {args.repeats}` (K = 8; each time the fastest of {args.repeats} calls)\n\n```\n"
                         + "\n".join(lines) + "\n```\n")
    if not args.skip_interp:
        interpolation(args.quick)
    if not args.skip_accuracy:
        accuracy(args.quick, args.Ks)
