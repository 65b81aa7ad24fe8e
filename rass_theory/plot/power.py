"""Power of the exactness harness: detectable distance against ``n``, and a mutant's rejection rate.

Notes
-----
The guaranteed power comes from the harness's own formula,
``rass_theory.stats.power.detectable_ks_distance``:
``eps(n) = sqrt(log(2 m / alpha) / (2 n)) + sqrt(log(2 / beta) / (2 n)) + 1/B`` for a Holm family
of ``m`` tests, false-pass rate ``beta`` and ``B`` PIT bins: any verifier whose committed law is
at KS distance above ``eps(n)`` from the target (in one tested statistic) fails with probability
at least ``1 - beta``. The measured rejection rate of a known-wrong verifier (a mutant from
``rass_theory.mutants``) over independent seeds shows the actual power, which is higher.
"""
from __future__ import annotations

import numpy as np

from ._common import Progress, check_ints
from .._validation import check_delta, check_K, check_positive_int, check_probability
from .exactness import LIGHT_HARNESS, derive_seed
from .style import OKABE_ITO, new_figure, style_context
from .table import Table

__all__ = ["harness_family", "detectable_distance_data", "default_mutant", "mutant_power_data", "plot_power"]

#: Mutant shown by default: caught only from n of about 10^4 at the default cell, so its
#: rejection rate visibly rises over the n grid (falls back to the first in the catalogue).
DEFAULT_MUTANT = "residual_from_target"


def harness_family(K=4, delta=0.5, dim=8, alpha=1e-3, false_pass_rate=0.01) -> dict:
    """Holm family size ``m`` and PIT bins ``B`` of a default harness run at one cell.

    Runs ``rt.check_exactness`` once on 1,000 RASS samples and counts its statistical tests (the
    contract check is not part of the family), then checks that the harness's own
    ``detectable_ks_distance`` is reproduced by :func:`~rass_theory.stats.power.detectable_ks_distance`
    with these values.
    """
    from rass_theory import verifiers
    from rass_theory.scale.check import check_exactness
    from rass_theory.stats.config import DEFAULT_N_BINS
    from rass_theory.stats.looks import design_level
    from rass_theory.stats.power import detectable_ks_distance

    rep = check_exactness(verifiers.rass(), K=K, delta=delta, dim=dim, n_samples=1000, alpha=alpha, rng=0,
                          false_pass_rate=false_pass_rate)
    n_tests = sum(1 for t in rep.tests if t.name != "contract")
    # the report states its power at the final look's Holm level (0.99 alpha when it had interim looks)
    level = design_level(alpha, rep.n_looks > 0)
    mine = detectable_ks_distance(rep.n_valid, level, n_tests, false_pass_rate, DEFAULT_N_BINS)
    if not np.isclose(mine, rep.detectable_ks_distance, rtol=1e-12):
        raise RuntimeError(f"harness family mismatch: m={n_tests}, B={DEFAULT_N_BINS} give {mine}, "
                           f"the harness reports {rep.detectable_ks_distance}")
    return {"n_tests": n_tests, "n_bins": DEFAULT_N_BINS}


def detectable_distance_data(ns, *, alpha=1e-3, false_pass_rate=0.01, n_tests=None, n_bins=None) -> Table:
    """Guaranteed detectable KS distance for each sample size, from the harness's DKW formula.

    Parameters
    ----------
    ns : sequence of int
        Sample sizes; a log-spaced curve between their extremes is added for drawing.
    alpha, false_pass_rate : float
        Family-wise level and allowed false-pass rate ``beta``.
    n_tests, n_bins : int, optional
        Holm family size and PIT bins; default: those of a default harness run at
        ``K = 4, delta = 0.5, dim = 8`` (:func:`harness_family`).

    Returns
    -------
    Table
        Columns ``n``, ``detectable_ks_distance``, ``on_grid`` (True for the requested ``ns``).
    """
    from rass_theory.stats.power import detectable_ks_distance

    ns = check_ints(ns, "ns", minimum=1)
    alpha = check_probability(alpha, "alpha")
    if n_tests is None or n_bins is None:
        fam = harness_family(alpha=alpha, false_pass_rate=false_pass_rate)
        n_tests = fam["n_tests"] if n_tests is None else n_tests
        n_bins = fam["n_bins"] if n_bins is None else n_bins
    n_tests = check_positive_int(n_tests, "n_tests")
    n_bins = check_positive_int(n_bins, "n_bins")
    curve = np.unique(np.concatenate([np.geomspace(min(ns), max(ns) * 3, 60).astype(int), ns]))
    rows = [{"n": int(n), "detectable_ks_distance": detectable_ks_distance(int(n), alpha, n_tests,
                                                                           false_pass_rate, n_bins),
             "on_grid": int(n) in ns} for n in curve]
    return Table.from_records(rows, meta={"alpha": alpha, "false_pass_rate": false_pass_rate, "n_tests": n_tests,
                                          "n_bins": n_bins, "formula": "sqrt(log(2m/alpha)/(2n)) + "
                                          "sqrt(log(2/beta)/(2n)) + 1/B"})


def default_mutant(name: str | None = None):
    """Return ``(name, factory)`` of a mutant from ``rass_theory.mutants.MUTANTS``."""
    from rass_theory.mutants import MUTANTS

    if name is None:
        name = DEFAULT_MUTANT if DEFAULT_MUTANT in MUTANTS else next(iter(MUTANTS))
    if name not in MUTANTS:
        raise ValueError(f"mutant must be one of {sorted(MUTANTS)}, got {name!r}")
    return name, MUTANTS[name]


def mutant_power_data(mutant, ns, *, reps=10, K=4, delta=0.5, dim=8, alpha=1e-3, seed=0,
                      harness_options=LIGHT_HARNESS, progress=None) -> Table:
    """Fraction of ``reps`` independent ``check_exactness`` runs that reject a mutant, per ``n``.

    Parameters
    ----------
    mutant : tuple
        ``(name, factory)`` as from :func:`default_mutant`; ``factory()`` returns the verifier
        (called with ``K`` if it accepts it).
    harness_options : dict
        Extra ``rt.check_exactness`` arguments (default: ``exactness.LIGHT_HARNESS``; pass ``{}``
        for the harness defaults, whose power the DKW curve states).

    Returns
    -------
    Table
        ``mutant``, ``n``, ``reps``, ``rejections``, ``rate`` and a 95% Clopper-Pearson interval.
    """
    import inspect

    from rass_theory.scale.check import check_exactness
    from rass_theory.stats.tests import clopper_pearson

    name, factory = mutant
    ns = check_ints(ns, "ns", minimum=100)
    reps = check_positive_int(reps, "reps")
    K, delta = check_K(K), check_delta(delta)
    try:
        verifier = factory(K=K) if "K" in inspect.signature(factory).parameters else factory()
    except (TypeError, ValueError):
        verifier = factory()
    prog = Progress(reps * sum(ns), progress)
    rows = []
    for i, n in enumerate(ns):
        rej = 0
        for r in range(reps):
            rep = check_exactness(verifier, K=K, delta=delta, dim=dim, n_samples=int(n), alpha=alpha,
                                  rng=derive_seed(seed, 2000 + i, r), **(harness_options or {}))
            rej += int(not rep.passed)
            prog.step(int(n))
        lo, hi = clopper_pearson(rej, reps, 0.95)
        rows.append({"mutant": name, "n": int(n), "reps": reps, "rejections": rej, "rate": rej / reps,
                     "ci_low": lo, "ci_high": hi})
    return Table.from_records(rows, meta={"mutant": name, "K": K, "delta": delta, "dim": dim, "alpha": alpha,
                                          "harness_options": dict(harness_options or {})})


def plot_power(detectable: Table, empirical: Table | None = None, *, title: str | None = None):
    """Detectable KS distance against ``n`` (log-log) and, if given, a mutant's rejection rate."""
    with style_context():
        ncols = 1 if empirical is None else 2
        fig, axes = new_figure(1, ncols, width=4.3 * ncols + 0.4, height=3.6, squeeze=False)
        ax = axes[0, 0]
        ax.plot(detectable["n"], detectable["detectable_ks_distance"], color=OKABE_ITO["blue"], linewidth=1.8,
                label="guaranteed (DKW)")
        grid = detectable.where(on_grid=True)
        ax.plot(grid["n"], grid["detectable_ks_distance"], "o", color=OKABE_ITO["blue"], markersize=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("samples n (log scale)")
        ax.set_ylabel("detectable KS distance (log scale)")
        m = detectable.meta
        ax.set_title(f"detected w.p. ≥ {1 - m.get('false_pass_rate', 0.01):g} at alpha = {m.get('alpha', 0):g}")
        if empirical is not None:
            ax2 = axes[0, 1]
            err = np.vstack([empirical["rate"] - empirical["ci_low"], empirical["ci_high"] - empirical["rate"]])
            ax2.errorbar(empirical["n"], empirical["rate"], yerr=err, color=OKABE_ITO["vermillion"], marker="o",
                         markersize=4, capsize=3, linewidth=1.6, label=f"mutant {empirical.meta.get('mutant')}")
            ax2.set_xscale("log")
            ax2.set_ylim(-0.03, 1.03)
            ax2.set_xlabel("samples n (log scale)")
            ax2.set_ylabel("rejection rate")
            ax2.set_title(f"mutant '{empirical.meta.get('mutant')}', {int(empirical['reps'][0])} seeds per n")
        fig.suptitle(title or "Power of the exactness harness")
    return fig
