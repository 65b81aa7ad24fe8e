"""Resolve verifier specs and check each verifier result against the contract (``docs/ARCHITECTURE.md``)."""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["resolve_verifier", "verifier_name", "check_result", "snapped_threshold_verifier", "THRESHOLD_GRID"]

#: grid on which the threshold policy's parameters are optimised in diffusion runs
THRESHOLD_GRID = np.concatenate([np.arange(0.0, 4.01, 0.25), [5.0, 6.0, 8.0]])


@functools.lru_cache(maxsize=512)
def _threshold_policy(K: int, delta: float):
    from ..optimize.policies import optimal_threshold_policy

    return optimal_threshold_policy(K, delta).policy


def snapped_threshold_verifier(grid=None):
    """Optimal threshold policy with its parameters chosen at the grid point below each delta.

    The built-in ``verifiers.threshold()`` solves one optimisation per distinct ``delta`` of a
    batch; in a diffusion run every node has its own ``delta``.  A threshold policy is exact for
    any parameters (only its selected law, evaluated at the row's true ``delta``, enters the
    accept/correct step; proof P2), so snapping the *choice* of parameters to ``grid`` costs only
    optimality (at most one grid cell's worth of acceptance).
    """
    from ..verifiers import policy

    g = THRESHOLD_GRID if grid is None else np.sort(np.asarray(grid, dtype=float))

    def factory(K, delta):
        point = g[max(0, np.searchsorted(g, delta, side="right") - 1)]
        return _threshold_policy(int(K), float(point))

    v = policy(factory)
    try:
        v.name = "threshold"
    except AttributeError:  # pragma: no cover - read-only name
        pass
    return v


def resolve_verifier(spec, K: int):
    """Return a callable verifier for ``K`` children: a rule name or a user callable.

    ``"threshold"`` resolves to :func:`snapped_threshold_verifier` (see there why); other names
    go through :func:`rass_theory.verifiers.get_verifier`.
    """
    if isinstance(spec, str):
        from ..verifiers import get_verifier

        if spec.strip().lower() == "threshold":
            return snapped_threshold_verifier()
        return get_verifier(spec, K)
    if callable(spec):
        return spec
    raise TypeError(f"verifier must be a rule name ('rmc', 'dgrs', 'rass', 'threshold', 'optimal_list') or a callable, "
                    f"got {type(spec).__name__}")


def verifier_name(spec) -> str:
    """A short display name: the rule name, else the callable's ``name``/``__name__``."""
    if isinstance(spec, str):
        return spec.strip().lower().replace("-", "").replace("_", "")
    for attr in ("name", "__name__"):
        value = getattr(spec, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(spec).__name__


def check_result(result, children: np.ndarray):
    """Validate one verifier result; return ``(states, accepted, child_index)``.

    Raises ``TypeError``/``ValueError`` whose message starts with ``verifier`` and says which
    part of the contract broke.
    """
    n, K, d = children.shape
    try:
        states = np.asarray(result.states)
        accepted = np.asarray(result.accepted)
        child_index = np.asarray(result.child_index)
    except AttributeError as exc:
        raise TypeError("verifier must return an object with .states, .accepted and .child_index "
                        f"(got {type(result).__name__})") from exc
    if states.shape != (n, d):
        raise ValueError(f"verifier broke the contract: states must have shape {(n, d)}, got {states.shape}")
    if accepted.shape != (n,) or accepted.dtype != np.bool_:
        raise ValueError(f"verifier broke the contract: accepted must be a bool array of shape {(n,)}, "
                         f"got {accepted.dtype} {accepted.shape}")
    if child_index.shape != (n,) or child_index.dtype.kind not in "iu":
        raise ValueError(f"verifier broke the contract: child_index must be an int array of shape {(n,)}, "
                         f"got {child_index.dtype} {child_index.shape}")
    if states.dtype.kind != "f" or not np.all(np.isfinite(states)):
        raise ValueError("verifier broke the contract: states must be finite real numbers")
    if np.any(child_index[~accepted] != -1):
        raise ValueError("verifier broke the contract: child_index must be -1 where accepted is False")
    idx = child_index[accepted]
    if np.any((idx < 0) | (idx >= K)):
        raise ValueError(f"verifier broke the contract: child_index must lie in [0, {K - 1}] where accepted")
    rows = np.flatnonzero(accepted)
    if rows.size and not np.array_equal(states[rows], children[rows, idx]):
        raise ValueError("verifier broke the contract: where accepted, states must equal "
                         "children[i, child_index[i]] exactly")
    return states.astype(np.float64, copy=False), accepted, child_index.astype(np.int64, copy=False)
