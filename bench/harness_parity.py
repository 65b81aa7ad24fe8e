"""Same seeds, same verdicts and statistics: the exactness harness before and after a refactor.

Runs ``rt.check_exactness`` on verifiers defined here (so the verifier code is the same in both
trees): an exact rule (every row drawn from the target, "resample"), a biased one (shift 0.02 sd
along the displacement), one that breaks the contract (NaN rows, accepted rows that are not
children), one that returns a child unchanged as a correction (``uncorrected_copy``) and one
that reseeds its own generator (``rng_not_advanced``), on one cell and on a two-cell grid, and
writes every test's ``(name, statistic, pvalue, pvalue_adjusted, passed)`` with the verdict and
the process CPU seconds to JSON.  Compare two trees::

    PYTHONPATH=/tmp/before python bench/harness_parity.py --out /tmp/before.json
    python bench/harness_parity.py --out /tmp/after.json --compare /tmp/before.json

``--compare`` writes ``bench/results/harness_parity.md``: the number of tests compared, how many
differ (must be 0) and the CPU-time ratio after / before of each run.  ``--stop-early off`` passes
``stop_early=False`` (no sequential looks within a cell, no stop between cells: every chunk runs,
Holm at ``alpha``; both trees accept the option) and writes ``harness_parity_stop_early_off.md``;
with the default ``on`` the wrong verifiers may stop at an interim look
(:mod:`rass_theory.stats.looks`), so only the runs that reach their final look compare.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from types import SimpleNamespace

import numpy as np

import rass_theory as rt

CELL = dict(K=4, delta=0.5, dim=8, n_samples=20_000, chunk_size=10_000, n_bins=512, two_sample_size=200, rng=1)
GRID_CELLS = [(2, 0.5, 8), (4, 1.0, 3)]
GRID = dict(n_samples=10_000, chunk_size=10_000, n_bins=512, two_sample_size=100, rng=2, show=False)


def _target_draw(children, mu_target, sigma, rng):
    sig = np.asarray(sigma, dtype=children.dtype).reshape(-1, 1) if np.ndim(sigma) else sigma
    return (mu_target + sig * rng.standard_normal(mu_target.shape)).astype(children.dtype)


def resample(children, mu_draft, mu_target, sigma, rng):
    n = children.shape[0]
    return SimpleNamespace(states=_target_draw(children, mu_target, sigma, rng), accepted=np.zeros(n, bool),
                           child_index=np.full(n, -1))


def biased(children, mu_draft, mu_target, sigma, rng):
    res = resample(children, mu_draft, mu_target, sigma, rng)
    diff = (mu_target - mu_draft).astype(np.float64)
    norm = np.linalg.norm(diff, axis=1, keepdims=True)
    e = np.where(norm > 0, diff / np.where(norm > 0, norm, 1.0), 0.0)
    sig = np.asarray(sigma, dtype=np.float64).reshape(-1, 1) if np.ndim(sigma) else sigma
    res.states = (res.states + 0.02 * sig * e).astype(children.dtype)
    return res


def contract_breaker(children, mu_draft, mu_target, sigma, rng):
    res = resample(children, mu_draft, mu_target, sigma, rng)
    n = children.shape[0]
    res.states[:: 97] = np.nan
    res.accepted = np.zeros(n, bool)
    res.accepted[1:: 53] = True
    res.child_index = np.where(res.accepted, 0, -1)
    return res


def uncorrected_copy(children, mu_draft, mu_target, sigma, rng):
    res = resample(children, mu_draft, mu_target, sigma, rng)
    res.states[:: 101] = children[:: 101, 1]
    return res


def reseeding(children, mu_draft, mu_target, sigma, rng):
    return resample(children, mu_draft, mu_target, sigma, np.random.default_rng(7))


VERIFIERS = {"resample": resample, "biased": biased, "contract_breaker": contract_breaker,
             "uncorrected_copy": uncorrected_copy, "reseeding": reseeding}


def _tests(rep):
    return [[t.name, _num(t.statistic), _num(t.pvalue), _num(t.pvalue_adjusted), bool(t.passed)] for t in rep.tests]


def _num(x):
    x = float(x)
    return None if math.isnan(x) else x


def run(stop_early: bool = True) -> dict:
    out = {}
    for name, v in VERIFIERS.items():
        for kind in ("cell", "grid"):
            c0 = time.process_time()
            if kind == "cell":
                rep = rt.check_exactness(v, **CELL, stop_early=stop_early)
            else:
                rep = rt.certify(v, GRID_CELLS, **GRID, stop_early=stop_early)
            out[f"{name}/{kind}"] = {"passed": bool(rep.passed), "tests": _tests(rep),
                                     "acceptance_rate": _num(rep.acceptance_rate),
                                     "cpu_s": time.process_time() - c0,
                                     "stop_look": getattr(rep, "stop_look", None)}
    return out


def compare(after: dict, before: dict, label: str = "the before tree", flag: str = "") -> str:
    lines = ["# Exactness harness: same seeds, same verdicts and statistics (before / after)", "",
             f"`PYTHONPATH=/tmp/before python bench/harness_parity.py{flag} --out before.json; "
             f"python bench/harness_parity.py{flag} --out after.json --compare before.json` (one thread); "
             f"before: {label}.", "",
             "| run | verdict | stop look after | tests | differing tests | CPU s before | CPU s after | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    total_diff = 0
    for key in before:
        a, b = after[key], before[key]
        diff = sum(1 for x, y in zip(a["tests"], b["tests"]) if x != y) + abs(len(a["tests"]) - len(b["tests"]))
        diff += int(a["passed"] != b["passed"]) + int(a["acceptance_rate"] != b["acceptance_rate"])
        total_diff += diff
        lines.append(f"| {key} | {'PASSED' if a['passed'] else 'FAILED'} | {a.get('stop_look')} | {len(a['tests'])} | {diff} | "
                     f"{b['cpu_s']:.2f} | {a['cpu_s']:.2f} | {a['cpu_s'] / b['cpu_s']:.2f} |")
    lines += ["", f"Differences in total: {total_diff} (test names, statistics, raw and Holm p-values, verdicts, "
                  f"acceptance rates compared exactly)."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--compare", default=None)
    parser.add_argument("--before-label", default="the before tree", help="what the compared JSON ran (for the table)")
    parser.add_argument("--stop-early", default="on", choices=("on", "off"))
    args = parser.parse_args()
    result = run(args.stop_early == "on")
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    if args.compare:
        with open(args.compare) as fh:
            before = json.load(fh)
        text = compare(result, before, args.before_label, "" if args.stop_early == "on" else " --stop-early off")
        name = "harness_parity.md" if args.stop_early == "on" else "harness_parity_stop_early_off.md"
        path = os.path.join(os.path.dirname(__file__), "results", name)
        with open(path, "w") as fh:
            fh.write(text)
        print(text)


if __name__ == "__main__":
    main()
