"""Figures of the MNIST UNet runs (``bench/mnist_speedup.py``): samples, speedups, deltas, gains.

Every function draws from the saved summary of that bench (``bench/results/mnist_speedup/summary.json``:
plain lists and dicts), so the report's ``mnist`` section never reruns the sampler.
"""
from __future__ import annotations

import numpy as np

from ._common import tile_images
from .style import RULE_STYLE, new_figure, style_context

__all__ = ["mnist_mosaic", "plot_mnist_samples", "plot_mnist_speedups", "plot_mnist_delta_histograms",
           "plot_mnist_predicted_gain"]

_VERIFIERS = ("rass", "dgrs", "optimal_list", "rmc")


def mnist_mosaic(samples, n_side: int):
    """``n_side x n_side`` mosaic (pixels 0..255, NaN gutters) of normalised digits ``(n, 784)``."""
    from ..models.mnist_data import to_pixels

    x = np.asarray(samples, dtype=float)
    if x.ndim != 2 or x.shape[1] != 784:
        raise ValueError(f"samples must have shape (n, 784), got {x.shape}")
    if x.shape[0] < n_side * n_side:
        raise ValueError(f"a {n_side} x {n_side} mosaic needs {n_side * n_side} samples, got {x.shape[0]}")
    return tile_images(to_pixels(x[: n_side * n_side]).reshape(-1, 28, 28), n_side)


def plot_mnist_samples(panels, *, n_side: int = 4):
    """One mosaic per ``(title, samples)`` panel; e.g. plain and speculative side by side."""
    panels = list(panels)
    with style_context():
        fig, axes = new_figure(1, len(panels), width=2.8 * len(panels), height=3.0, squeeze=False)
        for ax, (title, samples) in zip(axes[0], panels):
            ax.imshow(mnist_mosaic(samples, n_side), cmap="gray", vmin=0, vmax=255, interpolation="nearest")
            ax.set_title(title)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
    return fig


def _label(v):
    return {"rass": "RASS", "dgrs": "D-GRS", "optimal_list": "optimal list", "rmc": "RMC chain"}.get(v, v)


def plot_mnist_speedups(rows):
    """Bars of the measured speedup (±1 SE) per tree and verifier, one panel per (mode, eps).

    ``rows`` are the bench's arm records (``mode, eps, verifier, K, L, speedup, speedup_se`` and
    ``predicted``, drawn as a diamond).
    """
    rows = [r for r in rows if r["verifier"] in _VERIFIERS]
    if not rows:
        raise ValueError("rows holds no arm of rass, dgrs, optimal_list or rmc")
    modes = [m for m in ("verification", "budget") if any(r["mode"] == m for r in rows)]
    eps = sorted({r["eps"] for r in rows})
    shapes = sorted({(r["K"], r["L"]) for r in rows})
    width = 0.8 / len(_VERIFIERS)
    with style_context():
        fig, axes = new_figure(len(modes), len(eps), width=3.3 * len(eps), height=2.7 * len(modes),
                               sharey=True, squeeze=False)
        for i, mode in enumerate(modes):
            for j, e in enumerate(eps):
                ax = axes[i, j]
                for k, v in enumerate(_VERIFIERS):
                    sel = {(r["K"], r["L"]): r for r in rows if r["mode"] == mode and r["eps"] == e
                           and r["verifier"] == v}
                    xs = [s for s, sh in enumerate(shapes) if sh in sel]
                    if not xs:
                        continue
                    vals = [sel[shapes[s]]["speedup"] for s in xs]
                    ses = [sel[shapes[s]]["speedup_se"] for s in xs]
                    pos = np.asarray(xs) + (k - (len(_VERIFIERS) - 1) / 2) * width
                    ax.bar(pos, vals, width, yerr=ses, color=RULE_STYLE[v]["color"], label=_label(v),
                           capsize=2, linewidth=0)
                    pred = [sel[shapes[s]].get("predicted", np.nan) for s in xs]
                    ax.plot(pos, pred, "D", color="black", markersize=3, linestyle="none",
                            label="predicted (own trace)" if k == 0 else None)
                ax.set_xticks(range(len(shapes)))
                ax.set_xticklabels([f"{K}x{L}" for K, L in shapes])
                ax.set_title(f"{mode}-matched, eps = {e}")
                if j == 0:
                    ax.set_ylabel("speedup (98 / calls)")
        axes[0, 0].legend(loc="upper left", fontsize=7)
    return fig


def plot_mnist_delta_histograms(hist):
    """Delta histograms per tree depth, one panel per eps, from ``{eps: {"bins", "counts"}}``."""
    if not hist:
        raise ValueError("hist is empty: no delta trace was recorded")
    keys = sorted(hist, key=float)
    with style_context():
        fig, axes = new_figure(1, len(keys), width=3.3 * len(keys), height=2.8, sharey=True, squeeze=False)
        for ax, key in zip(axes[0], keys):
            bins = np.asarray(hist[key]["bins"], dtype=float)
            centers = 0.5 * (bins[1:] + bins[:-1])
            for depth, counts in enumerate(hist[key]["counts"]):
                c = np.asarray(counts, dtype=float)
                if c.sum() == 0:
                    continue
                dens = c / (c.sum() * np.diff(bins))
                ax.step(centers, dens, where="mid", linewidth=1.3,
                        label=f"depth {depth} (n = {int(c.sum()):,})")
            ax.set_xlabel("delta = ||mu_target - mu_draft|| / sigma")
            ax.set_title(f"eps = {key}")
            ax.legend(loc="upper right", fontsize=7)
        axes[0, 0].set_ylabel("density")
    return fig


def plot_mnist_predicted_gain(predicted, measured=()):
    """Predicted RASS-over-D-GRS gain (per cent) against eps, one line per (K, L) and mode.

    ``predicted``: records ``mode, eps, K, L, rass_over_dgrs``; ``measured``: records with
    ``rass_over_dgrs`` and ``rass_over_dgrs_se``, drawn as points with ±1 SE bars.
    """
    predicted = list(predicted)
    if not predicted:
        raise ValueError("predicted is empty")
    shapes = sorted({(p["K"], p["L"]) for p in predicted})
    colors = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"]
    with style_context():
        fig, ax = new_figure(1, 1, width=5.6, height=3.4)
        for c, (K, L) in enumerate(shapes):
            for mode, ls, mk in (("verification", "-", "o"), ("budget", "--", "s")):
                pts = sorted((p["eps"], 100 * p["rass_over_dgrs"]) for p in predicted
                             if (p["K"], p["L"]) == (K, L) and p["mode"] == mode)
                if pts:
                    ax.plot(*zip(*pts), ls, color=colors[c % len(colors)], linewidth=1.5,
                            label=f"{K}x{L} {mode}")
                meas = sorted((g["eps"], 100 * g["rass_over_dgrs"], 100 * g["rass_over_dgrs_se"]) for g in measured
                              if (g["K"], g["L"]) == (K, L) and g["mode"] == mode and "rass_over_dgrs" in g)
                if meas:
                    e, v, s = zip(*meas)
                    ax.errorbar(np.asarray(e) * (1.0 + 0.03 * (c - 1.5)), v, yerr=s, fmt=mk, mfc="none",
                                color=colors[c % len(colors)], markersize=4, capsize=2, linewidth=0.8)
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_xscale("log")
        ax.set_xlabel("eps (noise scale of the paper protocol)")
        ax.set_ylabel("RASS / D-GRS - 1 (%)")
        ax.set_title("Predicted from delta traces (lines); measured ±1 SE (points)")
        ax.legend(fontsize=6, ncol=2)
    return fig
