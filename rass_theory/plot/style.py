"""One visual style for every figure of the toolkit.

Figures are built on :class:`matplotlib.figure.Figure` directly (never through ``pyplot``), so
they need no interactive backend, hold no global state and render with Agg; they show inline in
Jupyter like any other figure. Colours come from the Okabe-Ito palette, which stays distinct
under the common forms of colour blindness (Okabe & Ito, *Color Universal Design*, 2008), and
every rule keeps the same colour and line style in every figure.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

__all__ = [
    "OKABE_ITO",
    "RULE_STYLE",
    "RULE_LABEL",
    "style_context",
    "new_figure",
    "panel_grid",
    "rule_style",
    "save_figure",
    "SUPPORTED_FORMATS",
]

#: The eight Okabe-Ito colours.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

#: Line style of each rule; the keys are the rule names used across the toolkit.
RULE_STYLE = {
    "rmc": {"color": "#7F7F7F", "linestyle": ":", "linewidth": 1.8},
    "dgrs": {"color": OKABE_ITO["orange"], "linestyle": "-", "linewidth": 1.8},
    "rass": {"color": OKABE_ITO["blue"], "linestyle": "-", "linewidth": 1.8},
    "threshold": {"color": OKABE_ITO["bluish_green"], "linestyle": "--", "linewidth": 1.8},
    "resample": {"color": OKABE_ITO["reddish_purple"], "linestyle": "-.", "linewidth": 1.5},
    "optimal_list": {"color": OKABE_ITO["sky_blue"], "linestyle": "-", "linewidth": 3.2, "alpha": 0.75},
    "bound": {"color": OKABE_ITO["black"], "linestyle": (0, (5, 2, 1, 2)), "linewidth": 1.3},
    "mutant": {"color": OKABE_ITO["vermillion"], "linestyle": "-", "linewidth": 1.5},
}

#: Human-readable labels of the rules.
RULE_LABEL = {
    "rmc": "RMC (K = 1)",
    "dgrs": "D-GRS",
    "rass": "RASS (optimal weights)",
    "threshold": "threshold policy",
    "resample": "resample",
    "optimal_list": "optimal list rule",
    "bound": "list-coupling bound",
    "mutant": "mutant",
}

#: Output formats :func:`save_figure` writes.
SUPPORTED_FORMATS = ("png", "svg", "pdf")

_RC = {
    "font.size": 9.5,
    "axes.titlesize": 10,
    "axes.labelsize": 9.5,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#DDDDDD",
    "grid.linewidth": 0.6,
    "axes.prop_cycle": matplotlib.cycler(
        color=[OKABE_ITO[k] for k in ("blue", "orange", "bluish_green", "vermillion",
                                      "reddish_purple", "sky_blue", "black", "yellow")]
    ),
    "legend.frameon": False,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "svg.fonttype": "none",
    "svg.hashsalt": "rass_theory",  # deterministic ids: identical SVGs across runs
    "pdf.fonttype": 42,
    "lines.solid_capstyle": "round",
}


@contextlib.contextmanager
def style_context():
    """Context manager that applies the toolkit's rcParams while a figure is being built."""
    with matplotlib.rc_context(_RC):
        yield


def new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 6.4, height: float = 4.0,
               sharex: bool = False, sharey: bool = False, squeeze: bool = True):
    """Return ``(fig, axes)`` with constrained layout (no clipped labels), outside ``pyplot``.

    Call inside :func:`style_context` so the axes pick up the toolkit style.
    """
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=squeeze)
    return fig, axes


def panel_grid(n_panels: int, *, panel_width: float, panel_height: float, pad_width: float, pad_height: float,
               xlabel: str, ylabel: str, max_cols: int = 4):
    """Return ``(fig, axes)``: ``n_panels`` panels with shared axes, at most ``max_cols`` a row.

    ``axes`` is 2-d; fill ``axes.flat[:n_panels]`` in order.  The bottom row carries ``xlabel``,
    the left column ``ylabel``, and the unused panels of the last row are hidden.  The figure is
    ``panel_width * ncols + pad_width`` by ``panel_height * nrows + pad_height`` inches.  Call
    inside :func:`style_context`.
    """
    ncols = min(n_panels, max_cols)
    nrows = -(-n_panels // ncols)
    fig, axes = new_figure(nrows, ncols, width=panel_width * ncols + pad_width,
                           height=panel_height * nrows + pad_height, sharex=True, sharey=True, squeeze=False)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    for ax in list(axes.flat)[n_panels:]:
        ax.set_visible(False)
    return fig, axes


def rule_style(rule: str) -> dict:
    """Line keyword arguments (colour, dash pattern, width, label) for a rule name."""
    if rule not in RULE_STYLE:
        raise ValueError(f"rule must be one of {sorted(RULE_STYLE)}, got {rule!r}")
    return dict(RULE_STYLE[rule], label=RULE_LABEL[rule])


def _check_formats(formats: Iterable[str]) -> tuple[str, ...]:
    if isinstance(formats, str):
        formats = [f for f in formats.split(",") if f]
    out = []
    for fmt in formats:
        fmt = str(fmt).lower().lstrip(".")
        if fmt not in SUPPORTED_FORMATS:
            raise ValueError(f"formats must be drawn from {SUPPORTED_FORMATS}, got {fmt!r}")
        if fmt not in out:
            out.append(fmt)
    if not out:
        raise ValueError("formats must name at least one format")
    return tuple(out)


def save_figure(fig: Figure, stem: str | os.PathLike, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Write ``fig`` to ``stem.<fmt>`` for each format and return the paths written.

    PNG at 200 dpi for documents and slides; SVG (text kept as text) and PDF (TrueType fonts)
    as vector formats for papers. The figure is rendered with the Agg/vector canvases, so no
    display is needed.
    """
    formats = _check_formats(formats)
    stem = Path(stem)
    paths = []
    with style_context():
        for fmt in formats:
            path = stem.with_name(f"{stem.name}.{fmt}")
            fig.savefig(path, format=fmt, metadata=_metadata(fmt))
            paths.append(path)
    return paths


def _metadata(fmt: str) -> dict:
    # fixed metadata keeps vector outputs byte-reproducible across runs
    if fmt == "svg":
        return {"Date": None}
    if fmt == "pdf":
        return {"CreationDate": None}
    if fmt == "png":
        return {"Software": "rass_theory"}
    return {}
