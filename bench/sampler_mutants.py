"""Sampler mutants: the step-by-step check against the final-sample tests, and the n each needs.

For the exact tree sampler of :mod:`rass_theory.diffusion.sampler_mutants`, the project's own
sampler, and every sampler mutant (RASS, K = 4, L = 3, paper protocol, d = 16 mixture):

* ``check_sampler`` at its defaults (2,000 trajectories, alpha = 1e-3): verdict, smallest p-value
  and the test that reached it;
* the final-sample tests at the same n: ``compare_to_plain`` (energy distance, occupancy, radius;
  Bonferroni, alpha = 0.01) against an independent plain replicate;
* the trajectories the final-sample tests need: n doubled from 2,000 (one seed per n) until
  occupancy + radius + per-coordinate KS (Bonferroni, alpha = 0.01; the energy test's O(n^2)
  memory rules it out at large n) reject, up to ``--max-n``.

Writes ``bench/results/sampler_mutants.md``.

    python bench/sampler_mutants.py [--max-n 32000] [--seed 0]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from _common import RESULTS
from rass_theory import diffusion
from rass_theory.diffusion.exactness import occupancy_test, radial_test
from rass_theory.diffusion.sampler_mutants import BUGS, sampler_mutant, tree_sampler
from rass_theory.stats.two_sample import marginal_ks_test

OUT = RESULTS / "sampler_mutants.md"


def project_check(kernel, n, seed):
    """The project's lazy NumPy sampler (it draws its own starts), checked with check_trajectories."""
    run = diffusion.speculative_sample(kernel.target, "rass", K=4, L=3, n_samples=n, protocol="paper",
                                       rng=np.random.default_rng([seed, 5]), return_trajectories=True)
    return diffusion.check_trajectories(run.trajectories, kernel, run.draft_means, run.depths,
                                        rng=np.random.default_rng([seed, 6]))


def final_states(sampler, kernel, n, seed):
    if sampler is None:
        return diffusion.speculative_sample(kernel.target, "rass", K=4, L=3, n_samples=n, protocol="paper",
                                            rng=np.random.default_rng([seed, 7])).samples
    x0 = np.random.default_rng([seed, 1]).standard_normal((n, kernel.dim))
    traj, _, _ = sampler(kernel, x0, np.random.default_rng([seed, 2]))
    return kernel.tail(traj[:, -1])


def cheap_final_tests(x, ref, means, alpha=0.01):
    p = [occupancy_test(x, ref, means, alpha=alpha / 3).pvalue, radial_test(x, ref, means, alpha=alpha / 3).pvalue,
         marginal_ks_test(x, ref, alpha=alpha / 3).pvalue]
    return min(1.0, 3 * min(p))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-n", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)
    tgt = diffusion.GaussianMixture.random(dim=16, n_components=5, seed=0)
    kernel = diffusion.plain_kernel(tgt, 30, 0.06, protocol="paper")
    samplers = {"exact tree_sampler": tree_sampler(), "project sampler (lazy)": None}
    samplers.update({name: sampler_mutant(name) for name in BUGS})
    if args.only:
        samplers = {k: v for k, v in samplers.items() if k in args.only}
    rows = []
    for name, sampler in samplers.items():
        t0 = time.perf_counter()
        if sampler is None:
            rep = project_check(kernel, 2000, args.seed)
        else:
            rep = diffusion.check_sampler(sampler, kernel, n_trajectories=2000, rng=args.seed)
        t_check = time.perf_counter() - t0
        w = rep.worst
        x = final_states(sampler, kernel, 2000, args.seed + 100)
        ref = diffusion.plain_sample(tgt, 2000, rng=args.seed + 200, protocol="paper")
        cmp_p = diffusion.compare_to_plain(x, ref, tgt.means, alpha=0.01, rng=args.seed, detectable=False)
        p_cmp = min(1.0, 3 * min(t.pvalue for t in cmp_p.tests))
        need, n = None, 2000
        trail = []
        while name in BUGS and n <= args.max_n:          # exact samplers: nothing to find
            x = final_states(sampler, kernel, n, args.seed + 300 + n)
            ref = diffusion.plain_sample(tgt, n, rng=args.seed + 400 + n, protocol="paper")
            p = cheap_final_tests(x, ref, tgt.means)
            trail.append(f"{n}: {p:.2g}")
            if p <= 0.01:
                need = n
                break
            n *= 2
        row = (name, "PASSED" if rep.passed else "FAILED", w.name, w.pvalue, w.pvalue_adjusted, p_cmp,
               need, "; ".join(trail), t_check)
        rows.append(row)
        print(f"{name:26s} {row[1]}  {w.name:32s} p={w.pvalue:.3g} (Holm {w.pvalue_adjusted:.3g})  "
              f"final@2000 p={p_cmp:.3g}  final needs n={need if need else '>' + str(args.max_n)}  "
              f"[{row[7]}]  check {t_check:.1f} s", flush=True)
    lines = [
        "# Sampler mutants: step-by-step check against the final-sample tests",
        "",
        "`python bench/sampler_mutants.py` (seed 0): GaussianMixture.random(dim=16, n_components=5, seed=0), "
        "paper protocol (30 steps, churn 0.06), RASS, K = 4, L = 3.",
        "`check_sampler` at its defaults (2,000 trajectories, alpha = 1e-3, one Holm family).  "
        "Final-sample tests at 2,000: `compare_to_plain` (energy, occupancy, radius; Bonferroni p, reject at 0.01).  "
        "n needed: doubling from 2,000 (one seed each) until occupancy + radius + per-coordinate KS "
        "(Bonferroni) reject at 0.01.",
        "",
        "| sampler | bug | check verdict | smallest-p test | p | Holm p | final-sample p at n = 2,000 | "
        "final-sample tests reject at n | final-sample p by n | check wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bug = BUGS.get(r[0], "none (exact)")
        need = f"{r[6]:,}" if r[6] else (f"> {args.max_n:,}" if r[0] in BUGS else "n/a")
        lines.append(f"| {r[0]} | {bug} | {r[1]} | {r[2]} | {r[3]:.3g} | {r[4]:.3g} | {r[5]:.3g} | {need} | "
                     f"{r[7]} | {r[8]:.1f} |")
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
