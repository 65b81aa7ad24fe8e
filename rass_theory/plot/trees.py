"""Speedup per round that the per-node theory predicts for draft trees ``(K, L)``.

Notes
-----
A round drafts a tree of depth ``L`` whose nodes at depth ``< L`` have ``K`` children, evaluates
the target once on all internal nodes (one batched call), then walks down from the root. At each
node it reaches, the walk commits exactly one state: the accepted child (and moves on to it) or
the correction (and stops). It stops at a leaf after ``L`` commits. If the node at depth ``j``
accepts with probability ``a_j`` independently of what happened above it, the walk reaches depth
``j`` with probability ``prod_{i<j} a_i``, so the expected committed length per round is

    E[N] = sum_{j=0}^{L-1} prod_{i<j} a_i,  which for a uniform tree (a_j = a) is
    E[N] = (1 - a^L) / (1 - a)   (= L when a = 1),

and, with one target call per round against one per step for plain sampling, ``E[N]`` is the
speedup per round. It tends to ``1 / (1 - a)`` as ``L`` grows, and the tree drafts
``sum_{j=1}^{L} K^j`` nodes while the target evaluates the ``sum_{j=0}^{L-1} K^j`` internal ones.
Per-node acceptance ``a`` is ``rt.acceptance(rule, K, delta)`` at a fixed ``delta``; along real
trajectories ``delta`` varies with depth, which the general form ``a_j`` covers (issue 5 compares
this prediction with measured speedups).
"""
from __future__ import annotations

import numpy as np

from ._common import Progress, check_ints, check_K_values, rass_acceptance
from .._validation import check_delta, check_probability
from .style import OKABE_ITO, new_figure, style_context
from .table import Table

__all__ = ["expected_committed_length", "tree_speedup_data", "plot_tree_speedup"]


def expected_committed_length(acceptances) -> float:
    """Expected states committed per round, ``sum_{j<L} prod_{i<j} a_i``.

    Parameters
    ----------
    acceptances : sequence of float
        Per-depth acceptance probabilities ``a_0, ..., a_{L-1}`` (``L >= 1`` entries in [0, 1]).

    Returns
    -------
    float
        Expected committed length, between 1 and ``L``.

    Examples
    --------
    >>> expected_committed_length([0.5, 0.5, 0.5])   # (1 - 0.5**3) / (1 - 0.5)
    1.75
    """
    a = np.asarray(acceptances, dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"acceptances must be a non-empty 1-d sequence, got shape {a.shape}")
    for x in a:
        check_probability(float(x), "acceptances", open_interval=False)
    reach = np.concatenate([[1.0], np.cumprod(a[:-1])])
    return float(reach.sum())


def tree_speedup_data(K_values=(1, 2, 4, 8), L_values=(1, 2, 3, 4, 5, 6), delta=1.0,
                      rules=("dgrs", "rass"), *, progress=None) -> Table:
    """Predicted speedup per round for uniform trees ``(K, L)`` at a fixed ``delta``.

    Parameters
    ----------
    K_values, L_values : sequences of int
        Tree widths and depths.
    delta : float
        Standardised displacement at every node.
    rules : sequence of str
        Verifier rules passed to ``rt.acceptance`` (``"dgrs"``, ``"rass"``); at ``K = 1`` both
        reduce to RMC.

    Returns
    -------
    Table
        Columns ``rule``, ``K``, ``L``, ``delta``, ``node_acceptance``, ``speedup``
        (``(1 - a^L)/(1 - a)``, see module Notes), ``asymptote`` (``1/(1 - a)``),
        ``drafted_nodes`` and ``target_nodes``.
    """
    from rass_theory.optimize.dispatch import acceptance

    K_values = check_K_values(K_values)
    L_values = check_ints(L_values, "L_values")
    delta = check_delta(delta)
    rules = tuple(rules)
    for r in rules:
        if r not in ("dgrs", "rass"):
            raise ValueError(f"rules must be drawn from ('dgrs', 'rass'), got {r!r}")
    prog = Progress(len(rules) * len(K_values), progress)
    rows = []
    for rule in rules:
        for K in K_values:
            a = rass_acceptance(K, delta) if rule == "rass" else float(acceptance(rule, K, delta))
            for L in L_values:
                rows.append({
                    "rule": rule, "K": K, "L": L, "delta": delta, "node_acceptance": a,
                    "speedup": expected_committed_length([a] * L),
                    "asymptote": float("inf") if a >= 1 else 1.0 / (1.0 - a),
                    "drafted_nodes": int(sum(K ** j for j in range(1, L + 1))),
                    "target_nodes": int(sum(K ** j for j in range(L))),
                })
            prog.step()
    return Table.from_records(rows, meta={
        "description": "theory-predicted speedup per round (expected committed states per target call)",
        "formula": "E[N] = (1 - a^L) / (1 - a), a = rt.acceptance(rule, K, delta)",
        "units": {"speedup": "committed steps per target call", "delta": "dimensionless"},
    })


_K_COLOURS = [OKABE_ITO[c] for c in ("black", "orange", "sky_blue", "bluish_green", "blue",
                                     "vermillion", "reddish_purple", "yellow")]
_RULE_LS = {"dgrs": "--", "rass": "-", "rmc": ":"}
_RULE_MARK = {"dgrs": "s", "rass": "o", "rmc": "^"}
_RULE_NAME = {"dgrs": "D-GRS", "rass": "RASS", "rmc": "RMC"}


def plot_tree_speedup(table: Table, *, title: str | None = None):
    """Two panels: speedup against depth ``L``, and against drafted nodes (log scale).

    Colour encodes ``K``, line style the rule (solid RASS, dashed D-GRS).
    """
    from matplotlib.lines import Line2D

    Ks = sorted(set(int(k) for k in table["K"]))
    rules = [r for r in ("rass", "dgrs", "rmc") if r in set(table["rule"].tolist())]
    delta = float(table["delta"][0])
    with style_context():
        fig, (ax1, ax2) = new_figure(1, 2, width=8.6, height=3.7)
        for i, K in enumerate(Ks):
            colour = _K_COLOURS[i % len(_K_COLOURS)]
            for rule in rules:
                if K == 1 and rule != rules[0]:
                    continue  # every rule is RMC at K = 1: draw it once
                sub = table.where(rule=rule, K=K)
                kw = dict(color=colour, linestyle=_RULE_LS[rule], marker=_RULE_MARK[rule], markersize=3.5,
                          linewidth=1.6)
                ax1.plot(sub["L"], sub["speedup"], **kw)
                ax2.plot(sub["drafted_nodes"], sub["speedup"], **kw)
        ax1.set_xlabel("tree depth L (draft steps per round)")
        ax1.set_ylabel("predicted speedup\n(committed steps per target call)")
        ax1.set_xticks(sorted(set(int(x) for x in table["L"])))
        ax2.set_xscale("log")
        ax2.set_xlabel("drafted nodes per round (log scale)")
        ax2.set_ylabel("predicted speedup")
        k_handles = [Line2D([], [], color=_K_COLOURS[i % len(_K_COLOURS)], linewidth=2, label=f"K = {K}")
                     for i, K in enumerate(Ks)]
        r_handles = [Line2D([], [], color="#555555", linestyle=_RULE_LS[r], marker=_RULE_MARK[r],
                            markersize=3.5, label=_RULE_NAME[r]) for r in rules]
        fig.legend(handles=k_handles + r_handles, loc="outside right center")
        fig.suptitle(title or (r"Theory: speedup per round for uniform trees (K, L) at $\delta$ = "
                               f"{delta:g}" + r",  $E[N] = (1-a^L)/(1-a)$"))
    return fig
