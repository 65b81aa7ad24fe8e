"""Publication figures of the toolkit, one function per figure, each returning a matplotlib Figure.

Each figure has a ``*_data`` function computing a :class:`Table` (saved as CSV/JSON by the
report) and a ``plot_*`` function drawing only from that table::

    from rass_theory import plot
    table = plot.acceptance_data(K_values=(1, 2, 4, 8))
    fig = plot.plot_acceptance(table)
    plot.save_figure(fig, "acceptance", formats=("png", "svg"))

Figures are built on ``matplotlib.figure.Figure`` without ``pyplot`` (Agg rendering, no global
state), in one colour-blind-safe style (:mod:`rass_theory.plot.style`). Submodules are imported
lazily, so ``import rass_theory.plot`` does not pull in the optimiser or the harness.
"""
from __future__ import annotations

import lazy_loader

_LAZY = {
    # style and data container
    "OKABE_ITO": "style", "RULE_STYLE": "style", "save_figure": "style", "style_context": "style",
    "new_figure": "style", "Table": "table",
    # theory
    "acceptance_data": "theory", "gap_data": "theory", "plot_acceptance": "theory",
    "plot_gap_to_bound": "theory",
    "optimal_weights_data": "weights", "plot_optimal_weights": "weights",
    "expected_committed_length": "trees", "tree_speedup_data": "trees", "plot_tree_speedup": "trees",
    # exactness and power
    "certificate_data": "exactness", "pvalue_qq_data": "exactness", "plot_certificate": "exactness",
    "plot_pvalue_qq": "exactness", "builtin_verifiers": "exactness",
    "detectable_distance_data": "power", "mutant_power_data": "power", "plot_power": "power",
    # diffusion
    "read_sweep_csv": "diffusion", "embedded_sweep": "diffusion", "plot_gm_speedup": "diffusion",
}

_MODULES: dict = {}
for _name, _module in _LAZY.items():
    _MODULES.setdefault(_module, []).append(_name)

__getattr__, __dir__, __all__ = lazy_loader.attach(__name__, submod_attrs=_MODULES)
