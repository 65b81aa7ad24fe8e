"""Are the MNIST z-scores of ``predict_speedup`` a verifier, an accounting or an estimator problem?

Usage::

    python bench/mnist_speedup_calibration.py [--rules optimal_list,dgrs,rass] [--n 80]

One budget-matched arm of the protocol (eps = 0.3, tree 2x5, leaves evaluated, prefetch ``nearest``; the
arm where ``bench/mnist_speedup.py`` first saw |z| = 5.1) per rule, ``--n`` trajectories, seed
``777 + 10 K + L``, on ``rass_theory.models.mnist_unet()``.  Per rule it reports

* node calibration: the verifier's accept flags against ``rt.acceptance(rule, K, delta)`` at the node's
  delta, binned by delta and by depth (z = sum(flag - alpha) / sqrt(sum alpha (1 - alpha)));
* accounting: the dynamic programme fed the accept flags (``DeltaTrace.cell_means(flags)``) against the
  measured mean calls (equal by flow conservation when the accounting is right);
* estimator: ``predict_speedup``'s expected calls from disjoint subsets of 10 and 20 trajectories
  against the measured mean calls of all ``--n`` (bias +- SE over the subsets).

Each rule's run is saved (``bench/results/mnist_speedup/calibration_<rule>.npz``) and reused.  Writes
``bench/results/mnist_speedup_calibration.md``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from rass_theory.diffusion import DeltaTrace
from rass_theory.diffusion.theory import acceptance_curve, expected_calls
from rass_theory.diffusion.torch_sampler import speculative_sample_torch

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "bench" / "results" / "mnist_speedup"
MODE, EPS, K, L = "budget", 0.3, 2, 5
BINS = (0.0, 1e-6, 0.3, 0.6, 0.9, 1.2, 1.6, 2.2, np.inf)


def run_rule(model, rule, n, path):
    if path.exists():
        return dict(np.load(path))
    t0 = time.perf_counter()
    run = speculative_sample_torch(model, rule, K=(K,) * L, L=None, n_samples=n, n_steps=100, churn=EPS,
                                   protocol="paper", prefetch="nearest", evaluate_leaves=True,
                                   rng=777 + K * 10 + L, device="cpu")
    tr = DeltaTrace.from_run(run)
    ks = np.asarray(run.nodes.K)
    alpha = np.empty(tr.delta.shape)
    for k in set(ks.tolist()):
        alpha[ks == k] = acceptance_curve(rule, k, max_delta=10.0)(tr.delta[ks == k])
    out = dict(acc=np.asarray(run.nodes.accepted, dtype=float), alpha=alpha, delta=tr.delta, depth=tr.depth,
               step=tr.step, cls=tr.source_class, calls=np.asarray(run.target_calls), K=ks,
               traj=np.asarray(run.rounds.trajectory)[np.asarray(run.nodes.round_id)], first=tr.first_step,
               n_std=tr.n_std, wall_s=time.perf_counter() - t0)
    np.savez(path, **out)
    return out


def _z(flag, alpha):
    v = np.sum(alpha * (1 - alpha))
    return float(np.sum(flag - alpha) / np.sqrt(v)) if v > 0 else 0.0


def _trace(z, mask):
    return DeltaTrace(step=z["step"][mask], depth=z["depth"][mask], source_class=z["cls"][mask],
                      delta=z["delta"][mask], n_std=int(z["n_std"]), first_step=int(z["first"]), widths=(K,) * L,
                      prefetch="nearest", evaluate_leaves=True)


def _calls(tr, a):
    return expected_calls(tr.cell_means(a, L), n_std=tr.n_std, prefetch="nearest", evaluate_leaves=True)


def analyse(rule, z):
    lines = [f"### {rule}", "", f"Run wall time {float(z['wall_s']):.0f} s (shared 2-core machine).", ""]
    acc, alpha, delta, depth, calls = z["acc"], z["alpha"], z["delta"], z["depth"], z["calls"]
    n = calls.size
    full = np.ones(acc.size, dtype=bool)
    c_flags = _calls(_trace(z, full), acc)
    lines += [f"{n} trajectories, {acc.size} verified nodes; measured mean calls {calls.mean():.4f} ± "
              f"{calls.std(ddof=1) / np.sqrt(n):.4f}; programme with the accept flags {c_flags:.4f} "
              f"(difference {c_flags - calls.mean():+.1e}); with the exact alpha {_calls(_trace(z, full), alpha):.4f}. "
              f"All nodes: acceptance {acc.mean():.4f} against exact {alpha.mean():.4f}, z = {_z(acc, alpha):+.2f}.", "",
              "| delta bin | nodes | measured acceptance | exact alpha (mean) | z |", "|---|---|---|---|---|"]
    for lo, hi in zip(BINS[:-1], BINS[1:]):
        m = (delta >= lo) & (delta < hi)
        if m.any():
            lines.append(f"| [{lo:g}, {hi:g}) | {m.sum()} | {acc[m].mean():.4f} | {alpha[m].mean():.4f} | "
                         f"{_z(acc[m], alpha[m]):+.2f} |")
    lines += ["", "| depth | nodes | measured acceptance | exact alpha (mean) | z |", "|---|---|---|---|---|"]
    for j in range(L):
        m = depth == j
        lines.append(f"| {j} | {m.sum()} | {acc[m].mean():.4f} | {alpha[m].mean():.4f} | {_z(acc[m], alpha[m]):+.2f} |")
    lines += ["", "| subset size | subsets | predicted - measured mean calls (mean over subsets ± SE) |", "|---|---|---|"]
    for m in (10, 20):
        groups = np.arange(n) // m
        d = np.array([_calls(_trace(z, groups[z["traj"]] == g), alpha[groups[z["traj"]] == g])
                      - calls[groups == g].mean() for g in range(n // m)])
        lines.append(f"| {m} | {d.size} | {d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(d.size):.3f} |")
    return lines + [""]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", default="optimal_list,dgrs,rass")
    ap.add_argument("--n", type=int, default=80)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "mnist_speedup_calibration.md"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from rass_theory.models import mnist_unet

    model = mnist_unet()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    lines = ["# Calibration of the MNIST speedup predictions", "",
             f"`python bench/mnist_speedup_calibration.py --rules {args.rules} --n {args.n}`; torch {torch.__version__}. "
             f"Arm: {MODE}-matched, eps = {EPS}, tree {K}x{L}, leaves evaluated, prefetch nearest, n = {args.n} "
             "trajectories per rule (seed 777 + 10 K + L). See the module docstring for the three checks. A rule's "
             "run is reused from `bench/results/mnist_speedup/calibration_<rule>.npz` when that file exists (the "
             "wall time is the one of the run that wrote it).", ""]
    for rule in args.rules.split(","):
        z = run_rule(model, rule, args.n, OUT_DIR / f"calibration_{rule}.npz")
        lines += analyse(rule, z)
    lines += ["## Reading", "",
              "The call accounting is exact (accept flags reproduce the measured calls to rounding), and each "
              "verifier's measured acceptance matches `rt.acceptance(rule, K, delta)` node by node within sampling "
              "error: no verifier bug in this model's regime (float32 inputs, d = 784). The prediction from small "
              "subsets agrees with the measurement within its SE. With the former empty-cell fallback of "
              "`DeltaTrace.cell_means` (the same (depth, class) pooled over all steps, commit 8052fb9) the "
              "optimal_list subsets of 20 predicted -0.29 ± 0.10 calls against the measurement: that fallback was "
              "the bias behind the |z| up to 5.1 of `bench/results/mnist_speedup.md` as first run.", ""]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
