"""The result object every batched verifier returns (the verifier contract, ``docs/ARCHITECTURE.md``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["VerifierResult"]


@dataclass(frozen=True)
class VerifierResult:
    """Output of one batched verification call.

    Attributes
    ----------
    states : ndarray, shape (n, d)
        The committed state of every node.  Same dtype as the children passed in.
    accepted : ndarray of bool, shape (n,)
        Whether the node committed one of its drafted children unchanged.
    child_index : ndarray of int64, shape (n,)
        Index (drafting order, ``0..K-1``) of the committed child, ``-1`` where not accepted.

    Notes
    -----
    The contract (checked by :func:`rass_theory.verifiers.check_contract`) is that wherever
    ``accepted[i]`` holds, ``states[i]`` is bit-for-bit ``children[i, child_index[i]]``: the
    verifier copies the child's row, it never reconstructs it from coordinates.
    """

    states: np.ndarray
    accepted: np.ndarray
    child_index: np.ndarray

    @property
    def n(self) -> int:
        """Number of nodes (rows) in the batch."""
        return int(self.accepted.shape[0])

    @property
    def n_accepted(self) -> int:
        """Number of nodes that committed a drafted child (a torch result synchronises here)."""
        return int(self.accepted.sum())

    @property
    def acceptance_rate(self) -> float:
        """Fraction of nodes that committed a drafted child (``nan`` for an empty batch)."""
        return self.n_accepted / self.n if self.n else float("nan")
