"""Closed forms against the independent mpmath reference (tests/exact/mp_reference.py).

Default run: a few cells (< 30 s).  ``--runslow``: the full grid
K in {1, 2, 3, 4, 5, 8, 16, 32, 64} x delta in {1e-8, ..., 16}.  Assertions: acceptance within
1e-10 absolute, rejection probability (1 - acceptance, computed directly) within 1e-8 relative.
``bench/accuracy_exact.py`` prints the worst errors over the same grid.
"""
import importlib.util

import numpy as np
import pytest

import mp_reference as ref

ABS_TOL = 1e-10
REL_TOL = 1e-8
OPT_TOL = 1e-7

FAST_DGRS = [(1, 1.0), (4, 1e-8), (4, 1.0), (8, 0.1), (3, 4.0), (2, 16.0)]
FAST_BOUND = [(2, 1.0), (4, 1e-8), (8, 0.5), (64, 2.0), (16, 16.0)]
FAST_RASS = [(3, 1e-4), (4, 1.0)]

_HAS_RASS = importlib.util.find_spec("rass_theory.exact.rass") is not None
_HAS_OPT = importlib.util.find_spec("rass_theory.optimize.rank_weights") is not None
needs_rass = pytest.mark.skipif(not _HAS_RASS, reason="rass_theory.exact.rass not available yet")
needs_opt = pytest.mark.skipif(not _HAS_OPT, reason="rass_theory.optimize.rank_weights not available yet")

FULL = [(K, d) for K in ref.GRID_K for d in ref.GRID_DELTA]


def _check(rule, K, delta, weights=None):
    abs_err, rel_err = ref.compare(rule, K, delta, weights)
    assert abs_err < ABS_TOL, f"{rule} K={K} delta={delta}: |acceptance - mpmath| = {abs_err:.3g}"
    assert rel_err < REL_TOL, f"{rule} K={K} delta={delta}: relative error of rejection = {rel_err:.3g}"


@pytest.mark.parametrize("delta", [1e-8, 0.01, 1.0, 16.0])
def test_rmc(delta):
    _check("rmc", 1, delta)


@pytest.mark.parametrize("K,delta", FAST_DGRS)
def test_dgrs(K, delta):
    _check("dgrs", K, delta)


@pytest.mark.parametrize("K,delta", FAST_BOUND)
def test_bound(K, delta):
    _check("bound", K, delta)


@needs_rass
@pytest.mark.parametrize("K,delta", FAST_RASS)
@pytest.mark.parametrize("name", ["uniform", "top", "random"])
def test_rass(K, delta, name):
    _check("rass", K, delta, ref.weight_vectors(K)[name])


@needs_opt
@pytest.mark.parametrize("K,delta", [(4, 1.0)])
def test_optimal_weights(K, delta):
    from rass_theory.optimize.rank_weights import optimal_rank_weights

    res = optimal_rank_weights(K, delta)
    acc, _ = ref.rass_tv(res.weights, delta)
    assert abs(res.acceptance - float(acc)) < OPT_TOL


@pytest.mark.slow
@pytest.mark.parametrize("K,delta", FULL)
def test_dgrs_full_grid(K, delta):
    _check("dgrs", K, delta)


@pytest.mark.slow
@pytest.mark.parametrize("K,delta", FULL)
def test_bound_full_grid(K, delta):
    _check("bound", K, delta)


@pytest.mark.slow
@pytest.mark.parametrize("delta", ref.GRID_DELTA)
def test_rmc_full_grid(delta):
    _check("rmc", 1, delta)


@pytest.mark.slow
@needs_rass
@pytest.mark.parametrize("K,delta", FULL)
def test_rass_full_grid(K, delta):
    for name, w in ref.weight_vectors(K).items():
        _check("rass", K, delta, w)


@pytest.mark.slow
@needs_opt
@pytest.mark.parametrize("K,delta", [(K, d) for K in ref.GRID_K if K > 1 for d in ref.GRID_DELTA])
def test_optimal_weights_full_grid(K, delta):
    from rass_theory.optimize.rank_weights import optimal_rank_weights

    res = optimal_rank_weights(K, delta)
    acc, _ = ref.rass_tv(res.weights, delta)
    assert abs(res.acceptance - float(acc)) < OPT_TOL


def _mp_cdf_excess(weights, s):
    """``G_w(s) - Phi(s) = sum_j w_j (F_j(s) - Phi(s))`` from the definition
    ``F_j(s) = P(Bin(K, Phi(s)) >= j + 1)``, and its scale ``sum_j w_j |F_j(s) - Phi(s)|`` (the
    size of the terms: where the weights make ``G - Phi`` change sign, no form keeps relative
    accuracy; the error is measured against this scale)."""
    import mpmath as mp

    with mp.workdps(ref.DPS):
        K = len(weights)
        w = [mp.mpf(float(x)) for x in weights]
        total = mp.fsum(w)
        x = mp.mpf(float(s))
        p, q = mp.ncdf(x), mp.ncdf(-x)
        binom = [mp.binomial(K, m) * p ** m * q ** (K - m) for m in range(K + 1)]
        parts = [w[j] / total * (mp.fsum(binom[j + 1:]) - p) for j in range(K)]
        return mp.fsum(parts), mp.fsum(abs(x) for x in parts)


class TestCdfExcess:
    """``RankLaw.cdf_excess`` (the engine's ``G - Phi``, every residual mass) against mpmath.

    Error relative to the scale of :func:`_mp_cdf_excess`, on ``s`` in ``[-8, 8]`` at ``K = 64``.
    The linear-space Bernstein sum (powers of the rounded ``p`` near 1, binomials from ``lgamma``
    differences) measures 4.35e-14 (top rank) and 1.23e-14 (random weights); the tail-aware
    form 1.04e-14 and 1.97e-15, limited by scipy's ``ndtr`` in the far lower tail (``7e-15``
    relative at ``s = -8``).  Tolerances: about twice the measured worst, below what the linear
    form reaches.
    """

    S = np.linspace(-8.0, 8.0, 81)

    @pytest.mark.parametrize("name,tol", [("top", 2e-14), ("random", 5e-15)])
    def test_relative_error_K64(self, name, tol):
        from rass_theory.exact import laws

        w = ref.weight_vectors(64)[name]
        got = laws.rank_law(w).cdf_excess(self.S[:, None])[:, 0]
        want, scale = np.array([[float(x) for x in _mp_cdf_excess(w, s)] for s in self.S]).T
        rel = np.abs(got - want) / scale
        assert rel.max() < tol, f"max relative error {rel.max():.3g} at s = {self.S[rel.argmax()]}"

    def test_residual_mass_top_K64(self):
        """``TV`` at the accuracy table's worst RASS cell (top rank, K = 64, delta = 4) from the
        engine's masses: measured 1.1e-16 absolute (8.9e-15 with the old per-row scan)."""
        from rass_theory.exact import laws

        w = ref.weight_vectors(64)["top"]
        _, tv = ref.rass_tv(w, 4.0)
        got = laws.residual_intervals(laws.rank_law(w), np.array([4.0]))[2].sum()
        assert abs(got - float(tv)) < 1e-15
