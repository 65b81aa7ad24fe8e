"""Gaussian-mixture speedup bars (``proofs/P9-tree-exactness.md``).

Speedup is standard steps divided by target calls per trajectory (one batched call per round),
as ``rass_theory.diffusion.speculative_sample`` reports it with its standard error. The data come
from the CSV of ``rass-theory sweep-gm`` or from :func:`embedded_sweep`, a small version of the
authors' setting (5 isotropic components, 30 Euler steps, churn 0.06, frozen-velocity draft).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from ._common import Progress
from .._validation import check_positive_int
from .exactness import derive_seed
from .style import RULE_LABEL, RULE_STYLE, new_figure, style_context
from .table import Table

__all__ = ["read_sweep_csv", "embedded_sweep", "plot_gm_speedup"]

_VERIFIER_COLS = ("verifier", "rule", "arm", "method")
_SE_COLS = ("speedup_se", "se", "speedup_stderr")
_K_COLS = ("K", "base_K")
_L_COLS = ("L", "base_L")
_PRED_COLS = ("predicted_speedup", "predicted")


def read_sweep_csv(path) -> Table:
    """Read a speedup CSV such as ``rass-theory sweep-gm`` writes.

    Required columns: ``verifier`` (or ``rule``/``arm``), ``K`` (or ``base_K``), ``L`` (or
    ``base_L``) and ``speedup``. Optional: ``speedup_se`` (or ``se``), ``predicted_speedup``
    (drawn as a marker) and ``budget`` (one panel per budget matching). ``K`` is kept as text.
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            records = list(csv.DictReader(fh))
    except OSError as exc:
        raise ValueError(f"gm_csv {str(path)!r} cannot be read: {exc.strerror or exc}") from exc
    if not records:
        raise ValueError(f"gm_csv {str(path)!r} holds no rows")
    cols = set(records[0])
    vcol = next((c for c in _VERIFIER_COLS if c in cols), None)
    kcol = next((c for c in _K_COLS if c in cols), None)
    lcol = next((c for c in _L_COLS if c in cols), None)
    pcol = next((c for c in _PRED_COLS if c in cols), None)
    missing = ([] if kcol else ["K"]) + ([] if lcol else ["L"]) + ([] if "speedup" in cols else ["speedup"]) + (
        [] if vcol else ["verifier"])
    if missing:
        raise ValueError(f"gm_csv {str(path)!r} lacks column(s) {missing}; it has {sorted(cols)}")
    secol = next((c for c in _SE_COLS if c in cols), None)
    rows = []
    for i, r in enumerate(records):
        try:
            speedup = float(r["speedup"])
            se = float(r[secol]) if secol and r[secol] not in ("", None) else math.nan
            pred = float(r[pcol]) if pcol and r[pcol] not in ("", None) else math.nan
            L = int(float(r[lcol]))
        except ValueError:
            raise ValueError(f"gm_csv {str(path)!r} row {i + 2}: speedup/L/se must be numbers, got {r}") from None
        rows.append({"verifier": r[vcol].strip().lower().replace("-", ""), "K": str(r[kcol]).strip(), "L": L,
                     "speedup": speedup, "speedup_se": se, "predicted_speedup": pred,
                     "budget": str(r.get("budget", "") or "")})
    return Table.from_records(rows, meta={"source": str(path)})


def embedded_sweep(*, dim=64, n_samples=400, trees=((1, 3), (2, 3), (4, 3)),
                   verifiers=("dgrs", "rass"), n_components=5, n_steps=30, churn=0.06, seed=0,
                   progress=None) -> Table:
    """Run a small speedup sweep with ``rass_theory.diffusion.speculative_sample``.

    ``K = 1`` trees run RMC (every rule reduces to it); wider trees run each of ``verifiers``
    (``"threshold"`` is allowed but slow: its policy is optimised per node delta).
    Arm ``j`` uses seed ``derive_seed(seed, 3000 + j)``; the target is
    ``GaussianMixture.random(dim, n_components, seed)``.

    Returns
    -------
    Table
        ``verifier``, ``K``, ``L``, ``speedup``, ``speedup_se``, ``budget`` (empty), ``dim``,
        ``n_samples``.
    """
    from rass_theory import diffusion

    dim = check_positive_int(dim, "dim", minimum=1)
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    tgt = diffusion.GaussianMixture.random(dim=dim, n_components=n_components, seed=seed)
    arms = []
    for K, L in trees:
        for v in (("rmc",) if K == 1 else verifiers):
            arms.append((v, int(K), int(L)))
    prog = Progress(len(arms), progress)
    rows = []
    for j, (v, K, L) in enumerate(arms):
        run = diffusion.speculative_sample(tgt, v, K=K, L=L, n_samples=n_samples, n_steps=n_steps, churn=churn,
                                           rng=derive_seed(seed, 3000 + j))
        rows.append({"verifier": v, "K": str(K), "L": L, "speedup": float(run.speedup),
                     "speedup_se": float(getattr(run, "speedup_se", math.nan)), "predicted_speedup": math.nan,
                     "budget": "",
                     "dim": dim, "n_samples": n_samples})
        prog.step()
    return Table.from_records(rows, meta={"source": "embedded sweep", "dim": dim, "n_components": n_components,
                                          "n_steps": n_steps, "churn": churn, "seed": seed})


def _panels(table: Table):
    """Panels as (title, sub-table). ``sweep-gm`` marks tree arms ``budget="tree"`` and RMC chains
    with the budget matching they were sized under; each matching gets a panel with the trees."""
    if "budget" not in table.names:
        return [("", table)]
    budgets = list(dict.fromkeys(table["budget"].tolist()))
    matchings = [b for b in budgets if b not in ("", "tree")]
    if not matchings:
        return [("", table)]
    shared = [b for b in budgets if b in ("", "tree")]
    out = []
    for b in matchings:
        mask = np.isin(table["budget"], [b] + shared)
        out.append((f"RMC chains matched on {b.replace('_', ' ')}" if shared else f"budget: {b}",
                    Table({k: v[mask] for k, v in table.columns.items()}, table.meta)))
    return out


def plot_gm_speedup(table: Table, *, title: str | None = None):
    """Grouped bars: speedup per tree ``(K, L)`` (groups) and verifier (bars), ±1 standard error.

    When the table carries budget matchings (the ``budget`` column of ``sweep-gm``: ``"tree"``
    for tree arms, a matching name for the RMC chains sized to each tree), there is one panel per
    matching, each with the tree arms and the chains matched under it. Diamonds mark the
    speedup predicted from per-node acceptance where the table has it.
    """
    order = [v for v in ("rmc", "dgrs", "rass", "threshold", "resample") if v in set(table["verifier"].tolist())]
    order += [v for v in dict.fromkeys(table["verifier"].tolist()) if v not in order]
    panels = _panels(table)
    with style_context():
        groups_all = list(dict.fromkeys(zip(table["K"].tolist(), table["L"].tolist())))
        fig, axes = new_figure(len(panels), 1, width=max(4.5, 1.1 * len(groups_all) + 2.0),
                               height=3.1 * len(panels) + 0.8, sharey=True, squeeze=False)
        axes = axes.T
        handles = {}
        for ax, (panel_title, sub) in zip(axes[0], panels):
            groups = list(dict.fromkeys(zip(sub["K"].tolist(), sub["L"].tolist())))
            for gi, (K, L) in enumerate(groups):
                in_group = sub.where(K=K, L=L)
                present = [v for v in order if v in set(in_group["verifier"].tolist())]
                width = min(0.8 / max(len(present), 1), 0.27)
                for vi, v in enumerate(present):
                    i = int(np.flatnonzero(in_group["verifier"] == v)[0])
                    x = gi + (vi - (len(present) - 1) / 2) * width
                    y, e = float(in_group["speedup"][i]), float(in_group["speedup_se"][i])
                    style = RULE_STYLE.get(v, RULE_STYLE["mutant"])
                    bar = ax.bar([x], [y], width=width * 0.92, color=style["color"],
                                 yerr=[0.0 if math.isnan(e) else e], capsize=2, error_kw={"linewidth": 0.9})
                    top = y + (0 if math.isnan(e) else e)
                    handles.setdefault(v, bar.patches[0])
                    if "predicted_speedup" in in_group.names and np.isfinite(in_group["predicted_speedup"][i]):
                        pred = float(in_group["predicted_speedup"][i])
                        mk = ax.plot([x], [pred], marker="D", markersize=4.5, color="black",
                                     markerfacecolor="white", linestyle="none", zorder=5)[0]
                        handles.setdefault("_theory", mk)
                        top = max(top, pred)
                    ax.annotate(f"{y:.2f}", (x, top), xytext=(0, 4), textcoords="offset points", ha="center",
                                va="bottom", fontsize=7)
            ax.axhline(1.0, color="black", linewidth=0.7)
            ax.set_xticks(range(len(groups)), [f"K={K}\nL={L}" for K, L in groups])
            ax.set_xlabel("draft tree (width K, depth L)")
            ax.grid(axis="x", visible=False)
            ax.margins(y=0.08)
            if panel_title:
                ax.set_title(panel_title)
        for ax in axes[0]:
            ax.set_ylabel("speedup\n(standard steps / target calls)")
        labels = ["theory (per-node acceptance)" if v == "_theory" else
                  RULE_LABEL.get(v, v).replace(" (optimal weights)", "").replace(" (K = 1)", "") for v in handles]
        ncols = max(1, min(len(labels), int(fig.get_figwidth() // 1.9)))  # long labels: keep inside the figure
        fig.legend(list(handles.values()), labels, loc="outside lower center", ncols=ncols)
        meta = table.meta
        default = "Gaussian-mixture speedups" + (f" (d = {meta['dim']}, embedded sweep)" if "dim" in meta else "")
        fig.suptitle(title or default)
    return fig
