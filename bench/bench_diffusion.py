"""Wall-time benchmark of speculative sampling on the d = 512 Gaussian mixture.

Prints, for 1,000 trajectories, the wall time of plain sampling and of speculative sampling with
lazy and full tree expansion, as ratios to plain sampling run in the same process (timings on a
shared machine are noisy; the ratios are what to compare).

    python bench/bench_diffusion.py [--n-samples 1000] [--K 4] [--L 3] [--verifier dgrs]
"""
from __future__ import annotations

import argparse
import time

from rass_theory.diffusion import GaussianMixture, plain_sample, speculative_sample


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--L", type=int, default=3)
    ap.add_argument("--verifier", default="dgrs")
    args = ap.parse_args(argv)
    tgt = GaussianMixture.random(dim=args.dim, n_components=5, seed=0)
    # warm-up (imports, verifier tables) so that timings measure the sampling only
    speculative_sample(tgt, args.verifier, K=args.K, L=args.L, n_samples=4, rng=0)
    t0 = time.perf_counter()
    plain_sample(tgt, args.n_samples, 30, 0.06, rng=1)
    t_plain = time.perf_counter() - t0
    print(f"plain        {t_plain:7.2f} s   1.00x   (28 target calls per trajectory)")
    for expansion in ("lazy", "full"):
        t0 = time.perf_counter()
        run = speculative_sample(tgt, args.verifier, K=args.K, L=args.L, n_samples=args.n_samples, rng=2,
                                 expansion=expansion)
        t = time.perf_counter() - t0
        print(f"{expansion:<12} {t:7.2f} s   {t / t_plain:5.2f}x   speedup in target calls "
              f"{run.speedup:.3f} ± {run.speedup_se:.3f}; {run.target_nodes_per_round} target-evaluated and "
              f"{run.drafted_nodes_per_round} drafted nodes per round")


if __name__ == "__main__":
    main()
