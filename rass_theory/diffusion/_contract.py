"""Resolve verifier specs and check each verifier result against the contract (``docs/ARCHITECTURE.md``)."""
from __future__ import annotations

import functools

import numpy as np

from ..verifiers._contract import ContractViolation, contract_check

__all__ = ["resolve_verifier", "verifier_name", "check_result", "snapped_threshold_verifier", "THRESHOLD_GRID"]

#: grid on which the threshold policy's parameters are optimised in diffusion runs
THRESHOLD_GRID = np.concatenate([np.arange(0.0, 4.01, 0.25), [5.0, 6.0, 8.0]])


@functools.lru_cache(maxsize=512)
def _threshold_policy(K: int, delta: float):
    from ..optimize.policies import optimal_threshold_policy

    return optimal_threshold_policy(K, delta).policy


def snapped_threshold_verifier(grid=None):
    """Optimal threshold policy with its parameters chosen at the grid point below each delta.

    The built-in ``verifiers.threshold()`` reads per-row parameters from its certified table
    (``K <= 8``) or uses the family's RASS member (larger ``K``); this verifier instead solves
    the optimal policy once per grid point, for any ``K``.  A threshold policy is exact for
    any parameters (only its selected law, evaluated at the row's true ``delta``, enters the
    accept/correct step; proof P2), so snapping the *choice* of parameters to ``grid`` costs only
    optimality (at most one grid cell's worth of acceptance).
    """
    from ..verifiers import PolicyVerifier

    g = THRESHOLD_GRID if grid is None else np.sort(np.asarray(grid, dtype=float))

    def factory(K, delta):
        point = g[max(0, np.searchsorted(g, delta, side="right") - 1)]
        return _threshold_policy(int(K), float(point))

    return PolicyVerifier(factory, name="threshold")


def resolve_verifier(spec, K: int):
    """Return a callable verifier for ``K`` children: a rule name or a user callable.

    ``"threshold"`` resolves to :func:`snapped_threshold_verifier` (see there why); other names
    go through :func:`rass_theory.verifiers.get_verifier`.
    """
    if isinstance(spec, str):
        from ..verifiers import get_verifier, rule_key

        if rule_key(spec) == "threshold":
            return snapped_threshold_verifier()
        return get_verifier(spec, K)
    if callable(spec):
        return spec
    raise TypeError(f"verifier must be a rule name ('rmc', 'dgrs', 'rass', 'threshold', 'optimal_list') or a callable, "
                    f"got {type(spec).__name__}")


def verifier_name(spec) -> str:
    """A short display name: the rule name, else the callable's ``name``/``__name__``."""
    if isinstance(spec, str):
        from ..verifiers import rule_key

        return rule_key(spec)
    for attr in ("name", "__name__"):
        value = getattr(spec, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(spec).__name__


def check_result(result, children, *, values: bool = True):
    """Validate one verifier result; return ``(states, accepted, child_index)``.

    The contract is checked by the one checker,
    :func:`rass_theory.verifiers._contract.contract_check`.  A result without the three fields is
    a ``TypeError``; any other broken clause a ``ValueError`` whose message starts with
    ``verifier broke the contract`` and names every clause broken
    (:class:`~rass_theory.verifiers.ContractViolation`).

    With ``values=False`` (the torch sampler, every round) only the whole-array clauses are
    checked, from metadata (no host synchronisation), and the fields come back as given, the
    index as int64.  NumPy results come back as float64 states and int64 indices.
    """
    found = contract_check(result, children, values=values)
    if any(i.kind == "missing_field" for i in found.issues):
        raise TypeError("verifier must return an object with .states, .accepted and .child_index "
                        f"(got {type(result).__name__})")
    if found.issues:
        raise ContractViolation(found.issues)
    if not values:
        index = found.child_index
        return found.states, found.accepted, index.long() if hasattr(index, "long") else index
    return (found.states.astype(np.float64, copy=False), found.accepted,
            found.child_index.astype(np.int64, copy=False))
