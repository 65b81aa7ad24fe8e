"""Shared machinery of the batched verifiers: input checks, rank-1 projection, rebuilds.

Every verifier follows the same three steps (proof ``P1-rank1-reduction``):

1. validate the node batch and project every child on the node's unit direction ``e`` with one
   einsum, ``s[i, k] = <children[i, k] - mu_draft[i], e[i]> / sigma[i]`` (the orthogonal parts are
   never formed);
2. decide, per row, in the scalar coordinate ``s`` only;
3. copy the accepted child's row, and rebuild only the rejected rows as
   ``children[i, k] + sigma[i] (s'[i] - s[i, k]) e[i]``, which equals
   ``mu_draft + sigma (s' e + z_perp[i, k])``: the state with child ``k``'s orthogonal part.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_generator
from ..frame import Rank1Frame, validate_node_inputs
from ._result import VerifierResult

__all__ = ["BatchShape", "NodeBatch", "prepare", "finish", "draw_uniforms"]


class BatchShape:
    """``n``, ``K`` and ``d`` of a node batch, read from its ``children (n, K, d)`` (NumPy or torch)."""

    n = property(lambda self: self.children.shape[0], doc="Number of nodes.")
    K = property(lambda self: self.children.shape[1], doc="Children per node.")
    d = property(lambda self: self.children.shape[2], doc="State dimension.")


@dataclass(frozen=True)
class NodeBatch(BatchShape):
    """A validated batch of nodes in rank-1 coordinates.

    Attributes
    ----------
    children : ndarray (n, K, d)
    frame : Rank1Frame
    s : ndarray (n, K), float64
        Standardised projections of the children on ``e``.
    rng : numpy.random.Generator
    """

    children: np.ndarray
    frame: Rank1Frame
    s: np.ndarray
    rng: np.random.Generator

    @property
    def delta(self) -> np.ndarray:
        return self.frame.delta

    @property
    def degenerate(self) -> np.ndarray:
        return self.frame.degenerate


def prepare(children, mu_draft, mu_target, sigma, rng, *, K: int | None = None,
            project: bool = True) -> NodeBatch:
    """Validate the contract's inputs and project the children (one einsum over the batch).

    Parameters
    ----------
    K : int, optional
        Required number of children per node (``ValueError`` naming ``children`` otherwise).
    project : bool
        Skip the projection for rules that ignore the drafts.
    """
    children, mu_draft, mu_target, sig = validate_node_inputs(children, mu_draft, mu_target, sigma)
    if K is not None and children.shape[1] != K:
        raise ValueError(f"children must have K = {K} child(ren) per node for this verifier, "
                         f"got shape {children.shape}")
    gen = as_generator(rng)
    frame = Rank1Frame.from_means(mu_draft, mu_target, sig)
    if project:
        # the projection, like the frame and every decision, is float64 for any input dtype
        # (float32 children are exact in float64): proofs/P1-rank1-reduction.md
        e = frame.direction
        s = np.einsum("nkd,nd->nk", children, e, dtype=np.float64)
        s -= np.einsum("nd,nd->n", mu_draft, e, dtype=np.float64)[:, None]
        s /= frame.sigma[:, None]
    else:
        s = np.empty((children.shape[0], 0))
    return NodeBatch(children, frame, s, gen)


def draw_uniforms(batch: NodeBatch, m: int) -> np.ndarray:
    """Draw the batch's uniforms up front in a fixed ``(n, m)`` layout.

    Row ``i`` always receives stream positions ``i*m .. i*m + m - 1``, so its output depends only
    on its own inputs and on those numbers (rows are independent and reproducible).
    """
    return batch.rng.random((batch.n, m))


def finish(batch: NodeBatch, chosen: np.ndarray, accepted: np.ndarray, new_s: np.ndarray | None,
           rejected_rows: np.ndarray | None = None, z_perp_fresh: np.ndarray | None = None) -> VerifierResult:
    """Assemble the result: copy the chosen child per row, rebuild the rejected rows.

    Parameters
    ----------
    chosen : int array (n,)
        Child whose row is copied (the accepted child; on rejected rows the child whose
        orthogonal part the correction keeps).
    accepted : bool array (n,)
    new_s : float array (r,)
        Corrected coordinate ``s'`` for the ``r`` rejected rows (in row order).
    rejected_rows : int array (r,), optional
        Defaults to ``flatnonzero(~accepted)``.
    z_perp_fresh : float array (r, d), optional
        Replace the chosen child's orthogonal part by this one on the rejected rows
        (must already be orthogonal to ``e``).
    """
    n = batch.n
    rows = np.arange(n)
    ch = batch.children
    if ch.flags.c_contiguous:
        # one take along the flattened (n*K) axis: the copy of each chosen row, bit for bit
        states = np.take(ch.reshape(-1, ch.shape[2]), rows * ch.shape[1] + chosen, axis=0)
    else:
        states = ch[rows, chosen]  # fancy indexing copies: (n, d)
    if rejected_rows is None:
        rejected_rows = np.flatnonzero(~accepted)
    if rejected_rows.size:
        r = rejected_rows
        e = batch.frame.direction[r]
        sig = batch.frame.sigma[r]
        if z_perp_fresh is None:
            shift = sig * (new_s - batch.s[r, chosen[r]])
            states[r] = states[r] + (shift[:, None] * e).astype(states.dtype, copy=False)
        else:
            rebuilt = batch.frame.mu_draft[r] + sig[:, None] * (new_s[:, None] * e + z_perp_fresh)
            states[r] = rebuilt.astype(states.dtype, copy=False)
    index = np.where(accepted, chosen, -1).astype(np.int64)
    return VerifierResult(states, np.asarray(accepted, dtype=bool), index)
