"""False-fail rate of the exactness harness on an exact rule, with its binomial interval.

Runs ``check_exactness(dgrs, K=4, delta=1, dim=8, alpha=0.05)`` at a small ``n`` (2,000 rows per
dtype pass, both passes, every test of the family) over ``--seeds`` seeds and prints the
fraction of runs that failed with its Clopper-Pearson 95% interval, and the fraction of raw
p-values <= 0.05 of each test.  Holm controls the family-wise error at ``alpha`` (proof S1.3), so
the rate must lie at or below 0.05.  Saves ``bench/results/harness_calibration.md``.

The cell runs in chunks of ``--chunk-size`` rows (default 500: four chunks per pass, so the
sequential looks after chunks 1, 2 and 4 of the eight are part of what is calibrated, proof S1.9).

Usage: ``python bench/harness_calibration.py [--seeds 250] [--n-samples 2000] [--chunk-size 500]``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import rass_theory as rt
from rass_theory.stats.tests import clopper_pearson

OUT = os.path.join(os.path.dirname(__file__), "results", "harness_calibration.md")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=250)
    ap.add_argument("--n-samples", type=int, default=2_000)
    ap.add_argument("--chunk-size", type=int, default=500)
    args = ap.parse_args()
    alpha = 0.05
    v = rt.verifiers.dgrs()
    t0, c0 = time.perf_counter(), time.process_time()
    reps = [rt.check_exactness(v, 4, 1.0, 8, n_samples=args.n_samples, chunk_size=args.chunk_size, alpha=alpha,
                               rng=50_000 + s, n_bins=256, two_sample_size=50, n_permutations=199)
            for s in range(args.seeds)]
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    fails = sum(not r.passed for r in reps)
    stopped = sum(r.stop_look is not None for r in reps)
    ran = [r for r in reps if r.stop_look is None]
    lo, hi = clopper_pearson(fails, len(reps), 0.95)
    names = [t.name for t in reps[0].tests if t.name != "contract"]
    per_test = []
    for name in names:
        p = np.array([r.test(name).pvalue for r in ran])
        p = p[~np.isnan(p)]
        per_test.append((name, float(np.mean(p <= 0.05)) if p.size else float("nan")))
    lines = ["# False-fail rate of the exactness harness on an exact rule", "",
             f"`python bench/harness_calibration.py --seeds {args.seeds} --n-samples {args.n_samples} "
             f"--chunk-size {args.chunk_size}`: D-GRS, K = 4, delta = 1, dim = 8, {args.n_samples} rows per dtype "
             f"pass (float64 + float32) in chunks of {args.chunk_size}, alpha = {alpha}, one Holm family of "
             f"{len(names)} tests (read from the report), sequential looks on ({reps[0].n_looks} interim looks per run; "
             f"{stopped} of {len(reps)} runs stopped at a look); {wall:.0f} s wall, {cpu:.0f} CPU-s on a loaded shared "
             f"2-core machine.",
             "", f"**False-fail rate: {fails}/{len(reps)} = {fails / len(reps):.3f}, Clopper-Pearson 95% "
             f"interval [{lo:.3f}, {hi:.3f}]** (Holm guarantees <= {alpha}).", "",
             f"Fraction of raw p-values <= 0.05 per test over the {len(ran)} runs that reached the final look (about "
             "0.05 for a calibrated continuous test; below for conservative or discrete ones):", "", "| test | P(p <= 0.05) |", "|---|---|"]
    lines += [f"| {n} | {f:.3f} |" for n, f in per_test]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
