"""Exactness checks for users' own test suites: deterministic, with a very low false-fail rate.

Add this to your test suite::

    from rass_theory.testing import assert_exact

    def test_my_verifier_is_exact():
        assert_exact(my_verifier)          # raises AssertionError naming every failing test

:func:`assert_exact` runs :func:`rass_theory.check_exactness` (the default grid: every regime of
:data:`rass_theory.stats.grid.DEFAULT_CELLS`, both dtypes, the calls-in-sequence contract)
with a **fixed seed** and a family-wise false-fail rate of ``1e-6``, so a correct verifier fails
a CI run about once in a million pipelines, and the same code gives the same verdict on every
run.  The price of the low rate is a slightly larger detectable discrepancy: the power cell
still detects any tested one-dimensional statistic at KS distance ``>= 3.3e-3`` with probability
``>= 0.99`` (against ``2.9e-3`` at ``alpha = 1e-3``), see :func:`stated_power`.
"""
from __future__ import annotations

import math

__all__ = ["assert_exact", "stated_power", "DEFAULT_ALPHA", "DEFAULT_SEED"]

#: Family-wise false-fail rate of :func:`assert_exact`.
DEFAULT_ALPHA = 1e-6
#: The fixed seed of :func:`assert_exact` (any fixed integer makes the check deterministic).
DEFAULT_SEED = 20261201


def stated_power(alpha: float = DEFAULT_ALPHA, false_pass_rate: float = 0.01, **options) -> float:
    """The KS distance the power cell of the run :func:`assert_exact` makes detects with probability
    ``>= 1 - false_pass_rate`` (:func:`rass_theory.stats.power.detectable_ks_distance` with the
    grid's family size, read from the code, at the final look's Holm level: ``0.99 alpha`` with the
    interim looks, :func:`rass_theory.stats.looks.design_level`)."""
    from .stats.config import harness_config
    from .stats.family import family_size, tail_test_names
    from .stats.grid import DEFAULT_CELLS, default_cells
    from .stats.looks import design_level
    from .stats.power import detectable_ks_distance
    from .verifiers import resample

    cfgs = [harness_config(resample(), c["K"], c["delta"], c["dim"], n_samples=c.get("n_samples"), alpha=alpha,
                           rng=0, false_pass_rate=false_pass_rate, dtype=c.get("dtype"))
            for c in default_cells(resample())]
    m = sum(family_size(c) for c in cfgs)
    m += sum(len(tail_test_names(d, nd)) for d, nd in {(c.dim, c.n_directions) for c in cfgs})
    n = options.get("n_samples") or DEFAULT_CELLS[-1]["n_samples"]
    level = design_level(alpha, options.get("stop_early", True))
    return detectable_ks_distance(int(n), level, m, false_pass_rate, 4096)


def assert_exact(verifier, **options):
    """Assert that ``verifier`` is exact; raise ``AssertionError`` naming every failing test.

    Parameters
    ----------
    verifier : callable
        ``verifier(children, mu_draft, mu_target, sigma, rng)`` as for
        :func:`rass_theory.check_exactness`.
    **options
        Any keyword of :func:`rass_theory.check_exactness` (``K``, ``delta``, ``dim``,
        ``n_samples``, ``regime``, ``backend``, ``device``, ``dtype``, ...).  Defaults here:
        ``alpha=1e-6`` (family-wise false-fail rate) and ``rng=20261201`` (fixed: the verdict is
        deterministic); ``rng=None`` is refused, since a random seed would make a test flaky.

    Returns
    -------
    ExactnessReport
        The passing run's report.

    Raises
    ------
    AssertionError
        The verifier failed: the message lists every failing test with its Holm-adjusted
        p-value and detail, and the run's seed and regime.
    ValueError
        ``rng=None`` or an invalid option (the harness's own checks).

    Notes
    -----
    Holm over the run's ``m`` tests keeps the probability that an exact verifier fails below
    ``alpha = 1e-6`` (``proofs/S1-harness-power.md``).  Power: a pooled KS distance
    ``>= sqrt(log(2m/alpha)/(2n)) + sqrt(log(2/beta)/(2n)) + 1/B`` of any tested statistic is
    rejected with probability ``>= 1 - beta`` (:func:`stated_power`: 3.3e-3 on the 2.5-million
    row power cell at ``beta = 0.01``).
    """
    opts = {"alpha": DEFAULT_ALPHA, "rng": DEFAULT_SEED}
    opts.update(options)
    if opts["rng"] is None:
        raise ValueError("rng must be a fixed seed in assert_exact (rng=None would make the test flaky)")
    from .scale.check import check_exactness

    rep = check_exactness(verifier, **opts)
    if rep.passed:
        return rep
    failed = list(rep.failed_tests)
    lines = [f"{rep.verifier_name} is not "
             f"exact: {len(failed)} failing test(s) at family-wise alpha={opts['alpha']:g} "
             f"(seed {rep.seed}):"]
    for t in failed:
        p = t.pvalue_adjusted
        ptxt = "contract violated" if t.name.endswith("contract") else (f"p(Holm)={p:.3g}" if not math.isnan(p)
                                                                        else "p=nan")
        lines.append(f"  - {t.name}: {ptxt}; {t.detail}")
    if rep.skipped:
        lines.append(f"  (stopped early; cells not run: {list(rep.skipped)})")
    if rep.regime:
        lines.append(f"  rows: {rep.regime}")
    raise AssertionError("\n".join(lines))
