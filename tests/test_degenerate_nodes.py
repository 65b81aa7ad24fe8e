"""Nodes with tiny ``delta``: the output law is the target law in float32 and float64, on both backends.

The rank-1 frame and every accept/reject decision are computed in float64 whatever the inputs'
dtype (issue 14, proof ``proofs/P1-rank1-reduction.md``), so only nodes with
``delta <= sqrt(eps_64) ~ 1.49e-8`` take the degenerate shortcut (accept child 0), at a cost of
``TV = 2 Phi(delta/2) - 1 <= 5.9e-9`` per node.  Before, float32 inputs used
``sqrt(eps_32) ~ 3.45e-4`` (TV up to ``1.38e-4`` per node).

What each case measures, for RMC (K = 1) and RASS with uniform weights (K = 2), both of which
reject with probability ``TV(N(0, 1), N(delta, 1)) = 2 Phi(delta/2) - 1``:

* the number of rejections against ``Binomial(n, TV)``: the sensitive check.  At
  ``delta = 1e-5`` and ``n = 3e6`` the expected count is 12.0; the old float32 shortcut gave 0
  (two-sided p-value ``2 e^-12 = 1.2e-5``), so this check fails on the old code.  A count is
  accepted when its two-sided binomial p-value exceeds ``1e-4``.
* the output coordinate ``s - delta`` (``s`` measured in float64 from the output states):
  its mean against 0 with standard error ``1/sqrt(n)`` (``|z| < 4.5``) and a KS test against
  ``N(0, 1)`` (p-value ``> 1e-4``).  These check that the correction is the target law; at
  these ``delta`` they cannot see the draft/target difference itself (``delta << 1/sqrt(n)``).
* inside the float64 band (``delta = 1e-12, 1e-8``) every row accepts child 0 and its state is
  the child bit for bit.
"""
import math

import numpy as np
import pytest
from scipy import stats

from rass_theory import verifiers

N_ROWS = 3_000_000
DELTAS = (1e-12, 1e-8, 1e-5, 1e-3)
TOL64 = math.sqrt(np.finfo(np.float64).eps)


def _nodes(delta, dtype, seed):
    """One node repeated ``N_ROWS`` times: mu_draft = 0, e = e_1, sigma = 1, d = 2, K = 2 children."""
    rng = np.random.default_rng(seed)
    mu_draft = np.zeros((N_ROWS, 2), dtype=dtype)
    mu_target = mu_draft.copy()
    mu_target[:, 0] = delta
    children = rng.standard_normal((N_ROWS, 2, 2)).astype(dtype)
    # the displacement the verifier sees: the float32 (or float64) means, exactly, in float64
    actual = float(np.float64(mu_target[0, 0]))
    return children, mu_draft, mu_target, actual


def _rules(backend):
    if backend == "numpy":
        return {"rmc": (verifiers.rmc(), 1), "rass": (verifiers.rass(weights="uniform"), 2)}
    tv = pytest.importorskip("rass_theory.torch.verifiers")
    return {"rmc": (tv.rmc(), 1), "rass": (tv.rass(weights="uniform"), 2)}


def _run(backend, rule, delta, dtype, seed):
    children, mu_draft, mu_target, actual = _nodes(delta, dtype, seed)
    verifier, K = _rules(backend)[rule]
    children = np.ascontiguousarray(children[:, :K])
    if backend == "numpy":
        res = verifier(children, mu_draft, mu_target, 1.0, seed)
        states, accepted, index = res.states, res.accepted, res.child_index
    else:
        import torch

        torch.set_num_threads(1)
        t = torch.from_numpy
        res = verifier(t(children), t(mu_draft), t(mu_target), 1.0, seed)
        states, accepted, index = res.states.numpy(), res.accepted.numpy(), res.child_index.numpy()
    return children, states, accepted, index, actual


def _binomial_pvalue(count, n, p):
    """Two-sided p-value of ``count`` under ``Binomial(n, p)`` (doubling the smaller tail)."""
    if p == 0.0:
        return 1.0 if count == 0 else 0.0
    lower = stats.binom.cdf(count, n, p)
    upper = stats.binom.sf(count - 1, n, p)
    return min(1.0, 2.0 * min(lower, upper))


def _cases():
    """All 32 cases; the fast path keeps RMC at delta = 1e-12 and 1e-5 (the others are slow)."""
    for rule in ("rmc", "rass"):
        for delta in DELTAS:
            for dtype in (np.float32, np.float64):
                for backend in ("numpy", "torch"):
                    fast = rule == "rmc" and delta in (1e-12, 1e-5)
                    yield pytest.param(rule, delta, dtype, backend, marks=() if fast else pytest.mark.slow,
                                       id=f"{rule}-{delta:g}-{np.dtype(dtype).name}-{backend}")


@pytest.mark.parametrize("rule,delta,dtype,backend", list(_cases()))
def test_degenerate_output_law(rule, delta, dtype, backend):
    seed = 1000 + DELTAS.index(delta) * 10 + (dtype is np.float32) + 5 * (rule == "rass")
    children, states, accepted, index, actual = _run(backend, rule, delta, dtype, seed)
    assert states.dtype == dtype
    tv = 2.0 * stats.norm.cdf(actual / 2.0) - 1.0          # the exact rejection probability
    n_rejected = int((~accepted).sum())
    if actual <= TOL64:
        # degenerate in every dtype: child 0, bit for bit; the law error is TV <= 5.9e-9
        assert tv <= 5.9e-9
        assert n_rejected == 0 and (index == 0).all()
        np.testing.assert_array_equal(states, children[:, 0])
        return
    p = _binomial_pvalue(n_rejected, N_ROWS, tv)
    assert p > 1e-4, f"{n_rejected} rejections, expected {N_ROWS * tv:.2f} (p = {p:.2e})"
    # accepted rows are exact copies of the chosen child
    rows = np.flatnonzero(accepted)
    np.testing.assert_array_equal(states[rows], children[rows, index[rows]])
    # the output law of s: N(delta, 1)
    s = states[:, 0].astype(np.float64)
    z = (s - actual).mean() * math.sqrt(N_ROWS)
    assert abs(z) < 4.5, f"mean of s - delta is {z:.2f} standard errors from 0"
    assert stats.kstest(s - actual, "norm").pvalue > 1e-4
    # the orthogonal coordinate is untouched: N(0, 1)
    assert stats.kstest(states[:, 1].astype(np.float64), "norm").pvalue > 1e-4
