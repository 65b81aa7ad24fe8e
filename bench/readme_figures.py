"""Regenerate every number and timing the README quotes; write bench/results/readme_figures.md.

Runs on a clean clone (nothing downloaded, nothing read from earlier results):

* the API tour's exact values (``rt.acceptance`` of D-GRS, RASS, the bound, optimal_list, the
  threshold verifier's policy);
* the Gaussian-mixture speedup of the API tour (D-GRS, K = 4, L = 3, 1,000 trajectories, paper
  protocol, nearest prefetching, ``rng=0``; published: 1.89);
* the wall time of ``rass-theory report`` at its defaults and with ``--quick`` (a fresh
  subprocess each, per-section wall and CPU seconds from the report's manifest), with the load
  average before and after: the machine may be shared, so the CPU seconds are the comparable
  figure;
* the threshold verifier at 2,000 rows with 2,000 distinct deltas (and its table's certificate);
* ``bench/gpu_check.py --device cpu --quick`` (the README's "tested here" claim): exit status and time.

The fast-test wall time is measured by whoever runs the suite (``python -m pytest -n 2 -q``).

    python bench/readme_figures.py            # everything (the default report alone takes minutes)
    python bench/readme_figures.py --quick    # exact values, 100 GM trajectories, the quick report only
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def exact_values() -> list:
    import rass_theory as rt
    from rass_theory import verifiers

    thr = verifiers.threshold()
    rows = [
        ('rt.acceptance("dgrs", 4, 1.0)', rt.acceptance("dgrs", 4, 1.0), "0.798"),
        ('rt.acceptance("rass", 4, 1.0)', rt.acceptance("rass", 4, 1.0), "0.896"),
        ("rt.acceptance_bound(4, 1.0)", rt.acceptance_bound(4, 1.0), "0.924"),
        ('rt.acceptance("optimal_list", 4, 0.5)', rt.acceptance("optimal_list", 4, 0.5), "0.99918"),
        ('rt.acceptance("rass", 4, 0.5)', rt.acceptance("rass", 4, 0.5), "0.97722"),
        ('rt.acceptance("threshold", 4, 1.0)', rt.acceptance("threshold", 4, 1.0), "(optimised policy)"),
        ("rt.verifiers.threshold().expected_acceptance(4, 1.0)", thr.expected_acceptance(4, 1.0),
         "(tabulated policy)"),
    ]
    return rows


def gm_speedup(n: int) -> dict:
    from rass_theory import diffusion

    tgt = diffusion.GaussianMixture.random(dim=512, n_components=5, seed=20260714)
    t0 = time.perf_counter()
    run = diffusion.speculative_sample(tgt, "dgrs", K=4, L=3, n_samples=n, protocol="paper", prefetch="nearest",
                                       rng=0)
    return {"n": n, "speedup": float(run.speedup), "se": float(run.speedup_se),
            "mor": float(run.speedup_mean_of_ratios), "seconds": time.perf_counter() - t0}


def report_time(quick: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        cmd = ["rass-theory", "report", "--out", str(out)] + (["--quick"] if quick else [])
        before = load()
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = load()
        manifest = json.loads((out / "manifest.json").read_text()) if (out / "manifest.json").exists() else None
    return {"command": " ".join(cmd[:3] + ["DIR"] + cmd[4:]), "returncode": proc.returncode, "wall": wall,
            "load_before": before, "load_after": after, "manifest": manifest,
            "stderr_tail": proc.stderr[-600:] if proc.returncode else ""}


def threshold_per_row() -> dict:
    from rass_theory import verifiers
    from rass_theory.optimize.threshold_table import tabulated_K, threshold_table

    rng = np.random.default_rng(0)
    n, K, d = 2000, 4, 64
    mu_d = rng.standard_normal((n, d))
    e = rng.standard_normal((n, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    delta = rng.uniform(0.05, 3.0, n)
    children = mu_d[:, None, :] + rng.standard_normal((n, K, d))
    v = verifiers.threshold()
    v(children[:10], mu_d[:10], mu_d[:10] + delta[:10, None] * e[:10], 1.0, rng)   # load the table
    t0 = time.perf_counter()
    v(children, mu_d, mu_d + delta[:, None] * e, 1.0, rng)
    return {"seconds": time.perf_counter() - t0,
            "max_gap": {K: threshold_table(K).max_gap for K in tabulated_K()}}


def gpu_check_cpu() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--device", "cpu", "--quick",
                               "--out", str(Path(tmp) / "cpu.json")], capture_output=True, text=True)
        return {"returncode": proc.returncode, "seconds": time.perf_counter() - t0}


def _report_lines(r: dict) -> list:
    lines = [f"`{r['command']}`: exit status {r['returncode']}, **{r['wall']:.0f} s** wall "
             f"(load average before {r['load_before']}, after {r['load_after']})."]
    m = r["manifest"]
    if m:
        lines += ["", "| section | status | wall (s) | CPU (s) | cost model (s) |", "|---|---|---:|---:|---:|"]
        for s in m["sections"]:
            lines.append(f"| {s['key']} | {s['status']} | {s['seconds']:.1f} | {s.get('cpu_seconds', float('nan')):.1f} "
                         f"| {s.get('estimated_seconds', float('nan')):.1f} |")
        cpu = sum(s.get("cpu_seconds", 0.0) for s in m["sections"])
        lines += ["", f"Sections: {m['seconds']:.0f} s wall, {cpu:.0f} s CPU."]
    if r["stderr_tail"]:
        lines += ["", "```", r["stderr_tail"], "```"]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="exact values, 100 GM trajectories, the quick report only")
    ap.add_argument("--out", default=str(RESULTS / "readme_figures.md"))
    args = ap.parse_args()
    t_start = time.perf_counter()
    lines = ["# Figures quoted in the README, remeasured", "",
             f"Command: `python bench/readme_figures.py{' --quick' if args.quick else ''}`; "
             f"{os.cpu_count()} CPUs, load average at the start {load()} "
             "(a shared machine inflates wall times; CPU seconds are the comparable figure).", "",
             "## Exact values (API tour)", "", "| expression | value | README |", "|---|---:|---|"]
    for expr, value, quoted in exact_values():
        lines.append(f"| `{expr}` | {value:.5f} | {quoted} |")
    n = 100 if args.quick else 1000
    gm = gm_speedup(n)
    lines += ["", "## Gaussian-mixture speedup (API tour)", "",
              f"`diffusion.speculative_sample(GaussianMixture.random(dim=512, n_components=5, seed=20260714), \"dgrs\", "
              f"K=4, L=3, n_samples={n}, protocol=\"paper\", prefetch=\"nearest\", rng=0)`: speedup "
              f"**{gm['speedup']:.3f} ± {gm['se']:.3f}** (mean of ratios {gm['mor']:.3f}; published 1.89), "
              f"{gm['seconds']:.0f} s." + (" (--quick: 100 trajectories, not the README's setting.)" if args.quick else "")]
    tp = threshold_per_row()
    lines += ["", "## Threshold verifier at per-row deltas", "",
              f"`rt.verifiers.threshold()` on 2,000 rows with 2,000 distinct deltas (K = 4, d = 64): "
              f"**{tp['seconds']:.2f} s**. Largest acceptance loss of the certified table against the optimiser, per K: "
              + ", ".join(f"K = {k}: {g:.1e}" for k, g in tp["max_gap"].items()) + "."]
    lines += ["", "## `rass-theory report`", ""]
    if not args.quick:
        lines += ["### Defaults", ""] + _report_lines(report_time(quick=False)) + [""]
    lines += ["### --quick", ""] + _report_lines(report_time(quick=True))
    if not args.quick:
        g = gpu_check_cpu()
        lines += ["", "## GPU check on the CPU", "",
                  f"`python bench/gpu_check.py --device cpu --quick --out cpu.json`: exit status {g['returncode']}, "
                  f"{g['seconds']:.0f} s."]
    lines += ["", "The fast-test wall time (`python -m pytest -n 2 -q`) is measured by whoever runs the suite.",
              "", f"Total: {time.perf_counter() - t_start:.0f} s; load average at the end {load()}.", ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
