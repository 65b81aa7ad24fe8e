"""False-reject rate of the harness's asymptotic tests at finite n, and the minimum n each needs.

Simulates each test's statistic under its exact null (the counts or sums an exact rule produces)
with the harness's own test functions (:mod:`rass_theory.stats.tests`) and reports, per ``n``, the
false-reject rate at nominal levels 1e-2 and 1e-3 and its ratio to the level, with a Clopper-Pearson
95% interval.  The minimum ``n`` of a test is the smallest simulated ``n`` from which on the ratio's
point estimate stays within 1.5 at both levels; the code's gates (``MIN_CLT_ROWS`` for the pair
tests, ``MIN_JOINT_ROWS`` for the 8 x 8 joint chi-square) are compared with it.  The studentised
cross-covariance test (exact null at every n) is simulated as a control.

    python bench/harness_finite_n.py [--reps 40000] [--seed 0]

Writes ``bench/results/harness_finite_n.md``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from rass_theory.stats import tests as T
from rass_theory.stats.tests import clopper_pearson

OUT = os.path.join(os.path.dirname(__file__), "results", "harness_finite_n.md")
LEVELS = (1e-2, 1e-3)
B = 4096


def pair_pvalues(P, reps, g):
    """``independence_test`` on ``P`` pairs of independent rows, three statistics (PIT bins of B)."""
    out = np.empty(reps)
    for r in range(reps):
        u = (g.integers(0, B, (2, 3, P)) + 0.5) / B - 0.5
        out[r] = T.independence_test((u[0] * u[1]).sum(axis=1), P, B, ("s", "rperp", "dir0"), min_pairs=0).pvalue
    return out


def chi2_pvalues(n, reps, g, n_coarse, min_expected):
    counts = g.multinomial(n, np.full(B, 1.0 / B), size=reps)
    return np.array([T.binned_chisquare_test(c, n_coarse, min_expected).pvalue for c in counts])


def joint_pvalues(n, reps, g):
    counts = g.multinomial(n, np.full(64, 1.0 / 64), size=reps).reshape(reps, 8, 8)
    return np.array([T.joint_chisquare_test(c, B).pvalue for c in counts])   # gated below MIN_JOINT_ROWS


def xcov_pvalues(n, reps, g, d=8):
    out = np.empty(reps)
    for r in range(reps):
        e = g.standard_normal((n, d))
        e /= np.linalg.norm(e, axis=1)[:, None]
        y = g.standard_normal((n, d))
        t = np.einsum("nd,nd->n", y, e)
        zp = y - t[:, None] * e
        w = t * t
        out[r] = T.studentised_form_test(t @ zp, w.sum() * np.eye(d) - (e * w[:, None]).T @ e).pvalue
    return out


def rates(p):
    p = p[~np.isnan(p)]
    if p.size == 0:     # the test is gated off at this n (it reports "not run")
        return [(float("nan"),) * 3 for _ in LEVELS]
    res = []
    for a in LEVELS:
        k = int(np.sum(p <= a))
        lo, hi = clopper_pearson(k, p.size, 0.95)
        res.append((k / p.size / a, lo / a, hi / a))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    g = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    plan = {
        "indep_half / indep_next / indep_calls (pairs)": (lambda n, r: pair_pvalues(n, r, g), (25, 50, 100, 200, 400)),
        "_chi2 (32 coarse bins, expected >= 10)": (lambda n, r: chi2_pvalues(n, r, g, 32, 10), (50, 100, 320, 1000)),
        "_chi2_fine (fine bins, expected >= 5)": (lambda n, r: chi2_pvalues(n, r, g, B, 5), (50, 200, 1000, 5000)),
        "joint_chi2 (8 x 8)": (lambda n, r: joint_pvalues(n, r, g), (64, 160, 320, 640)),
        "xcov_s (studentised, exact null)": (lambda n, r: xcov_pvalues(n, r, g), (10, 30, 100)),
    }
    lines = ["# Finite-n false-reject rates of the harness's asymptotic tests", "",
             f"`python bench/harness_finite_n.py --reps {args.reps} --seed {args.seed}`: each test's statistic "
             "simulated under its exact null with the harness's own test functions; ratio = false-reject rate / "
             "nominal level (Clopper-Pearson 95% interval).  Minimum n: first simulated n from which the ratio "
             "stays <= 1.5 at both levels.", "",
             "| test | n | ratio at 1e-2 | ratio at 1e-3 |", "|---|---|---|---|"]
    minimum = {}
    for name, (sim, ns) in plan.items():
        reps = args.reps if "fine" not in name else max(args.reps // 4, 5000)
        ok_from = None
        for n in ns:
            r = rates(sim(n, reps))
            lines.append(f"| {name} | {n} | " + " | ".join(f"{x:.2f} [{lo:.2f}, {hi:.2f}]" for x, lo, hi in r) + " |")
            print(lines[-1], flush=True)
            good = all(x <= 1.5 for x, _, _ in r)
            ok_from = (ok_from if good else None) if ok_from is not None else (n if good else None)
        minimum[name] = ok_from
    lines += ["", "| test | minimum n (ratio <= 1.5) |", "|---|---|"]
    lines += [f"| {k} | {v if v is not None else 'above the simulated range'} |" for k, v in minimum.items()]
    lines += ["", f"{time.perf_counter() - t0:.0f} s on a shared 2-core machine."]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines[-len(minimum) - 4:]))


if __name__ == "__main__":
    main()
