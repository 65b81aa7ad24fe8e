"""Property tests (hypothesis) of the exact acceptance probabilities and the bound.

Proofs: P3 (D-GRS), P5 (bound), P6 (reductions to RMC).
"""
import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rass_theory as rt
from rass_theory.exact import bound, dgrs
from rass_theory.optimize.dispatch import rejection_probability

_HAS_RASS = importlib.util.find_spec("rass_theory.exact.rass") is not None
needs_rass = pytest.mark.skipif(not _HAS_RASS, reason="rass_theory.exact.rass not available yet")

deltas = st.one_of(st.floats(0.0, 20.0), st.floats(1e-12, 1e-3), st.just(0.0))
Ks = st.integers(1, 64)
FAST = settings(max_examples=60, deadline=None)
RASS = settings(max_examples=20, deadline=None)  # each RASS evaluation finds crossings


def _weights(K, seed):
    return np.random.default_rng(seed).dirichlet(np.full(K, 0.5))


@FAST
@given(K=Ks, delta=deltas)
def test_dgrs_in_unit_interval_and_below_bound(K, delta):
    a = rt.acceptance("dgrs", K, delta)
    b = rt.acceptance_bound(K, delta)
    assert 0.0 <= a <= 1.0 and 0.0 <= b <= 1.0
    assert a <= b + 1e-14
    assert a + rejection_probability("dgrs", K, delta) == pytest.approx(1.0, abs=1e-14)


@FAST
@given(delta=deltas)
def test_dgrs_K1_is_rmc(delta):
    assert rt.acceptance("dgrs", 1, delta) == pytest.approx(rt.acceptance("rmc", 1, delta), rel=1e-14, abs=1e-300)
    assert rt.acceptance_bound(1, delta) == pytest.approx(rt.acceptance("rmc", 1, delta), rel=1e-14, abs=1e-300)


@FAST
@given(K=st.integers(1, 40), delta=deltas)
def test_dgrs_monotone_in_K(K, delta):
    assert rt.acceptance("dgrs", K + 1, delta) >= rt.acceptance("dgrs", K, delta) - 1e-15


@FAST
@given(K=st.integers(1, 200), delta=deltas, step=st.floats(1e-3, 5.0))
def test_bound_monotone(K, delta, step):
    b = rt.acceptance_bound(K, delta)
    assert rt.acceptance_bound(K + 1, delta) >= b - 1e-15
    assert rt.acceptance_bound(K, delta + step) <= b + 1e-15


@FAST
@given(K=st.integers(1, 12), delta=st.floats(0.0, 8.0), s=st.floats(-8.0, 12.0), k=st.integers(1, 12))
def test_batch_accept_prob_is_a_probability(K, delta, s, k):
    p = dgrs.batch_accept_prob(k, np.array([delta]), np.array([s]))
    assert 0.0 <= p[0] <= 1.0


@needs_rass
@RASS
@given(K=st.integers(1, 12), delta=deltas, seed=st.integers(0, 2**31))
def test_rass_in_unit_interval_and_below_bound(K, delta, seed):
    a = rt.acceptance("rass", K, delta, weights=_weights(K, seed))
    assert 0.0 <= a <= rt.acceptance_bound(K, delta) + 1e-12


@needs_rass
@RASS
@given(delta=deltas)
def test_rass_K1_is_rmc(delta):
    assert rt.acceptance("rass", 1, delta, weights=[1.0]) == pytest.approx(rt.acceptance("rmc", 1, delta), abs=1e-14)


@needs_rass
@RASS
@given(K=st.integers(1, 16), delta=deltas)
def test_rass_uniform_weights_is_rmc(K, delta):
    a = rt.acceptance("rass", K, delta, weights=np.full(K, 1.0 / K))
    assert a == pytest.approx(rt.acceptance("rmc", 1, delta), abs=1e-13)


@settings(max_examples=6, deadline=None)
@given(K=st.integers(2, 8), delta=st.floats(0.05, 6.0))
def test_rass_optimum_dominates_uniform_and_top(K, delta):
    pytest.importorskip("rass_theory.optimize.rank_weights")
    if not _HAS_RASS:
        pytest.skip("rass_theory.exact.rass not available yet")
    opt = rt.acceptance("rass", K, delta)
    top = np.zeros(K)
    top[-1] = 1.0
    uniform = rt.acceptance("rass", K, delta, weights=np.full(K, 1.0 / K))
    best_fixed = max(uniform, rt.acceptance("rass", K, delta, weights=top))
    assert opt >= best_fixed - 1e-9
    assert opt <= rt.acceptance_bound(K, delta) + 1e-9
