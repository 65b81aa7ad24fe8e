"""Exactness certificate: every built-in verifier through ``rt.check_exactness``.

Notes
-----
``rt.check_exactness`` (``proofs/S1-harness-power.md``) tests the committed states of a synthetic node against
the target ``N(mu_target, sigma^2 I)``: the projection ``s`` against ``N(delta, 1)``,
``||z_perp||^2`` against ``chi^2_{d-1}``, random orthogonal directions against ``N(0, 1)``, the
acceptance count against its exact value, and a two-sample test against direct target draws,
with a family-wise (Holm) correction. Under an exact rule every p-value is uniform (or
super-uniform for the conservative binned KS), which the QQ plot shows over independent seeds.
"""
from __future__ import annotations

import math

import numpy as np

from ._common import Progress
from .._validation import check_delta, check_K, check_positive_int, check_probability
from .style import OKABE_ITO, RULE_STYLE, new_figure, style_context
from .table import Table

__all__ = ["builtin_verifiers", "certificate_data", "pvalue_qq_data", "plot_certificate", "plot_pvalue_qq",
           "derive_seed"]


def derive_seed(seed: int, *key: int) -> int:
    """A 63-bit integer seed for stream ``key`` of root ``seed`` (``SeedSequence`` spawn key)."""
    ss = np.random.SeedSequence(int(seed), spawn_key=tuple(int(k) for k in key))
    return int(ss.generate_state(2, dtype=np.uint64)[0] >> np.uint64(1))


def builtin_verifiers(K: int) -> dict:
    """Built-in verifiers and the ``K`` each runs at: ``{name: (verifier, K)}``.

    RMC is the single-draft rule and runs at ``K = 1``; every other rule at ``K``.
    """
    from rass_theory import verifiers as V

    K = check_K(K)
    out = {"rmc": (V.rmc(), 1), "dgrs": (V.dgrs(), K), "rass": (V.rass(), K)}
    if hasattr(V, "threshold"):
        out["threshold"] = (V.threshold(K=K), K)
    out["resample"] = (V.resample(), K)
    return out


def _adjusted(test):
    for name in ("pvalue_adjusted", "adjusted_pvalue", "adj_pvalue"):
        if hasattr(test, name):
            return float(getattr(test, name))
    return float("nan")


#: Harness options of the many small runs behind a QQ plot or a power curve: fewer permutations
#: and a smaller two-sample subsample keep each run's fixed cost low; p-values stay valid.
LIGHT_HARNESS = {"n_permutations": 199, "two_sample_size": 200}


def _run(verifier, K, delta, dim, n_samples, alpha, seed, options=None):
    from rass_theory.scale.check import check_exactness

    return check_exactness(verifier, K=K, delta=delta, dim=dim, n_samples=n_samples, alpha=alpha, rng=seed,
                           **(options or {}))


def certificate_data(verifiers=None, *, K=4, delta=0.5, dim=8, n_samples=200_000, alpha=1e-3, seed=0,
                     harness_options=None, progress=None) -> Table:
    """Run ``rt.check_exactness`` once per verifier and tabulate every test.

    Parameters
    ----------
    verifiers : dict, optional
        ``{name: (verifier, K)}``; default :func:`builtin_verifiers` at ``K``.
    K, delta, dim, n_samples, alpha : harness cell and settings.
    seed : int
        Root seed; verifier ``i`` runs with ``derive_seed(seed, i)``.
    harness_options : dict, optional
        Extra keyword arguments of ``rt.check_exactness`` (default: the harness defaults).

    Returns
    -------
    Table
        One row per (verifier, test): ``verifier``, ``K``, ``test``, ``statistic``, ``pvalue``,
        ``pvalue_adjusted`` (NaN if the report carries none), ``passed`` (the verifier's overall
        verdict), ``acceptance_rate``, ``detectable_ks_distance``, ``n_samples``.
    """
    K = check_K(K)
    delta = check_delta(delta)
    dim = check_positive_int(dim, "dim", minimum=2)
    n_samples = check_positive_int(n_samples, "n_samples")
    alpha = check_probability(alpha, "alpha")
    verifiers = builtin_verifiers(K) if verifiers is None else dict(verifiers)
    prog = Progress(len(verifiers), progress)
    rows = []
    for i, (name, (verifier, k)) in enumerate(verifiers.items()):
        rep = _run(verifier, k, delta, dim, n_samples, alpha, derive_seed(seed, i), harness_options)
        for t in rep.tests:
            rows.append({"verifier": name, "K": int(k), "test": str(t.name), "statistic": float(t.statistic),
                         "pvalue": float(t.pvalue), "pvalue_adjusted": _adjusted(t), "passed": bool(rep.passed),
                         "acceptance_rate": float(rep.acceptance_rate),
                         "detectable_ks_distance": float(getattr(rep, "detectable_ks_distance", math.nan)),
                         "n_samples": int(n_samples)})
        prog.step()
    return Table.from_records(rows, meta={"description": "exactness certificate (rt.check_exactness)",
                                          "delta": delta, "dim": dim, "alpha": alpha, "seed": seed,
                                          "harness_options": dict(harness_options or {})})


def pvalue_qq_data(verifiers=None, *, n_seeds=20, K=4, delta=0.5, dim=8, n_samples=20_000, alpha=1e-3,
                   seed=0, harness_options=LIGHT_HARNESS, progress=None) -> Table:
    """Raw p-values of every test over ``n_seeds`` independent runs per verifier.

    Seeds are ``derive_seed(seed, 1000 + i, r)`` for verifier ``i`` and repetition ``r``, disjoint
    from the certificate's streams. ``harness_options`` default to :data:`LIGHT_HARNESS`.

    Returns
    -------
    Table
        Columns ``verifier``, ``rep``, ``test``, ``pvalue``, ``passed``.
    """
    K = check_K(K)
    n_seeds = check_positive_int(n_seeds, "n_seeds", minimum=2)
    verifiers = builtin_verifiers(K) if verifiers is None else dict(verifiers)
    prog = Progress(len(verifiers) * n_seeds, progress)
    rows = []
    for i, (name, (verifier, k)) in enumerate(verifiers.items()):
        for r in range(n_seeds):
            rep = _run(verifier, k, delta, dim, n_samples, alpha, derive_seed(seed, 1000 + i, r), harness_options)
            for t in rep.tests:
                if t.name == "contract" or not np.isfinite(t.pvalue):
                    continue  # the contract check is a verdict, not a statistical test
                rows.append({"verifier": name, "rep": r, "test": str(t.name), "pvalue": float(t.pvalue),
                             "passed": bool(rep.passed)})
            prog.step()
    return Table.from_records(rows, meta={"description": "p-values over seeds (uniform under an exact rule)",
                                          "K": K, "delta": delta, "dim": dim, "n_samples": n_samples,
                                          "harness_options": dict(harness_options or {})})


def plot_certificate(table: Table, *, alpha: float | None = None, title: str | None = None):
    """Grid of p-values: one column per verifier, one row per test, the verdict underneath.

    Cells are shaded by ``-log10 p`` (darker = smaller p-value) and annotated with the raw
    p-value; the Holm-adjusted p-values and the contract check (not drawn) decide the verdict,
    as in the harness.
    """
    import matplotlib as mpl

    alpha = float(table.meta.get("alpha", 1e-3)) if alpha is None else alpha
    names = list(dict.fromkeys(table["verifier"].tolist()))
    tests = [t for t in dict.fromkeys(table["test"].tolist()) if t != "contract"]
    P = np.full((len(tests), len(names)), np.nan)
    verdict = {}
    for rec in table.records():
        verdict[rec["verifier"]] = rec["passed"]
        if rec["test"] in tests:
            P[tests.index(rec["test"]), names.index(rec["verifier"])] = rec["pvalue"]
    score = -np.log10(np.clip(P, 1e-300, 1))
    vmax = max(-math.log10(alpha) + 1, 4.0)
    with style_context():
        fig, ax = new_figure(width=1.0 * len(names) + 3.4, height=0.3 * len(tests) + 2.0)
        cmap = mpl.colormaps["Blues"]
        im = ax.imshow(np.minimum(score, vmax), cmap=cmap, vmin=0, vmax=vmax, aspect="auto")
        for i in range(len(tests)):
            for j in range(len(names)):
                p = P[i, j]
                if np.isnan(p):
                    continue
                txt = f"{p:.2g}" if p >= 1e-3 else f"{p:.0e}"
                dark = min(score[i, j], vmax) > 0.6 * vmax
                ax.text(j, i, txt, ha="center", va="center", fontsize=7.5, color="white" if dark else "black")
        for j, name in enumerate(names):
            ok = verdict[name]
            ax.text(j, len(tests) - 0.3, "PASS" if ok else "FAIL", ha="center", va="top", fontsize=8.5,
                    fontweight="bold", color=OKABE_ITO["bluish_green"] if ok else OKABE_ITO["vermillion"])
        ax.set_xticks(range(len(names)), names)
        ax.xaxis.tick_top()
        ax.set_yticks(range(len(tests)), [t.replace("_", " ") for t in tests])
        ax.set_ylim(len(tests) + 0.3, -0.5)
        ax.grid(False)
        for side in ax.spines:
            ax.spines[side].set_visible(False)
        ax.tick_params(length=0)
        cbar = fig.colorbar(im, ax=ax, shrink=0.8, aspect=30, pad=0.02)
        cbar.set_label(r"$-\log_{10}$ raw p-value")
        n = int(table["n_samples"][0])
        dks = float(np.nanmax(table["detectable_ks_distance"])) if len(table) else math.nan
        sub = f"n = {n:,} per verifier, family-wise alpha = {alpha:g} (Holm)"
        if np.isfinite(dks):
            sub += f"\ndetectable KS distance {dks:.3g} (false-pass rate 0.01)"
        ax.set_title(title or f"Exactness certificate: raw p-value of each test\n{sub}", fontsize=9.5)
    return fig


def plot_pvalue_qq(table: Table, *, title: str | None = None):
    """QQ plot of raw p-values over seeds against Uniform(0, 1), one line per verifier.

    Left: p against uniform quantiles. Right: the same on ``-log10`` scales (the lower tail,
    where a too-small p-value would show). The shaded band is the pointwise 95% range of the
    ``i``-th of ``m`` uniform order statistics, ``Beta(i, m - i + 1)``. Tests with a discrete
    null (the binomial acceptance test) and the conservative binned KS sit on or above the line.
    The tests of one run share data, so the pooled p-values are dependent and the band (drawn
    for independent uniforms) is a guide, not a test.
    """
    from scipy import stats

    names = list(dict.fromkeys(table["verifier"].tolist()))
    with style_context():
        fig, (ax1, ax2) = new_figure(1, 2, width=8.4, height=3.8)
        m_max = 0
        for name in names:
            p = np.sort(table.where(verifier=name)["pvalue"])
            m = p.size
            m_max = max(m_max, m)
            q = (np.arange(1, m + 1) - 0.5) / m
            style = RULE_STYLE.get(name, {"color": OKABE_ITO["sky_blue"]})
            ax1.plot(q, p, ".", markersize=3, color=style["color"], label=f"{name} ({m} p-values)")
            ax2.plot(-np.log10(q), -np.log10(np.clip(p, 1e-300, 1)), ".", markersize=3, color=style["color"])
        i = np.arange(1, m_max + 1)
        lo, hi = stats.beta.ppf(0.025, i, m_max - i + 1), stats.beta.ppf(0.975, i, m_max - i + 1)
        q = (i - 0.5) / m_max
        ax1.fill_between(q, lo, hi, color="#BBBBBB", alpha=0.5, linewidth=0, label="95% band (uniform)")
        ax2.fill_between(-np.log10(q), -np.log10(hi), -np.log10(lo), color="#BBBBBB", alpha=0.5, linewidth=0)
        ax1.plot([0, 1], [0, 1], color="black", linewidth=0.8)
        top = -np.log10(0.5 / m_max)
        ax2.plot([0, top], [0, top], color="black", linewidth=0.8)
        ax1.set_xlabel("Uniform(0, 1) quantile")
        ax1.set_ylabel("observed p-value")
        ax1.set_xlim(0, 1)
        ax1.set_ylim(0, 1)
        ax2.set_xlabel(r"expected $-\log_{10} p$")
        ax2.set_ylabel(r"observed $-\log_{10} p$")
        fig.legend(loc="outside lower center", ncols=min(len(names) + 1, 4), markerscale=3)
        n_rep = len(set(table["rep"].tolist()))
        fig.suptitle(title or f"Raw p-values of every test over {n_rep} seeds (exact rules: uniform)")
    return fig
