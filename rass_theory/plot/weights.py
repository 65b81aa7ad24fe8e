"""Optimal RASS rank weights as a function of delta.

Notes
-----
``w*(K, delta) = argmin_{w in simplex} TV(g_w, f)`` with
``g_w(s) = phi(s) sum_j w_j K!/(j!(K-1-j)!) Phi(s)^j (1 - Phi(s))^(K-1-j)`` and
``f(s) = phi(s - delta)`` (convexity and the LP dual certificate: ``proofs/P4-weight-program.md``).
Ranks are ascending in ``s``: rank ``K-1`` is the child furthest toward the target. At
``delta = 0`` the uniform weights are optimal (they give ``g_w = phi = f``, acceptance 1); as
``delta`` grows the mass moves to the top ranks.
"""
from __future__ import annotations

import numpy as np

from ._common import Progress, check_deltas, check_K_values, optimal_weights_cached
from .style import panel_grid, style_context
from .table import Table

__all__ = ["optimal_weights_data", "plot_optimal_weights"]


def optimal_weights_data(K_values=(2, 4, 8), deltas=None, *, progress=None) -> Table:
    """Optimal rank weights on a grid, from ``rt.optimal_rank_weights`` (memoised per cell).

    Parameters
    ----------
    K_values : sequence of int
        Children per node (``K = 1`` is trivial and allowed).
    deltas : array_like, optional
        Grid in ``[0, 40]``; default 0 to 4 in steps of 1/8.

    Returns
    -------
    Table
        Long format, one row per ``(K, delta, rank)``: ``K``, ``delta``, ``rank`` (0 = lowest
        ``s``), ``weight``, and per ``(K, delta)`` the solver's ``acceptance``, ``tv``,
        ``status`` and certified ``gap`` (NaN where the result has no ``gap``).
    """
    from .theory import DEFAULT_DELTAS

    K_values = check_K_values(K_values)
    deltas = DEFAULT_DELTAS if deltas is None else check_deltas(deltas)
    prog = Progress(len(K_values) * len(deltas), progress)
    rows = []
    for K in K_values:
        for d in deltas:
            res = optimal_weights_cached(K, float(d))
            w = np.asarray(res.weights, dtype=float)
            if w.shape != (K,) or not np.all(np.isfinite(w)) or abs(w.sum() - 1) > 1e-6:
                raise ValueError(f"optimal_rank_weights({K}, {d}) returned weights off the simplex: {w}")
            gap = float(getattr(res, "gap", float("nan")))
            for j, wj in enumerate(w):
                rows.append({"K": K, "delta": float(d), "rank": j, "weight": float(wj),
                             "acceptance": float(res.acceptance), "tv": float(res.tv),
                             "status": str(res.status), "gap": gap})
            prog.step()
    return Table.from_records(rows, meta={
        "description": "optimal RASS rank weights (ascending ranks: rank K-1 is furthest toward the target)",
        "units": {"delta": "dimensionless", "weight": "probability", "acceptance": "probability"},
    })


def plot_optimal_weights(table: Table, *, title: str | None = None):
    """Stacked areas of the optimal weights against delta, one panel per ``K``.

    Colour runs along the colour-blind-safe ``cividis`` map from the lowest rank (dark) to the
    top rank (light), so panels with different ``K`` read the same way.
    """
    import matplotlib as mpl

    Ks = sorted(set(int(k) for k in table["K"]) - {1}) or [1]
    cmap = mpl.colormaps["cividis"]
    with style_context():
        fig, axes = panel_grid(len(Ks), panel_width=2.5, panel_height=2.6, pad_width=1.2, pad_height=0.6,
                               xlabel=r"$\delta$ (dimensionless)", ylabel="cumulative rank weight")
        for ax, K in zip(axes.flat, Ks):
            sub = table.where(K=K)
            deltas = np.unique(sub["delta"])
            W = np.zeros((K, deltas.size))
            for i, d in enumerate(deltas):
                rows = sub.where(delta=d)
                W[rows["rank"].astype(int), i] = rows["weight"]
            colours = [cmap(0.05 + 0.9 * j / max(K - 1, 1)) for j in range(K)]
            ax.stackplot(deltas, W, colors=colours, edgecolor="white", linewidth=0.3)
            ax.set_title(f"K = {K}")
            ax.set_xlim(deltas.min(), deltas.max())
            ax.set_ylim(0, 1)
            ax.grid(False)
        sm = mpl.cm.ScalarMappable(norm=mpl.colors.Normalize(0, 1), cmap=cmap)
        cbar = fig.colorbar(sm, ax=axes, location="right", shrink=0.9, aspect=25)
        cbar.set_label("rank position j/(K−1)\n0 = lowest s, 1 = nearest the target")
        fig.suptitle(title or "Optimal RASS rank weights " + r"$w^*(K,\delta)$ (stacked, ascending ranks)")
    return fig
