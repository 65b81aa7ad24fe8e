"""Report section for the learned 8x8-digits flow model (torch tree sampler on a real network)."""
from __future__ import annotations

import json
from importlib import resources

import numpy as np

from ..plot.table import Table
from .context import SectionContext, SectionUnavailable
from .document import Paragraph, TableBlock

__all__ = ["section_learned", "learned_plan", "learned_arms"]


def _training_note() -> str:
    try:
        meta = json.loads((resources.files("rass_theory.models") / "data" / "digits_flow.json").read_text())
    except (OSError, ValueError):
        return ""
    return (f" The shipped weights ({meta.get('n_parameters', '?'):,} parameters, {meta.get('bytes', 0) / 1e3:.0f} kB) "
            f"were trained by `bench/train_digits.py` in {meta.get('train_seconds', '?')} s "
            f"({meta.get('steps', '?')} Adam steps, {meta.get('threads', '?')} CPU thread).")


def learned_plan(cfg) -> dict:
    """Keyword arguments of ``plot.learned.digits_speedup_data`` for the report's mode.

    Default: trees (2, 3) and (4, 3), D-GRS, RASS and the threshold policy, RMC chains, optimal_list
    appended, 1,000 trajectories per arm; quick: tree (2, 3), D-GRS and RASS, optimal_list, no RMC
    chains, 100 trajectories per arm.
    """
    if cfg.quick:
        return dict(trees=((2, 3),), verifiers=("dgrs", "rass"), rmc_chains=False,
                    appended_verifiers=("optimal_list",), n_samples=100)
    return dict(trees=((2, 3), (4, 3)), verifiers=("dgrs", "rass", "threshold"), rmc_chains=True,
                appended_verifiers=("optimal_list",), n_samples=1000)


def learned_arms(cfg) -> tuple:
    """``(arms, n)``: the speedup arms of :func:`learned_plan` and the trajectories per arm."""
    from ..plot.learned import digits_arms

    plan = learned_plan(cfg)
    arms = digits_arms(plan["trees"], plan["verifiers"], plan["rmc_chains"], plan["appended_verifiers"])
    return arms, plan["n_samples"]


def section_learned(ctx: SectionContext):
    try:
        import sklearn  # noqa: F401
        import torch

        from ..models import digits_flow
        from ..models.quality import digits_quality
    except ImportError as exc:
        raise SectionUnavailable(f"the learned-model section needs torch and scikit-learn: {exc}") from exc
    from ..diffusion.torch_sampler import plain_sample_torch
    from ..plot import learned
    from ..plot.diffusion import plot_gm_speedup
    from ..plot.exactness import derive_seed

    cfg = ctx.config
    plan = learned_plan(cfg)
    n, trees = plan["n_samples"], plan["trees"]
    model = digits_flow()
    # one intra-op thread: the model is a small MLP, and on a shared 2-core machine a second torch
    # thread more than doubled this section's wall time (measured: 75 s against 35 s, --quick)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        table, runs = learned.digits_speedup_data(**plan, seed=cfg.seed, model=model, progress=ctx.progress,
                                                  keep_runs=True)
        spec = runs[("rass", *trees[-1])]
        plain = plain_sample_torch(model, n, rng=derive_seed(cfg.seed, 4999))
    finally:
        torch.set_num_threads(threads)
    data = ctx.save_data("digits_speedup", table)
    K, L = trees[-1]
    q_plain, q_spec = digits_quality(plain, rng=cfg.seed), digits_quality(spec.samples, rng=cfg.seed)
    blocks = [Paragraph(
        "A flow-matching velocity network (MLP with a sinusoidal time embedding) trained on scikit-learn's "
        "bundled 8x8 digits (80 % training split), `rass_theory.models.digits_flow()`, sampled with the torch "
        "tree sampler (`diffusion.speculative_sample(..., backend=\"torch\")`: full tree expansion, one batched "
        f"model call per round, prefetch `nearest`), 30 steps, churn 0.06, {n} trajectories per arm."
        + _training_note())]
    grid = {"run": ["plain"] * 64 + ["speculative"] * 64, "sample": list(range(64)) * 2}
    grid.update({f"x{i}": np.r_[plain[:64, i], spec.samples[:64, i]] for i in range(64)})
    sdata = ctx.save_data("digits_samples", Table(grid, meta={"units": "normalised pixels, pixels / 8 - 1"}))
    blocks.append(ctx.save_figure(
        "digits_samples", learned.plot_sample_grids([("plain chain", plain), (f"speculative RASS K={K}, L={L}",
                                                                                spec.samples)]),
        data=sdata, alt="digit samples, plain and speculative", caption="The first 64 samples of each run (pixels 0..16)."))
    rows = [("held-out real digits", f"{q_plain.confidence_real:.3f}", f"{q_plain.class_entropy_real:.3f}",
             f"{q_plain.nn_distance_real:.3f}", f"{q_plain.c2st_accuracy_real:.3f} (training vs held-out)")]
    for label, q in (("plain chain", q_plain), (f"speculative RASS K={K}, L={L}", q_spec)):
        rows.append((label, f"{q.confidence:.3f}", f"{q.class_entropy:.3f}", f"{q.nn_distance:.3f}",
                     f"{q.c2st_accuracy:.3f}"))
    blocks.append(TableBlock(
        ("samples", "classifier confidence", "class entropy (max 2.303)", "NN distance to train", "C2ST accuracy"),
        tuple(rows), align=("l", "r", "r", "r", "r"),
        caption=f"Quality against held-out digits (logistic-regression classifier, held-out accuracy "
                f"{q_plain.classifier_accuracy:.3f}; samples rounded to the 0..16 pixel grid)."))
    blocks.append(ctx.save_figure("digits_speedup", plot_gm_speedup(table, title="Learned digits model: speedups"),
                                  data=data, alt="speedup bars",
                                  caption="Measured speedup (±1 SE) per verifier and tree on the digits model; "
                                          "diamonds: predicted from the run's own delta trace "
                                          "(`diffusion.predict_speedup`)."))
    trows = [(str(table["verifier"][i]), f"{table['K'][i]}", str(table["L"][i]), str(table["budget"][i]),
              f"{table['speedup'][i]:.3f} ± {table['speedup_se'][i]:.3f}", f"{table['predicted_speedup'][i]:.3f}",
              f"{table['z'][i]:+.2f}") for i in range(len(table["verifier"]))]
    blocks.append(TableBlock(("verifier", "K", "L", "budget", "measured", "predicted", "z"), tuple(trows),
                             align=("l", "r", "r", "l", "r", "r", "r"),
                             caption="Measured vs trace-predicted speedup (standard steps / target calls)."))
    ddata = ctx.save_data("digits_deltas", Table({"depth": spec.nodes.depth, "step": spec.nodes.step,
                                                  "delta": spec.nodes.delta, "accepted": spec.nodes.accepted},
                                                 meta={"run": f"rass K={K}, L={L}"}))
    blocks.append(ctx.save_figure("digits_deltas", learned.plot_delta_histograms(spec), data=ddata,
                                  alt="delta histograms",
                                  caption="Deltas met at each depth of the RASS tree; depth 0 is the round's root "
                                          "(nearly exact under nearest-sibling prefetching)."))
    return blocks
