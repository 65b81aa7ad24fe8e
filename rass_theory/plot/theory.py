"""Acceptance of each rule against delta, and its gap to the list-coupling bound.

Notes
-----
All values are exact (no Monte Carlo): ``rt.acceptance`` for RMC (``2 Phi(-delta/2)``, proof
``proofs/P-rmc``), D-GRS (``1 - prod_k Z_k``, closed-form residual masses) and RASS with optimal
rank weights (``1 - TV(g_w*, f)``); the value-aware threshold policy from
``rass_theory.optimize.policies.optimal_threshold_policy``; the optimal list rule
(``rt.acceptance("optimal_list", ...)``, which attains the bound,
``proofs/P10-optimal-list-rule.md``); the bound
``alpha*(K, delta) = min_t [Phi(t - delta) + 1 - Phi(t)^K]`` from ``rt.acceptance_bound``.
See ``proofs/`` (P2, P3, P5, P6, P7) for the statements.
"""
from __future__ import annotations

import numpy as np

from ._common import Progress, check_deltas, check_K_values
from .style import RULE_LABEL, panel_grid, rule_style, style_context
from .table import Table

__all__ = ["ACCEPTANCE_RULES", "DEFAULT_DELTAS", "acceptance_data", "gap_data", "plot_acceptance",
           "plot_gap_to_bound", "acceptance_summary"]

#: Rules :func:`acceptance_data` knows, in legend order.
ACCEPTANCE_RULES = ("rmc", "dgrs", "rass", "threshold", "optimal_list", "bound")
#: Default delta grid: 0 to 4 in steps of 1/8 (contains 0.25, 0.5, 1, 1.5, 2).
DEFAULT_DELTAS = np.round(np.arange(0, 4.0001, 0.125), 10)

DELTA_LABEL = r"standardised displacement $\delta = \|\mu_{\rm target}-\mu_{\rm draft}\|/\sigma$"


def _rule_function(rule):
    """Return ``f(K, delta) -> float`` for a rule name (imports lazily)."""
    from rass_theory.exact import acceptance_bound as bound
    from rass_theory.optimize.dispatch import acceptance as acc

    if rule == "rmc":
        return lambda K, delta: acc("rmc", 1, delta)
    if rule == "dgrs":
        return lambda K, delta: acc("dgrs", K, delta)
    if rule == "rass":
        from ._common import rass_acceptance

        return rass_acceptance
    if rule == "optimal_list":
        return lambda K, delta: acc("optimal_list", K, delta)
    if rule == "bound":
        return lambda K, delta: bound(K, delta)
    if rule == "threshold":
        from rass_theory.optimize.policies import optimal_threshold_policy

        return lambda K, delta: optimal_threshold_policy(K, delta).acceptance
    raise ValueError(f"rules must be drawn from {ACCEPTANCE_RULES}, got {rule!r}")


def acceptance_data(K_values=(1, 2, 4, 8), deltas=None, rules=ACCEPTANCE_RULES, *, progress=None) -> Table:
    """Exact acceptance probability of each rule on a grid of ``K`` and ``delta``.

    Parameters
    ----------
    K_values : sequence of int
        Children per node (each ``1 <= K <= 64``).
    deltas : array_like, optional
        Grid of standardised displacements in ``[0, 40]``; default :data:`DEFAULT_DELTAS`.
    rules : sequence of str
        Subset of :data:`ACCEPTANCE_RULES`. ``"rmc"`` is the single-draft rule and is evaluated
        at ``K = 1`` for every panel (a reference line).
    progress : callable, optional
        Called as ``progress(done, total)``.

    Returns
    -------
    Table
        Columns ``rule``, ``K``, ``delta``, ``acceptance`` (a probability).

    Notes
    -----
    RMC: ``2 Phi(-delta/2)``. D-GRS: ``1 - prod_{k=1}^K Z_k`` with the closed-form masses of the
    recursive residuals. RASS: ``1 - TV(g_w, f)`` at the optimal weights. Bound:
    ``min_t [Phi(t - delta) + 1 - Phi(t)^K]``. Every rule satisfies ``acceptance <= bound`` and the
    bound equals RMC at ``K = 1`` (``proofs/``).
    """
    K_values = check_K_values(K_values)
    deltas = DEFAULT_DELTAS if deltas is None else check_deltas(deltas)
    rules = tuple(rules)
    funcs = {r: _rule_function(r) for r in rules}
    work = [(r, K) for r in rules for K in K_values]
    prog = Progress(len(work) * len(deltas), progress)
    rows = []
    cache = {}
    for rule, K in work:
        for d in deltas:
            key = (rule, 1 if rule == "rmc" else K, float(d))
            if key not in cache:
                val = float(funcs[rule](key[1], float(d)))
                if not np.isfinite(val):
                    raise FloatingPointError(f"{rule} acceptance at K={K}, delta={d} is {val}")
                cache[key] = val
            rows.append({"rule": rule, "K": K, "delta": float(d), "acceptance": cache[key]})
            prog.step()
    return Table.from_records(rows, meta={
        "description": "exact acceptance probability per node",
        "units": {"delta": "dimensionless (||mu_target - mu_draft|| / sigma)", "acceptance": "probability"},
        "rmc_note": "rmc is the K = 1 rule, repeated for every K as a reference",
    })


def gap_data(acceptance: Table) -> Table:
    """Gap ``bound - acceptance`` for every rule of an :func:`acceptance_data` table.

    Needs the ``"bound"`` rule in the table; the RMC reference and the bound itself are omitted.
    """
    if "bound" not in set(acceptance["rule"].tolist()):
        raise ValueError("acceptance must contain the 'bound' rule to compute gaps")
    bound = {(int(k), float(d)): float(a) for k, d, a in zip(
        acceptance.where(rule="bound")["K"], acceptance.where(rule="bound")["delta"],
        acceptance.where(rule="bound")["acceptance"])}
    rows = []
    for rec in acceptance.records():
        if rec["rule"] in ("bound", "rmc"):
            continue
        b = bound[(rec["K"], rec["delta"])]
        rows.append({"rule": rec["rule"], "K": rec["K"], "delta": rec["delta"], "bound": b,
                     "acceptance": rec["acceptance"], "gap": b - rec["acceptance"]})
    if not rows:
        raise ValueError("acceptance holds no rule other than 'rmc' and 'bound'")
    return Table.from_records(rows, meta={"description": "bound minus acceptance",
                                          "units": {"gap": "probability"}})


def _rules_in(table):
    present = set(table["rule"].tolist())
    return [r for r in ACCEPTANCE_RULES if r in present]


def _rule_panels(table, Ks, column, *, panel_height, ylabel, title, decorate):
    """One panel per ``K`` of ``column`` against delta for every rule (threshold with markers).

    ``decorate(ax)`` finishes each panel; one legend below the panels.
    """
    rules = _rules_in(table)
    with style_context():
        fig, axes = panel_grid(len(Ks), panel_width=2.3, panel_height=panel_height, pad_width=0.6, pad_height=0.7,
                               xlabel=r"$\delta$ (dimensionless)", ylabel=ylabel)
        for ax, K in zip(axes.flat, Ks):
            for rule in rules:
                sub = table.where(rule=rule, K=K)
                marker = {"marker": "o", "markersize": 3.5} if rule == "threshold" else {}
                ax.plot(sub["delta"], sub[column], **rule_style(rule), **marker)
            ax.set_title(f"K = {K}")
            decorate(ax)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(rules), 5))
        fig.suptitle(title)
    return fig


def plot_acceptance(table: Table, *, title: str | None = None):
    """Acceptance against delta, one panel per ``K``, every rule and the bound.

    Parameters
    ----------
    table : Table
        Output of :func:`acceptance_data`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    lo, hi = float(table["delta"].min()), float(table["delta"].max())

    def decorate(ax):
        ax.set_ylim(0, 1.02)
        ax.set_xlim(lo, hi)

    return _rule_panels(table, sorted(set(int(k) for k in table["K"])), "acceptance", panel_height=2.6,
                        ylabel="acceptance probability", decorate=decorate,
                        title=title or r"Per-node acceptance vs $\delta = \|\mu_{\rm target}-\mu_{\rm draft}\|/\sigma$")


def plot_gap_to_bound(gaps: Table, *, title: str | None = None):
    """Gap to the list-coupling bound against delta, one panel per ``K > 1``.

    ``K = 1`` is omitted: there every rule equals RMC, which attains the bound.
    """
    Ks = sorted(set(int(k) for k in gaps["K"]) - {1})
    if not Ks:
        raise ValueError("gaps must contain some K > 1 (at K = 1 every gap is zero)")
    return _rule_panels(gaps, Ks, "gap", panel_height=2.5, ylabel="bound − acceptance\n(probability)",
                        decorate=lambda ax: ax.axhline(0, color="black", linewidth=0.6),
                        title=title or "Distance to the list-coupling bound " + r"$\alpha^*(K,\delta)$")


def acceptance_summary(table: Table, deltas=(0.25, 0.5, 1.0, 1.5, 2.0)) -> tuple[list, list]:
    """Header and rows of a compact table: acceptance per (K, delta) for each rule.

    Uses the requested deltas that lie on the table's grid (falls back to five grid points).
    """
    grid = np.unique(table["delta"])
    chosen = [d for d in deltas if np.any(np.isclose(grid, d))]
    if not chosen:
        chosen = list(grid[np.linspace(0, len(grid) - 1, min(5, len(grid))).astype(int)])
    rules = _rules_in(table)
    header = ["K", "delta"] + [RULE_LABEL[r] for r in rules]
    rows = []
    for K in sorted(set(int(k) for k in table["K"])):
        for d in chosen:
            row = [str(K), f"{d:g}"]
            for r in rules:
                sub = table.where(rule=r, K=K)
                idx = np.flatnonzero(np.isclose(sub["delta"], d))
                row.append(f"{sub['acceptance'][idx[0]]:.4f}" if idx.size else "n/a")
            rows.append(row)
    return header, rows
