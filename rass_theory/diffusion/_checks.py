"""Argument checks and small helpers shared by the NumPy and torch samplers.

They live below :mod:`.kernel`, :mod:`.plain`, :mod:`.speculative` and :mod:`.torch_sampler` so
that the torch sampler, which the NumPy entry points dispatch to, imports none of them back.
"""
from __future__ import annotations

import numpy as np

from ..backend import NAMES as _BACKEND_NAMES

__all__ = ["check_target", "check_backend", "check_bool", "check_prefetch", "unfinished_rows",
           "PREFETCH_MODES"]

#: how the next round's frozen draft velocity is chosen (P9 section 3)
PREFETCH_MODES = ("nearest", "parent", "none")


def check_target(target):
    """The target must expose ``dim`` and ``velocity(x, s)`` (a GaussianMixture or a torch model does)."""
    if not (hasattr(target, "velocity") and hasattr(target, "dim")):
        raise TypeError(f"target must have .dim and .velocity(x, s) (e.g. a GaussianMixture), "
                        f"got {type(target).__name__}")
    return target


def check_backend(backend) -> str:
    """Validate a sampler backend name: one of :data:`rass_theory.backend.NAMES` (the array type the chain runs in)."""
    if not isinstance(backend, str) or backend not in _BACKEND_NAMES:
        raise ValueError(f"backend must be one of {list(_BACKEND_NAMES)}, got {backend!r}")
    return backend


def check_bool(value, name: str) -> bool:
    """Validate a flag: a Python or NumPy bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_prefetch(prefetch) -> str:
    """Validate the ``prefetch`` mode of the next round's frozen draft velocity (:data:`PREFETCH_MODES`)."""
    if not isinstance(prefetch, str) or prefetch not in PREFETCH_MODES:
        raise ValueError(f"prefetch must be one of {list(PREFETCH_MODES)}, got {prefetch!r}")
    return prefetch


def unfinished_rows(step, stop):
    """Yield, once per round, the trajectories whose ``step`` is still below ``stop``.

    ``step`` is read afresh before each round (the caller advances it in place); the iteration
    ends when every trajectory has reached ``stop``.
    """
    while True:
        active = np.flatnonzero(step < stop)
        if active.size == 0:
            return
        yield active
