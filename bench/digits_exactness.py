"""Whole-run exactness on the learned digits model: speculative vs plain samples, same kernel.

Usage::

    python bench/digits_exactness.py [--n 2000] [--threads 1] [--out bench/results/digits_exactness.md]
    python bench/digits_exactness.py --only-verifiers optimal_list   # rerun those arms, merge into --out

For RMC (chains L = 3 and 7), D-GRS, RASS, the threshold policy and the list-coupling rule
``optimal_list`` at (K, L) in {(2, 3), (4, 3)}:
``--n`` speculative trajectories (torch tree sampler, prefetch "nearest") against ``--n`` plain
trajectories from an independent seed, compared with ``rass_theory.models.exactness.compare_samples``:
energy distance (999 permutations), classifier two-sample test and per-pixel KS, each at
alpha / 3 with alpha = 0.01 per arm.  The detectable effects at 80 % power are stated per test.
Arm ``j`` uses seeds ``derive_seed(seed, 5000 + j)`` (speculative), ``6000 + j`` (plain) and
``7000 + j`` (tests); the known-wrong control is ``j = 8`` and arms added later (``APPENDED``)
follow it, so earlier arms keep their seeds.  ``--only-verifiers`` (and ``--control-only``) run
a subset with those seeds and replace or add its rows in ``--out``, before the control row.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch
from _common import digits_parser  # bench/ is on sys.path: run as a script

from rass_theory.diffusion.torch_sampler import plain_sample_torch, speculative_sample_torch
from rass_theory.models import digits_flow
from rass_theory.models.exactness import compare_samples
from rass_theory.plot.exactness import derive_seed


def greedy_nearest(children, mu_draft, mu_target, sigma, rng):
    """Known-wrong control: always commit the child nearest to the target mean."""
    from rass_theory.verifiers._tensors import TorchVerifierResult

    n = children.shape[0]
    idx = ((children - mu_target[:, None, :]) ** 2).sum(dim=2).argmin(dim=1)
    return TorchVerifierResult(children[torch.arange(n), idx], torch.ones(n, dtype=torch.bool), idx)


CONTROL = (greedy_nearest, 4, 3)
CONTROL_LABEL = "CONTROL: greedy nearest (known wrong)"
ARMS = (("rmc", 1, 3), ("rmc", 1, 7), ("dgrs", 2, 3), ("dgrs", 4, 3), ("rass", 2, 3), ("rass", 4, 3),
        ("threshold", 2, 3), ("threshold", 4, 3))
APPENDED = (("optimal_list", 2, 3), ("optimal_list", 4, 3))


def _merge(old_lines, new_rows):
    """``old_lines`` with rows of the same (verifier, K, L) replaced; other new rows go before the control row."""
    def key(row):
        return tuple(c.strip() for c in row.split("|")[1:4])

    fresh = {key(r): r for r in new_rows}
    lines = [fresh.pop(key(ln), ln) if ln.startswith("| ") else ln for ln in old_lines]
    at = next((i for i, ln in enumerate(lines) if ln.startswith(f"| {CONTROL_LABEL}")), len(lines))
    return lines[:at] + [r for r in new_rows if key(r) in fresh] + lines[at:]


def main(argv=None):
    ap = digits_parser(__doc__, n=2000, out="digits_exactness.md",
                       only_help="comma-separated verifiers: run only their arms and merge their rows into --out")
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--control-only", action="store_true",
                    help="run only the known-wrong control arm and merge its row into --out")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = digits_flow()
    lines = [
        "# Whole-run exactness on the learned digits model",
        "",
        f"`python bench/digits_exactness.py --n {args.n}`; torch tree sampler on `digits_flow()`, 30 steps, "
        f"churn 0.06, prefetch `nearest`; n = {args.n} speculative vs n = {args.n} plain samples (independent "
        f"seeds) per arm; alpha = {args.alpha} per arm (Bonferroni over three tests, each at alpha/3). The "
        "machine was shared with other jobs.",
        "",
        "Detectable effects at 80 % power (each test at alpha/3): energy -- the Euclidean norm of a pure mean "
        "shift of one sample (normalised pixel units; one pixel's range is 2), estimated by shifting random "
        "splits of the pooled sample; C2ST -- the true classifier accuracy; marginal KS -- a KS distance in "
        "any single pixel (distribution-free sufficient value). The last row is a known-wrong control (always "
        "commit the child nearest to the target mean), which the tests must reject.",
        "",
        "| verifier | K | L | speedup | energy p | C2ST acc (p) | worst-pixel KS (p) | combined p | verdict | "
        "detectable: shift / acc / KS | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    arms = list(enumerate(ARMS)) + [(len(ARMS), CONTROL)] + list(enumerate(APPENDED, len(ARMS) + 1))
    only = [v for v in args.only_verifiers.split(",") if v]
    if only or args.control_only:
        unknown = set(only) - {v for _, (v, _, _) in arms if isinstance(v, str)}
        if unknown:
            raise ValueError(f"--only-verifiers: {sorted(unknown)} have no arm")
        arms = [a for a in arms if a[1][0] in only or (args.control_only and a[1] is CONTROL)]
        old_lines = Path(args.out).read_text().splitlines()
        note = (f"`python bench/digits_exactness.py --n {args.n} --only-verifiers {','.join(only)}` ran the "
                f"{', '.join(only)} rows (same seeds as a full run; the machine was loaded).")
        if only and note not in old_lines:
            first = next(i for i, ln in enumerate(old_lines) if ln.startswith("`python bench/digits_exactness.py"))
            old_lines[first + 1:first + 1] = ["", note]
    rows = []
    for j, (v, K, L) in arms:
        t0 = time.perf_counter()
        run = speculative_sample_torch(model, v, K=K, L=L, n_samples=args.n, rng=derive_seed(args.seed, 5000 + j))
        ref = plain_sample_torch(model, args.n, rng=derive_seed(args.seed, 6000 + j))
        res = compare_samples(run.samples, ref, alpha=args.alpha, n_permutations=999,
                              rng=derive_seed(args.seed, 7000 + j))
        e, c, m = res.energy, res.c2st, res.marginal
        label = v if isinstance(v, str) else CONTROL_LABEL
        rows.append(f"| {label} | {K} | {L} | {run.speedup:.3f} | {e.pvalue:.3f} | {c.statistic:.3f} ({c.pvalue:.3f}) | "
                    f"{m.statistic:.3f} ({m.pvalue:.3f}) | {res.pvalue:.3f} | {'pass' if res.passed else 'reject'} | "
                    f"{e.detectable_mean_shift:.3f} / {c.detectable_accuracy:.3f} / {m.detectable_ks:.3f} | "
                    f"{time.perf_counter() - t0:.0f} |")
        print(rows[-1], flush=True)
    if only or args.control_only:
        lines = _merge(old_lines, rows)
    else:                                        # full run: the control row last
        lines += [r for r in rows if not r.startswith(f"| {CONTROL_LABEL}")]
        lines += [r for r in rows if r.startswith(f"| {CONTROL_LABEL}")]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
