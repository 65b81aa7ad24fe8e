"""Wall-time benchmark of speculative sampling and of the step-by-step check on the d = 512 mixture.

Times, in one process (timings on a shared machine are noisy; the ratios are what to compare):

* plain sampling, and speculative sampling with lazy and full tree expansion, for 1,000
  trajectories at d = 512, K = 4, L = 3, prefetch ``nearest`` (the ratio full / lazy is the
  figure of issue 18 part 4: at most 60 s for full expansion, against about 38 s lazy);
* ``check_trajectories`` for 2,000 trajectories at d = 16 and for 1,000 at d = 512, and the
  memory ``return_trajectories`` holds.

Writes ``bench/results/bench_diffusion.md``.

    python bench/bench_diffusion.py [--n-samples 1000] [--K 4] [--L 3] [--verifier dgrs] [--repeats 1]
"""
from __future__ import annotations

import argparse
import time

from _common import RESULTS
from rass_theory import diffusion
from rass_theory.diffusion import GaussianMixture, plain_sample, speculative_sample

OUT = RESULTS / "bench_diffusion.md"


def _time(fn):
    """``(wall s, process CPU s, result)``: CPU time is the steadier figure on a loaded machine."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--L", type=int, default=3)
    ap.add_argument("--verifier", default="dgrs")
    ap.add_argument("--repeats", type=int, default=1, help="alternate lazy/full this many times")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--out", default=str(OUT), help="markdown file to write (default bench/results/bench_diffusion.md)")
    args = ap.parse_args(argv)
    tgt = GaussianMixture.random(dim=args.dim, n_components=5, seed=0)
    # warm-up (imports, verifier tables) so that timings measure the sampling only
    speculative_sample(tgt, args.verifier, K=args.K, L=args.L, n_samples=4, rng=0)
    lines = ["# Diffusion wall times (one process; ratios are what to compare on a shared machine)", "",
             f"`python bench/bench_diffusion.py --n-samples {args.n_samples} --dim {args.dim} --K {args.K} "
             f"--L {args.L} --verifier {args.verifier} --repeats {args.repeats}`: "
             f"GaussianMixture.random(dim={args.dim}, n_components=5, seed=0), 30 steps, churn 0.06, "
             "prefetch 'nearest', default protocol.", "",
             "| run | wall s | CPU s | wall / plain | wall / lazy | CPU / lazy | speedup in target calls |",
             "|---|---|---|---|---|---|---|"]
    t_plain, c_plain, _ = _time(lambda: plain_sample(tgt, args.n_samples, 30, 0.06, rng=1))
    print(f"plain        {t_plain:7.2f} s   1.00x   (28 target calls per trajectory)", flush=True)
    lines.append(f"| plain | {t_plain:.2f} | {c_plain:.2f} | 1.00 | | | 1 |")
    times = {"lazy": [], "full": []}
    runs = {}
    for rep in range(args.repeats):
        for expansion in ("lazy", "full"):
            t, c, run = _time(lambda: speculative_sample(tgt, args.verifier, K=args.K, L=args.L,
                                                         n_samples=args.n_samples, rng=2 + rep, expansion=expansion,
                                                         prefetch="nearest"))
            times[expansion].append((t, c))
            runs[expansion] = run
            print(f"{expansion:<12} {t:7.2f} s (CPU {c:.2f} s)  {t / t_plain:5.2f}x   speedup in target calls "
                  f"{run.speedup:.3f} ± {run.speedup_se:.3f}", flush=True)
    (lazy, c_lazy), (full, c_full) = min(times["lazy"]), min(times["full"])
    for expansion, (t, c) in (("lazy", (lazy, c_lazy)), ("full", (full, c_full))):
        run = runs[expansion]
        lines.append(f"| {expansion} (best of {args.repeats}) | {t:.2f} | {c:.2f} | {t / t_plain:.2f} | "
                     f"{t / lazy:.2f} | {c / c_lazy:.2f} | {run.speedup:.3f} ± {run.speedup_se:.3f} |")
    print(f"full / lazy = {full / lazy:.2f} wall, {c_full / c_lazy:.2f} CPU")
    lines += ["", f"**full / lazy = {full / lazy:.2f} in wall time, {c_full / c_lazy:.2f} in CPU time** "
              f"(best of {args.repeats} each, same process)."]
    if not args.skip_check:
        from rass_theory.diffusion.trajectories import trajectory_bytes

        lines += ["", "## check_trajectories", "",
                  "| trajectories | d | sampler wall s (return_trajectories) | check wall s | check / sampler | "
                  "check target calls | return_trajectories memory |", "|---|---|---|---|---|---|---|"]
        for n, d in ((2000, 16), (args.n_samples, args.dim)):
            g = tgt if d == args.dim else GaussianMixture.random(dim=d, n_components=5, seed=0)
            t_s, _, run = _time(lambda: speculative_sample(g, args.verifier, K=args.K, L=args.L, n_samples=n,
                                                           rng=3, return_trajectories=True))
            kernel = diffusion.plain_kernel(g)
            t_c, _, rep = _time(lambda: diffusion.check_trajectories(run.trajectories, kernel, run.draft_means,
                                                                     run.depths, rng=4))
            mib = trajectory_bytes(n, kernel.n_states, d) / 2 ** 20
            print(f"check n={n} d={d}: {t_c:.2f} s (sampler {t_s:.2f} s), {rep.target_calls} calls, "
                  f"{'PASSED' if rep.passed else 'FAILED'}, trajectories {mib:.1f} MiB", flush=True)
            lines.append(f"| {n:,} | {d} | {t_s:.2f} | {t_c:.2f} | {t_c / t_s:.2f} | {rep.target_calls} | "
                         f"{mib:.1f} MiB |")
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
