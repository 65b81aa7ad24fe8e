"""Sweep speculative-sampling arms on the Gaussian-mixture target: CSV rows and a bar figure.

Each arm (a verifier on a tree shape) is run once, tested against an independent plain
replicate, compared with its predicted speedup, and appended to the CSV as soon as it finishes,
so an interrupted sweep keeps every finished row and a rerun skips them.
"""
from __future__ import annotations

import csv
import os
import time
import zlib
from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int
from ._contract import snapped_threshold_verifier
from .exactness import compare_to_plain
from .mixture import GaussianMixture
from .plain import plain_sample
from .schedule import ChurnSchedule
from .speculative import speculative_sample
from .theory import predict_speedup
from .trees import BUDGETS, TreeShape, matched_chain

__all__ = ["Arm", "build_arms", "run_arm", "run_sweep", "read_rows", "plot_speedups", "CSV_FIELDS"]

CSV_FIELDS = [
    "key", "verifier", "base_K", "base_L", "budget", "widths", "chain_length_effective",
    "target_nodes_per_round", "drafted_nodes_per_round", "dim", "n_components", "n_samples",
    "n_steps", "churn", "n_standard_steps", "mean_target_calls", "speedup", "speedup_se",
    "predicted_speedup", "prediction_z", "mean_committed_per_round", "acceptance_depth0",
    "energy_pvalue", "energy_detectable_shift", "occupancy_pvalue", "occupancy_detectable_shift",
    "radial_pvalue", "radial_detectable_ks", "combined_pvalue", "exact_at_alpha", "alpha",
    "wall_time_s", "seed", "prefetch", "protocol", "evaluate_leaves", "speedup_mean_of_ratios",
    "speedup_mean_of_ratios_se",
]


@dataclass(frozen=True)
class Arm:
    """One configuration of a sweep.

    ``budget`` is ``"tree"`` for a tree verifier on the base ``(K, L)`` tree, or the budget
    name (``"target_nodes"``/``"drafted_nodes"``) for the RMC chain matched to that tree.
    """

    verifier: str
    base: tuple
    budget: str
    shape: TreeShape

    @property
    def key(self) -> str:
        return f"{self.verifier}|K={self.base[0]},L={self.base[1]}|{self.budget}"


def build_arms(shapes, verifiers, budgets=tuple(BUDGETS)) -> list:
    """Arms for every ``(K, L)`` in ``shapes`` and verifier in ``verifiers``.

    ``"rmc"`` (``K = 1`` only) becomes one chain per budget, matched to the ``(K, L)`` tree;
    every other verifier runs on the ``(K, L)`` tree itself.
    """
    arms = []
    for budget in budgets:
        if budget not in BUDGETS:
            raise ValueError(f"budgets must be among {sorted(BUDGETS)}, got {budget!r}")
    for K, L in shapes:
        base = TreeShape.uniform(K, L)
        for v in verifiers:
            if v == "rmc":
                for budget in budgets:
                    arms.append(Arm(v, (base.widths[0], base.depth), budget, matched_chain(base, budget)))
            else:
                arms.append(Arm(v, (base.widths[0], base.depth), "tree", base))
    return arms


def _seeds(seed: int, key: str):
    return np.random.SeedSequence([int(seed), zlib.crc32(key.encode())]).spawn(3)


def run_arm(target, arm: Arm, *, n_samples: int, n_steps: int, churn: float, seed: int = 0,
            alpha: float = 0.01, n_permutations: int = 499, predict: bool = True,
            expansion: str = "lazy", cache: dict | None = None, impl=None, prefetch: str = "nearest",
            protocol: str = "default", evaluate_leaves: bool = False) -> dict:
    """Run one arm and its exactness/prediction checks; return a CSV row (dict).

    Random streams: the speculative run, its plain replicate and the permutations use the three
    children of ``SeedSequence([seed, crc32(arm.key)])``: independent replicates, never pooled.
    ``cache`` maps an effective configuration to an earlier row, so chains longer than the
    schedule (identical once truncated) are run once.  ``impl`` replaces the verifier named by
    ``arm.verifier`` with a callable (e.g. a faster exact variant); the prediction then uses its
    ``expected_acceptance`` when it has one.  ``prefetch``, ``protocol`` and ``evaluate_leaves``
    go to :func:`speculative_sample` (``protocol`` also to the plain replicate).
    """
    n_std = ChurnSchedule(n_steps, churn, protocol=protocol).n_stochastic
    effective = arm.shape.truncated(n_std)
    ckey = (arm.verifier, effective.widths, prefetch, protocol, bool(evaluate_leaves))
    base_row = {
        "key": arm.key, "verifier": arm.verifier, "base_K": arm.base[0], "base_L": arm.base[1],
        "budget": arm.budget, "widths": "-".join(map(str, arm.shape.widths)),
        "chain_length_effective": effective.depth if arm.shape.is_chain else "",
        "target_nodes_per_round": arm.shape.target_nodes, "drafted_nodes_per_round": arm.shape.drafted_nodes,
        "dim": target.dim, "n_components": target.n_components, "n_samples": n_samples,
        "n_steps": n_steps, "churn": churn, "alpha": alpha, "seed": seed, "prefetch": prefetch,
        "protocol": protocol, "evaluate_leaves": bool(evaluate_leaves),
    }
    if cache is not None and ckey in cache:
        row = dict(cache[ckey])
        row.update(base_row)
        return row
    legacy = ckey[:2] if (prefetch, protocol, bool(evaluate_leaves)) == ("parent", "default", False) else ckey
    s_spec, s_plain, s_perm = _seeds(seed, "|".join(map(str, legacy)))
    t0 = time.perf_counter()
    run = speculative_sample(target, arm.verifier if impl is None else impl, K=effective.widths, L=None, n_samples=n_samples,
                             n_steps=n_steps, churn=churn, rng=np.random.default_rng(s_spec), expansion=expansion,
                             prefetch=prefetch, protocol=protocol, evaluate_leaves=evaluate_leaves)
    wall = time.perf_counter() - t0
    reference = plain_sample(target, n_samples, n_steps, churn, rng=np.random.default_rng(s_plain), protocol=protocol)
    comp = compare_to_plain(run.samples, reference, target.means, alpha=alpha, n_permutations=n_permutations,
                            rng=np.random.default_rng(s_perm))
    row = dict(base_row)
    row.update({
        "n_standard_steps": run.n_standard_steps, "mean_target_calls": float(run.target_calls.mean()),
        "speedup": run.speedup, "speedup_se": run.speedup_se,
        "speedup_mean_of_ratios": run.speedup_mean_of_ratios,
        "speedup_mean_of_ratios_se": run.speedup_mean_of_ratios_se,
        "mean_committed_per_round": run.mean_committed_per_round,
        "acceptance_depth0": float(run.acceptance_by_depth()[0]),
        "energy_pvalue": comp.energy.pvalue, "energy_detectable_shift": comp.energy.detectable_mean_shift,
        "occupancy_pvalue": comp.occupancy.pvalue, "occupancy_detectable_shift": comp.occupancy.detectable_shift,
        "radial_pvalue": comp.radial.pvalue, "radial_detectable_ks": comp.radial.detectable_ks,
        "combined_pvalue": comp.pvalue, "exact_at_alpha": comp.passed, "wall_time_s": wall,
        "predicted_speedup": "", "prediction_z": "",
    })
    if predict:
        try:
            rule = impl if impl is not None and hasattr(impl, "expected_acceptance") else arm.verifier
            if impl is None and arm.verifier == "threshold":
                rule = snapped_threshold_verifier()   # the rule as run (snapped parameters)
            pred = predict_speedup(run, rule)
            row["predicted_speedup"] = pred.predicted_speedup
            row["prediction_z"] = pred.z
        except (ValueError, ImportError):      # no exact acceptance for this rule
            pass
    if cache is not None:
        cache[ckey] = row
    return row


def read_rows(path) -> list:
    """Rows of a sweep CSV as dicts (numbers parsed where possible); [] if absent."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            parsed = {}
            for k, v in row.items():
                try:
                    parsed[k] = float(v) if v not in ("", "True", "False") else (v == "True" if v else v)
                except ValueError:
                    parsed[k] = v
            out.append(parsed)
    return out


def run_sweep(out_dir, *, dim: int = 512, n_components: int = 5, mixture_seed: int = 0,
              shapes=((1, 3), (2, 3), (2, 5), (3, 4), (4, 3), (4, 4)),
              verifiers=("rmc", "dgrs", "rass", "threshold"), budgets=tuple(BUDGETS),
              n_samples: int = 1000, n_steps: int = 30, churn: float = 0.06, seed: int = 0,
              alpha: float = 0.01, n_permutations: int = 499, predict: bool = True,
              expansion: str = "lazy", resume: bool = True, figure: bool = True, progress=None,
              prefetch: str = "nearest", protocol: str = "default", evaluate_leaves: bool = False) -> list:
    """Run every arm, appending one CSV row per finished arm to ``out_dir/sweep_gm.csv``.

    ``prefetch``, ``protocol`` and ``evaluate_leaves`` apply to every arm (:func:`run_arm`).

    Returns the list of rows (including those found in the CSV when ``resume``).  Writes
    ``sweep_gm.png`` and ``sweep_gm.pdf`` when ``figure``.
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    ChurnSchedule(n_steps, churn, protocol=protocol)     # validates n_steps, churn and protocol before any work
    arms = build_arms(shapes, verifiers, budgets)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "sweep_gm.csv")
    if not resume and os.path.exists(path):
        os.remove(path)
    rows = read_rows(path)
    done = {r["key"] for r in rows}
    target = GaussianMixture.random(dim=dim, n_components=n_components, seed=mixture_seed)
    cache: dict = {}
    new_file = not os.path.exists(path)
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        if new_file:
            writer.writeheader()
            fh.flush()
        for arm in arms:
            if arm.key in done:
                continue
            row = run_arm(target, arm, n_samples=n_samples, n_steps=n_steps, churn=churn, seed=seed,
                          alpha=alpha, n_permutations=n_permutations, predict=predict,
                          expansion=expansion, cache=cache, prefetch=prefetch, protocol=protocol,
                          evaluate_leaves=evaluate_leaves)
            writer.writerow({k: row.get(k, "") for k in CSV_FIELDS})
            fh.flush()
            os.fsync(fh.fileno())
            rows.append(row)
            if progress is not None:
                progress(row)
    if figure and rows:
        plot_speedups(read_rows(path), os.path.join(out_dir, "sweep_gm"))
    return rows


def plot_speedups(rows, stem: str):
    """Grouped bar chart of speedups (SE bars) per ``(K, L)``; writes ``stem.png`` and ``stem.pdf``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(int(r["base_K"]), int(r["base_L"])) for r in rows})
    kinds = []
    for r in rows:
        kind = r["verifier"] if r["budget"] == "tree" else f"{r['verifier']} ({r['budget']})"
        if kind not in kinds:
            kinds.append(kind)
    width = 0.8 / max(1, len(kinds))
    fig, ax = plt.subplots(figsize=(3.2 + 1.3 * len(groups), 3.6))
    xs = np.arange(len(groups))
    for i, kind in enumerate(kinds):
        vals, errs = [], []
        for g in groups:
            match = [r for r in rows if (int(r["base_K"]), int(r["base_L"])) == g and
                     (r["verifier"] if r["budget"] == "tree" else f"{r['verifier']} ({r['budget']})") == kind]
            vals.append(float(match[0]["speedup"]) if match else np.nan)
            errs.append(float(match[0]["speedup_se"]) if match else 0.0)
        ax.bar(xs + (i - (len(kinds) - 1) / 2) * width, vals, width, yerr=errs, capsize=2, label=kind)
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"K={k}, L={l}" for k, l in groups])
    ax.set_ylabel("speedup (standard steps / target calls)")
    ax.set_title("Speculative sampling on the Gaussian mixture (bars: ±1 SE)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    for ext in ("png", "pdf"):
        fig.savefig(f"{stem}.{ext}", dpi=150)
    plt.close(fig)
    return fig
