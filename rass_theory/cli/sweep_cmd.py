"""``rass-theory sweep-gm``: speculative-sampling sweep on the Gaussian-mixture target."""
from __future__ import annotations

import click


def _int_list(ctx, param, value):
    try:
        out = [int(v) for v in str(value).split(",") if v.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"must be comma-separated integers, got {value!r}") from exc
    if not out or any(v < 1 for v in out):
        raise click.BadParameter(f"must be positive integers, got {value!r}")
    return out


def _str_list(ctx, param, value):
    out = [v.strip().lower() for v in str(value).split(",") if v.strip()]
    if not out:
        raise click.BadParameter("must not be empty")
    return out


@click.command("sweep-gm")
@click.option("--dim", type=click.IntRange(min=1), default=512, show_default=True,
              help="Dimension of the Gaussian-mixture target.")
@click.option("--n-components", type=click.IntRange(min=1), default=5, show_default=True,
              help="Number of isotropic mixture components (means U(-2,2)^d, sds U(0.10,0.25)).")
@click.option("--mixture-seed", type=int, default=0, show_default=True,
              help="Seed of GaussianMixture.random (which target).")
@click.option("--K", "K", callback=_int_list, default="1,2,2,3,4,4", show_default=True,
              help="Comma-separated children per node, zipped with --L (one value broadcasts).")
@click.option("--L", "L", callback=_int_list, default="3,3,5,4,3,4", show_default=True,
              help="Comma-separated tree depths, zipped with --K (one value broadcasts).")
@click.option("--verifiers", callback=_str_list, default="rmc,dgrs,rass,threshold", show_default=True,
              help="Comma-separated rules: rmc (chains matched to each tree under each budget), dgrs, rass, threshold.")
@click.option("--budgets", callback=_str_list, default="target_nodes,drafted_nodes", show_default=True,
              help="Budget matchings for the RMC chains: target_nodes (equal target-evaluated nodes per "
                   "round) and/or drafted_nodes (equal drafted nodes per round).")
@click.option("--n-samples", type=click.IntRange(min=2), default=1000, show_default=True,
              help="Trajectories per arm (and per independent plain replicate).")
@click.option("--n-steps", type=click.IntRange(min=1), default=30, show_default=True,
              help="Euler steps of the schedule (the deterministic tail is excluded from the count).")
@click.option("--churn", type=float, default=0.06, show_default=True,
              help="Churn noise eps in (0, inf): per-step noise sd (default protocol) or diffusion-coefficient scale (paper).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Root seed; each arm derives independent streams for its run, replicate and permutations.")
@click.option("--alpha", type=float, default=0.01, show_default=True,
              help="Family-wise level of each arm's exactness verdict (Bonferroni over three tests).")
@click.option("--n-permutations", type=click.IntRange(min=1), default=499, show_default=True,
              help="Permutations of the energy-distance test.")
@click.option("--expansion", type=click.Choice(["lazy", "full"]), default="lazy", show_default=True,
              help="lazy: materialise only the walked path; full: draft and evaluate whole trees. Same law.")
@click.option("--prefetch", type=click.Choice(["nearest", "parent", "none"]), default="nearest", show_default=True,
              help="Next round's frozen velocity: nearest drafted sibling (free), last verified node, or re-evaluate the root.")
@click.option("--protocol", type=click.Choice(["default", "paper"]), default="default", show_default=True,
              help="Time grid and noise law; 'paper' is the authors' published Gaussian-mixture protocol.")
@click.option("--evaluate-leaves/--no-evaluate-leaves", default=False, show_default=True,
              help="Add the leaves to each round's batched target call (a committed leaf's velocity is reused).")
@click.option("--predict/--no-predict", default=True, show_default=True,
              help="Compute the predicted speedup from exact acceptance at the deltas met.")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Keep rows already in OUT/sweep_gm.csv and skip their arms (--no-resume starts afresh).")
@click.option("--out", "out", type=click.Path(file_okay=False), required=True,
              help="Output folder: sweep_gm.csv (rows appended as arms finish), sweep_gm.png, sweep_gm.pdf.")
def sweep_gm(dim, n_components, mixture_seed, K, L, verifiers, budgets, n_samples, n_steps, churn, seed,
             alpha, n_permutations, expansion, prefetch, protocol, evaluate_leaves, predict, resume, out):
    """Measure speedups and exactness of speculative sampling arms on a Gaussian mixture.

    Every arm's row (speedup ± SE, predicted speedup, two-sample p-values against an
    independent plain replicate) is appended to the CSV as soon as it finishes.
    """
    from ..diffusion.sweep import run_sweep
    from ..diffusion.trees import BUDGETS

    if len(K) != len(L):
        if len(K) == 1:
            K = K * len(L)
        elif len(L) == 1:
            L = L * len(K)
        else:
            raise click.BadParameter(f"--K and --L must have the same length (or one value), got {len(K)} and {len(L)}",
                                     param_hint="--K/--L")
    known = {"rmc", "dgrs", "rass", "threshold", "optimal_list"}
    bad = [v for v in verifiers if v not in known]
    if bad:
        raise click.BadParameter(f"unknown verifier(s) {bad}; choose from {sorted(known)}", param_hint="--verifiers")
    bad = [b for b in budgets if b not in BUDGETS]
    if bad:
        raise click.BadParameter(f"unknown budget(s) {bad}; choose from {sorted(BUDGETS)}", param_hint="--budgets")
    if not churn > 0 or churn != churn or churn == float("inf"):
        raise click.BadParameter(f"must lie in (0, inf), got {churn}", param_hint="--churn")
    if not 0 < alpha < 1:
        raise click.BadParameter(f"must lie in (0, 1), got {alpha}", param_hint="--alpha")

    def progress(row):
        click.echo(f"{row['key']:<42} speedup {float(row['speedup']):.3f} ± {float(row['speedup_se']):.3f}"
                   f"  p={float(row['combined_pvalue']):.3g}")

    rows = run_sweep(out, dim=dim, n_components=n_components, mixture_seed=mixture_seed,
                     shapes=list(zip(K, L)), verifiers=verifiers, budgets=budgets, n_samples=n_samples,
                     n_steps=n_steps, churn=churn, seed=seed, alpha=alpha, n_permutations=n_permutations,
                     predict=predict, expansion=expansion, resume=resume, progress=progress, prefetch=prefetch,
                     protocol=protocol, evaluate_leaves=evaluate_leaves)
    click.echo(f"{len(rows)} rows in {out}/sweep_gm.csv")
