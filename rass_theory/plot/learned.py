"""The learned 8x8-digits model: speedup runs, sample grids, delta histograms per depth.

Data come from :func:`digits_speedup_data`, which runs the torch tree sampler
(:func:`rass_theory.diffusion.torch_sampler.speculative_sample_torch`) on the shipped
:func:`rass_theory.models.digits_flow` model and predicts every arm's speedup from its own delta
trace with :func:`rass_theory.diffusion.predict_speedup`.  Speedup bars reuse
:func:`rass_theory.plot.diffusion.plot_gm_speedup`.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .._validation import check_positive_int
from ._common import Progress, tile_images
from .exactness import derive_seed
from .style import new_figure, style_context
from .table import Table

__all__ = ["digits_speedup_data", "digits_arms", "snapped_threshold_prediction", "plot_sample_grids",
           "plot_delta_histograms"]


def digits_arms(trees=((2, 3), (4, 3)), verifiers=("dgrs", "rass", "threshold"), rmc_chains=True,
                appended_verifiers=()):
    """Arms ``(verifier, K, L, budget)``: each verifier on each tree, and RMC chains.

    RMC (single draft, ``K = 1``) runs as a chain of the tree's depth (``budget="tree"``) and as the
    chain with as many target-evaluated nodes per round as the tree (``1 + K + ... + K^(L-1)``,
    ``budget="target_nodes"``), the papers' budget matching.  The tree arms of
    ``appended_verifiers`` (verifiers added to a published sweep) come after the RMC chains, so
    every earlier arm keeps its position ``j`` and with it its seed in :func:`digits_speedup_data`.
    """
    from ..diffusion import TreeShape, matched_chain

    arms = []
    for K, L in trees:
        for v in verifiers:
            arms.append((v, int(K), int(L), "tree"))
    if rmc_chains:
        depths = sorted({int(L) for _, L in trees})
        for L in depths:
            arms.append(("rmc", 1, L, "tree"))
        for K, L in trees:
            chain = matched_chain(TreeShape.uniform(int(K), int(L)), "target_nodes")
            arms.append(("rmc", 1, chain.depth, "target_nodes"))
    for K, L in trees:
        for v in appended_verifiers:
            arms.append((v, int(K), int(L), "tree"))
    return list(dict.fromkeys(arms))


def digits_speedup_data(*, trees=((2, 3), (4, 3)), verifiers=("dgrs", "rass", "threshold"), rmc_chains=True,
                        appended_verifiers=(), only_verifiers=None, n_samples=1000, n_steps=30, churn=0.06,
                        prefetch="nearest", seed=0, device="cpu", model=None, progress=None, keep_runs=False):
    """Run every arm on the digits model; measured and trace-predicted speedups.

    Arm ``j`` of :func:`digits_arms` ``(trees, verifiers, rmc_chains, appended_verifiers)`` uses
    seed ``derive_seed(seed, 4000 + j)``.  With ``only_verifiers`` (names) only those verifiers'
    arms run, each with the seed it has in the full sweep, so a subset rerun reproduces (or
    extends) the full sweep's rows.

    Returns
    -------
    Table or (Table, dict)
        Columns ``verifier, K, L, budget, speedup, speedup_se, predicted_speedup, z,
        speedup_mean_of_ratios, acceptance_depth0, wall_s, n_samples``; with ``keep_runs`` also
        ``{(verifier, K, L): SpeculativeResult}``.
    """
    from ..diffusion import predict_speedup
    from ..diffusion.torch_sampler import resolve_torch_verifier, speculative_sample_torch
    from ..models import digits_flow

    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    model = digits_flow(device=device) if model is None else model
    arms = list(enumerate(digits_arms(trees, verifiers, rmc_chains, appended_verifiers)))
    if only_verifiers is not None:
        only = {str(v) for v in ([only_verifiers] if isinstance(only_verifiers, str) else only_verifiers)}
        missing = only - {a[1][0] for a in arms}
        if missing:
            raise ValueError(f"only_verifiers: {sorted(missing)} have no arm in this sweep")
        arms = [a for a in arms if a[1][0] in only]
    prog = Progress(len(arms), progress)
    rows, runs = [], {}
    for j, (v, K, L, budget) in arms:
        t0 = time.perf_counter()
        run = speculative_sample_torch(model, v, K=K, L=L, n_samples=n_samples, n_steps=n_steps, churn=churn,
                                       rng=derive_seed(seed, 4000 + j), prefetch=prefetch)
        wall = time.perf_counter() - t0
        if v == "threshold":     # runs snap the policy's parameters to a delta grid: predict that policy
            predicted = snapped_threshold_prediction(run, resolve_torch_verifier(v, K))
        else:
            predicted = predict_speedup(run).predicted_speedup
        rows.append({"verifier": v, "K": str(K), "L": L, "budget": budget, "speedup": run.speedup,
                     "speedup_se": run.speedup_se, "predicted_speedup": float(predicted),
                     "z": float((run.speedup - predicted) / run.speedup_se),
                     "speedup_mean_of_ratios": run.speedup_mean_of_ratios,
                     "acceptance_depth0": float(run.acceptance_by_depth()[0]), "wall_s": wall,
                     "n_samples": n_samples})
        if keep_runs:
            runs[(v, K, L)] = run
        prog.step()
    table = Table.from_records(rows, meta={"model": "digits_flow", "n_steps": n_steps, "churn": churn,
                                           "prefetch": prefetch, "seed": seed, "device": str(device)})
    return (table, runs) if keep_runs else table


def snapped_threshold_prediction(run, policy, K=None, L=None) -> float:
    """Predicted speedup of the grid-snapped threshold policy from a run's delta trace.

    Every recorded node gets its acceptance under the snapped policy the runs use
    (``policy.acceptance_array``); ``K, L`` give another tree shape (default: the run's), read
    as ``diffusion.predict_speedup`` reads it.  ``diffusion.predict_speedup(run, "threshold")``
    predicts the per-delta optimal policy (an upper bound), and ``predict_speedup(run, policy)``
    interpolates the policy's acceptance on a 0.1 grid across the jumps it has at the snapping
    grid points; both are biased for snapped runs.  The dynamic programme
    (``diffusion.theory.expected_calls`` on the trace's cell means) is the same.
    """
    from ..diffusion import TreeShape
    from ..diffusion.theory import expected_calls
    from ..diffusion.traces import DeltaTrace

    trace = run if isinstance(run, DeltaTrace) else DeltaTrace.from_run(run)
    shape = TreeShape(trace.widths) if K is None else TreeShape.from_spec(K, L)
    widths = np.asarray(shape.widths)[np.minimum(trace.depth, shape.depth - 1)]
    alpha = np.empty(trace.delta.shape)
    for Kj in np.unique(widths):
        m = widths == Kj
        alpha[m] = policy.acceptance_array(int(Kj), trace.delta[m])
    total = expected_calls(trace.cell_means(alpha, shape.depth), n_std=trace.n_std, prefetch=trace.prefetch,
                           evaluate_leaves=trace.evaluate_leaves, draft=trace.draft)
    return float(trace.n_std / total)


def _mosaic(samples, n_side):
    from ..models.digits import to_pixels

    return tile_images(to_pixels(np.asarray(samples, dtype=float)[: n_side * n_side]).reshape(-1, 8, 8), n_side)


def plot_sample_grids(panels, *, n_side: int = 8):
    """One mosaic of ``n_side^2`` digits per ``(title, samples)`` panel (normalised 64-dim states)."""
    panels = list(panels)
    with style_context():
        fig, axes = new_figure(1, len(panels), width=2.6 * len(panels), height=2.9, squeeze=False)
        for ax, (title, samples) in zip(axes[0], panels):
            ax.imshow(_mosaic(samples, n_side), cmap="gray_r", vmin=0, vmax=16, interpolation="nearest")
            ax.set_title(title)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
    return fig


def plot_delta_histograms(run, *, title: str | None = None):
    """Histogram of the recorded deltas at each tree depth, with the acceptance rate per depth."""
    deltas = run.deltas_by_depth()
    acc = run.acceptance_by_depth()
    with style_context():
        fig, ax = new_figure(1, 1, width=5.2, height=3.2)
        top = max((float(np.quantile(d, 0.995)) for d in deltas if d.size), default=1.0)
        bins = np.linspace(0.0, max(top, 1e-3), 41)
        for j, d in enumerate(deltas):
            if d.size:
                ax.hist(np.clip(d, 0, bins[-1]), bins=bins, histtype="step", linewidth=1.3, density=True,
                        label=f"depth {j}: n = {d.size:,}, median {np.median(d):.2f}, accepted {acc[j]:.2f}")
        ax.set_xlabel("delta = ||mu_target - mu_draft|| / sigma")
        ax.set_ylabel("density")
        ax.legend(loc="upper right")
        if title:
            ax.set_title(title)
        elif math.isfinite(run.speedup):
            ax.set_title(f"{run.verifier} {run.shape.label()}: deltas met per depth")
    return fig
