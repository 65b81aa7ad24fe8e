"""Gaussian-mixture speedup bars (DESIGN section 3, issue 5).

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


def read_sweep_csv(path) -> Table:
    """Read a speedup CSV: columns ``verifier`` (or ``rule``/``arm``), ``K``, ``L``, ``speedup``.

    Optional columns: ``speedup_se`` (or ``se``) and ``budget`` (panels, one per budget matching).
    Rows whose ``K`` is not an integer (per-depth widths such as ``"2-2-1"``) keep it as text.
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
    missing = [c for c in ("K", "L", "speedup") if c not in cols] + ([] if vcol else ["verifier"])
    if missing:
        raise ValueError(f"gm_csv {str(path)!r} lacks column(s) {missing}; it has {sorted(cols)}")
    secol = next((c for c in _SE_COLS if c in cols), None)
    rows = []
    for i, r in enumerate(records):
        try:
            speedup = float(r["speedup"])
            se = float(r[secol]) if secol and r[secol] not in ("", None) else math.nan
            L = int(float(r["L"]))
        except ValueError:
            raise ValueError(f"gm_csv {str(path)!r} row {i + 2}: speedup/L/se must be numbers, got {r}") from None
        K = r["K"]
        rows.append({"verifier": r[vcol].strip().lower().replace("-", ""), "K": str(K).strip(), "L": L,
                     "speedup": speedup, "speedup_se": se, "budget": str(r.get("budget", "") or "")})
    return Table.from_records(rows, meta={"source": str(path)})


def embedded_sweep(*, dim=64, n_samples=400, trees=((1, 3), (2, 3), (4, 3)),
                   verifiers=("dgrs", "rass", "threshold"), n_components=5, n_steps=30, churn=0.06, seed=0,
                   progress=None) -> Table:
    """Run a small speedup sweep with ``rass_theory.diffusion.speculative_sample``.

    ``K = 1`` trees run RMC (every rule reduces to it); wider trees run each of ``verifiers``.
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
                     "speedup_se": float(getattr(run, "speedup_se", math.nan)), "budget": "",
                     "dim": dim, "n_samples": n_samples})
        prog.step()
    return Table.from_records(rows, meta={"source": "embedded sweep", "dim": dim, "n_components": n_components,
                                          "n_steps": n_steps, "churn": churn, "seed": seed})


def plot_gm_speedup(table: Table, *, title: str | None = None):
    """Grouped bars: speedup per tree ``(K, L)`` (groups) and verifier (bars), ±1 standard error.

    One panel per ``budget`` value when the table has several.
    """
    budgets = list(dict.fromkeys(table["budget"].tolist())) if "budget" in table.names else [""]
    order = [v for v in ("rmc", "dgrs", "rass", "threshold", "resample") if v in set(table["verifier"].tolist())]
    order += [v for v in dict.fromkeys(table["verifier"].tolist()) if v not in order]
    with style_context():
        groups_all = list(dict.fromkeys(zip(table["K"].tolist(), table["L"].tolist())))
        fig, axes = new_figure(1, len(budgets), width=max(4.5, 0.9 * len(groups_all) + 2.5) * len(budgets) ** 0.8,
                               height=3.8, sharey=True, squeeze=False)
        width = 0.8 / max(len(order), 1)
        for ax, budget in zip(axes[0], budgets):
            sub = table.where(budget=budget) if "budget" in table.names else table
            groups = list(dict.fromkeys(zip(sub["K"].tolist(), sub["L"].tolist())))
            for vi, v in enumerate(order):
                xs, ys, es = [], [], []
                for gi, (K, L) in enumerate(groups):
                    m = (sub["verifier"] == v) & (sub["K"] == K) & (sub["L"] == L)
                    if np.any(m):
                        i = int(np.flatnonzero(m)[0])
                        xs.append(gi + (vi - (len(order) - 1) / 2) * width)
                        ys.append(sub["speedup"][i])
                        es.append(sub["speedup_se"][i])
                if not xs:
                    continue
                style = RULE_STYLE.get(v, RULE_STYLE["mutant"])
                es = np.nan_to_num(np.asarray(es, dtype=float), nan=0.0)
                ax.bar(xs, ys, width=width * 0.95, color=style["color"], label=RULE_LABEL.get(v, v).replace(
                    " (optimal weights)", "").replace(" (K = 1)", ""), yerr=es, capsize=2,
                    error_kw={"linewidth": 0.9})
            ax.axhline(1.0, color="black", linewidth=0.7)
            ax.set_xticks(range(len(groups)), [f"K={K}\nL={L}" for K, L in groups])
            ax.set_xlabel("draft tree (width K, depth L)")
            ax.grid(axis="x", visible=False)
            if budget:
                ax.set_title(f"budget: {budget}")
        axes[0, 0].set_ylabel("speedup (standard steps / target calls)")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=len(labels))
        meta = table.meta
        default = "Gaussian-mixture speedups" + (f" (d = {meta['dim']}, embedded sweep)" if "dim" in meta else "")
        fig.suptitle(title or default)
    return fig
