"""False-fail rate of check_trajectories on an exact sampler, over many seeds.

Runs the project's speculative sampler (RASS, K = 4, L = 3, paper protocol, lazy expansion) on
the d = 16 mixture with ``return_trajectories=True`` for ``--seeds`` independent seeds, checks each
run at ``--alpha`` (default 0.05), and reports how often the check fails, with its exact 95%
Clopper--Pearson interval (Holm keeps the family-wise rate at or below ``alpha``).  Also reports
the uniformity of the per-test raw p-values pooled over seeds (KS against U(0, 1) per family).
Writes ``bench/results/check_calibration.md``.

    python bench/check_calibration.py [--seeds 200] [--n 1000] [--alpha 0.05] [--first-seed 0] [--out FILE]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from _common import RESULTS
from rass_theory import diffusion
from rass_theory.stats.tests import clopper_pearson

OUT = RESULTS / "check_calibration.md"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    tgt = diffusion.GaussianMixture.random(dim=16, n_components=5, seed=0)
    kernel = diffusion.plain_kernel(tgt, 30, 0.06, protocol="paper")
    fails, by_family = 0, {}
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        run = diffusion.speculative_sample(tgt, "rass", K=4, L=3, n_samples=args.n, protocol="paper",
                                           rng=np.random.default_rng([seed, 0]), return_trajectories=True)
        rep = diffusion.check_trajectories(run.trajectories, kernel, run.draft_means, run.depths,
                                           alpha=args.alpha, rng=np.random.default_rng([seed, 1]))
        fails += not rep.passed
        for t in rep.tests:
            by_family.setdefault(t.family, []).append(t.pvalue)
        done = seed - args.first_seed + 1
        if done % 20 == 0:
            print(f"{done} seeds: {fails} failed ({time.perf_counter() - t0:.0f} s)", flush=True)
    lo, hi = clopper_pearson(fails, args.seeds, level=0.95)
    lines = [
        "# False-fail rate of check_trajectories on an exact sampler",
        "",
        f"`python bench/check_calibration.py --seeds {args.seeds} --n {args.n} --alpha {args.alpha} "
        f"--first-seed {args.first_seed}`: "
        f"speculative_sample(GaussianMixture.random(dim=16, n_components=5, seed=0), 'rass', K=4, L=3, "
        f"n_samples={args.n}, protocol='paper', return_trajectories=True), one check per seed "
        f"({len(rep.tests)} tests in one Holm family).",
        "",
        f"**False-fail rate: {fails}/{args.seeds} = {fails / args.seeds:.3f}** "
        f"(95% Clopper-Pearson interval [{lo:.3f}, {hi:.3f}]; nominal at most {args.alpha}).",
        "",
        "Raw (unadjusted) p-values pooled over seeds, per family: fraction below 0.05 and KS distance from U(0, 1) "
        "(tests within a run are dependent, so the KS p-value is only indicative).",
        "",
        "| family | p-values | fraction <= 0.05 | KS distance from U(0,1) |",
        "|---|---|---|---|",
    ]
    for fam, ps in by_family.items():
        ps = np.asarray(ps)
        lines.append(f"| {fam} | {ps.size} | {np.mean(ps <= 0.05):.3f} | {stats.kstest(ps, 'uniform').statistic:.3f} |")
    lines.append("")
    lines.append(f"Wall time {time.perf_counter() - t0:.0f} s (shared 2-core machine).")
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
