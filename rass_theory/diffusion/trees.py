"""Draft-tree shapes and the two budget matchings used to compare trees with chains."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int

__all__ = ["TreeShape", "BUDGETS", "matched_chain"]

#: budget name -> what is held equal between a tree and its comparator chain
BUDGETS = {
    "target_nodes": "target-evaluated (internal) nodes per round",
    "drafted_nodes": "drafted nodes per round",
}


@dataclass(frozen=True)
class TreeShape:
    """Per-depth widths ``(K_0, ..., K_{L-1})``: every node at depth ``j < L`` has ``K_j`` children.

    Build with :meth:`uniform` (``K`` children at every depth), :meth:`chain` (``K = 1``) or
    directly from a tuple of widths.

    Notes
    -----
    Depth-``j`` nodes number ``N_j = prod_{i<j} K_i`` (``N_0 = 1``: the round's root).

    * target-evaluated nodes per round ``= sum_{j=0}^{L-1} N_j`` (the internal nodes, root
      included: their target means are needed to verify their children);
    * drafted nodes per round ``= sum_{j=1}^{L} N_j`` (every non-root node is a draft draw).

    A uniform ``(K, L) = (4, 3)`` tree has ``1 + 4 + 16 = 21`` target-evaluated and
    ``4 + 16 + 64 = 84`` drafted nodes; a chain of length ``L`` has ``L`` of each.
    """

    widths: tuple

    def __post_init__(self):
        if isinstance(self.widths, (int, np.integer)):
            raise TypeError("widths must be a sequence of positive integers; use TreeShape.uniform(K, L)")
        widths = tuple(check_positive_int(k, "K") for k in self.widths)
        if len(widths) == 0:
            raise ValueError("L (the tree depth) must be >= 1: widths must not be empty")
        object.__setattr__(self, "widths", widths)

    @classmethod
    def uniform(cls, K: int, L: int) -> "TreeShape":
        K = check_positive_int(K, "K")
        L = check_positive_int(L, "L")
        return cls((K,) * L)

    @classmethod
    def chain(cls, L: int) -> "TreeShape":
        return cls.uniform(1, L)

    @classmethod
    def from_spec(cls, K, L: int | None = None) -> "TreeShape":
        """``K`` an int with ``L`` (uniform tree), or a sequence of widths (``L`` None or its length)."""
        if isinstance(K, TreeShape):
            shape = K
        elif isinstance(K, (int, np.integer)) and not isinstance(K, bool):
            if L is None:
                raise ValueError("L must be given when K is a single integer")
            return cls.uniform(K, L)
        else:
            try:
                shape = cls(tuple(K))
            except TypeError as exc:
                raise TypeError(f"K must be a positive integer or a sequence of them, got {K!r}") from exc
        if L is not None and check_positive_int(L, "L") != shape.depth:
            raise ValueError(f"L={L} does not match the {shape.depth} per-depth widths {shape.widths}")
        return shape

    @property
    def depth(self) -> int:
        return len(self.widths)

    def nodes_at_depth(self, j: int) -> int:
        return int(np.prod(self.widths[:j], dtype=np.int64))

    @property
    def target_nodes(self) -> int:
        return sum(self.nodes_at_depth(j) for j in range(self.depth))

    @property
    def drafted_nodes(self) -> int:
        return sum(self.nodes_at_depth(j) for j in range(1, self.depth + 1))

    @property
    def is_chain(self) -> bool:
        return all(k == 1 for k in self.widths)

    def truncated(self, L: int) -> "TreeShape":
        """The same tree cut at depth ``min(L, depth)`` (the end of the stochastic schedule)."""
        return TreeShape(self.widths[: max(1, min(L, self.depth))])

    def label(self) -> str:
        if len(set(self.widths)) == 1:
            return f"K={self.widths[0]},L={self.depth}"
        return "K=(" + ",".join(map(str, self.widths)) + ")"


def matched_chain(shape: TreeShape, budget: str) -> TreeShape:
    """The chain with the same per-round budget as ``shape``.

    ``budget="target_nodes"``: chain length = the tree's target-evaluated nodes;
    ``budget="drafted_nodes"``: chain length = the tree's drafted nodes.
    """
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    length = shape.target_nodes if budget == "target_nodes" else shape.drafted_nodes
    return TreeShape.chain(length)
