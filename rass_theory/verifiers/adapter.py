"""Adapter from a rule written for one node at a time to the batched verifier contract."""
from __future__ import annotations

import numpy as np

from .._validation import as_generator
from ..frame import validate_node_inputs
from ._result import VerifierResult

__all__ = ["NodeRuleVerifier", "from_node_rule"]


class NodeRuleVerifier:
    """Batched wrapper around a single-node rule (loops over rows; for prototypes).

    Parameters
    ----------
    rule : callable
        ``rule(children (K, d), mu_draft (d,), mu_target (d,), sigma float, rng) -> (state, child_index)``
        where ``child_index`` is the committed child's index, or ``-1``/``None`` for a correction.
    name : str, optional
    """

    def __init__(self, rule, name: str | None = None):
        if not callable(rule):
            raise TypeError(f"rule must be callable, got {type(rule).__name__}")
        self.rule = rule
        self.name = name or getattr(rule, "__name__", "node_rule")

    def __repr__(self) -> str:
        return f"NodeRuleVerifier({self.name})"

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        children, mu_draft, mu_target, sig = validate_node_inputs(children, mu_draft, mu_target, sigma)
        gen = as_generator(rng)
        n, K, d = children.shape
        states = np.empty((n, d), dtype=children.dtype)
        index = np.full(n, -1, dtype=np.int64)
        for i in range(n):
            out = self.rule(children[i], mu_draft[i], mu_target[i], float(sig[i]), gen)
            try:
                state, k = out
            except (TypeError, ValueError) as exc:
                raise TypeError(f"rule {self.name!r} must return (state, child_index), got {type(out).__name__}") from exc
            state = np.asarray(state)
            if state.shape != (d,):
                raise ValueError(f"rule {self.name!r} returned a state of shape {state.shape} for row {i}; expected ({d},)")
            states[i] = state
            if k is not None:
                k = int(k)
                if not -1 <= k < K:
                    raise ValueError(f"rule {self.name!r} returned child_index {k} for row {i}; must lie in [-1, {K - 1}]")
                index[i] = k
        return VerifierResult(states, index >= 0, index)


def from_node_rule(rule, name: str | None = None) -> NodeRuleVerifier:
    """Adapt a rule written one node at a time to the batched verifier contract.

    Parameters
    ----------
    rule : callable
        ``rule(children (K, d), mu_draft (d,), mu_target (d,), sigma float, rng) -> (state, child_index)``;
        ``child_index`` is ``-1`` (or ``None``) when the state is a correction.
    name : str, optional
        Name shown in reports (defaults to the function's ``__name__``).

    Returns
    -------
    NodeRuleVerifier
        A batched verifier that calls ``rule`` once per row in row order, sharing one generator
        (so results are reproducible for a fixed seed, but the random numbers a row sees depend
        on how many earlier rows consumed).  ``accepted = child_index >= 0``; whether the state of
        an accepted row really is that child is left to :func:`check_contract`.

    Notes
    -----
    This is a Python loop over rows: meant for checking prototypes with the harness, not for
    speed.
    """
    return NodeRuleVerifier(rule, name)
