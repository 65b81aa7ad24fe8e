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
from ..frame import Rank1Frame, degenerate_tolerance
from ._result import VerifierResult

__all__ = ["NodeBatch", "prepare", "finish", "draw_uniforms"]


@dataclass(frozen=True)
class NodeBatch:
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
    def n(self) -> int:
        return self.children.shape[0]

    @property
    def K(self) -> int:
        return self.children.shape[1]

    @property
    def d(self) -> int:
        return self.children.shape[2]

    @property
    def delta(self) -> np.ndarray:
        return self.frame.delta

    @property
    def degenerate(self) -> np.ndarray:
        return self.frame.degenerate


def _check_array(value, name: str, ndim: int) -> np.ndarray:
    """Real array of ``ndim`` dimensions with finite entries (one reduction on the fast path)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    if arr.dtype.kind != "f":
        return arr.astype(np.float64)
    # a NaN or infinity makes the sum non-finite; a finite sum proves every entry finite
    # unless it overflowed, in which case the exact elementwise check decides
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(arr, axis=None)
    if not np.isfinite(total) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or infinity)")
    return arr


def validate_fast(children, mu_draft, mu_target, sigma):
    """Same checks and messages as :func:`rass_theory.frame.validate_node_inputs`, lean on memory.

    The finiteness test is one reduction per array instead of an elementwise boolean temporary
    of the size of ``children``.
    """
    children = _check_array(children, "children", 3)
    mu_draft = _check_array(mu_draft, "mu_draft", 2)
    mu_target = _check_array(mu_target, "mu_target", 2)
    n, K, d = children.shape
    if K < 1:
        raise ValueError("children must hold at least one child per node (K >= 1)")
    if mu_draft.shape != (n, d):
        raise ValueError(f"mu_draft must have shape (n, d) = {(n, d)} to match children, got {mu_draft.shape}")
    if mu_target.shape != (n, d):
        raise ValueError(f"mu_target must have shape (n, d) = {(n, d)} to match children, got {mu_target.shape}")
    try:
        sig = np.asarray(sigma, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"sigma must be a real number or an array of shape (n,), got {sigma!r}") from exc
    if sig.ndim == 0:
        sig = np.full(n, float(sig))
    if sig.shape != (n,):
        raise ValueError(f"sigma must be a scalar or have shape (n,) = {(n,)}, got {sig.shape}")
    if not np.all(np.isfinite(sig)) or np.any(sig <= 0):
        raise ValueError("sigma must be finite and > 0")
    return children, mu_draft, mu_target, sig


def frame_fast(mu_draft, mu_target, sig) -> Rank1Frame:
    """Build the :class:`Rank1Frame` of validated means with row-wise einsums.

    Same conventions as :meth:`Rank1Frame.from_means` (dtype ``result_type(means, float32)``,
    ``e = e_1`` for a zero displacement, ``degenerate = delta <= sqrt(eps)`` of that dtype).
    """
    dtype = np.result_type(mu_draft.dtype, mu_target.dtype, np.float32)
    n, d = mu_draft.shape
    diff = np.subtract(mu_target, mu_draft, dtype=dtype)
    norm = np.sqrt(np.einsum("nd,nd->n", diff, diff))
    nonzero = norm > 0
    direction = np.divide(diff, np.where(nonzero, norm, 1.0)[:, None], out=diff)
    if not nonzero.all():
        direction[~nonzero] = 0.0
        if d > 0:
            direction[~nonzero, 0] = 1.0
    sigma = sig.astype(dtype, copy=False)
    delta = norm / sigma
    degenerate = delta <= degenerate_tolerance(dtype)
    return Rank1Frame(mu_draft.astype(dtype, copy=False), sigma, direction, delta, degenerate)


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
    children, mu_draft, mu_target, sig = validate_fast(children, mu_draft, mu_target, sigma)
    if K is not None and children.shape[1] != K:
        raise ValueError(f"children must have K = {K} child(ren) per node for this verifier, "
                         f"got shape {children.shape}")
    gen = as_generator(rng)
    frame = frame_fast(mu_draft, mu_target, sig)
    if project:
        # work in the children's precision for the big contraction, float64 afterwards
        e = frame.direction.astype(children.dtype, copy=False)
        s = np.einsum("nkd,nd->nk", children, e).astype(np.float64, copy=False)
        s -= np.einsum("nd,nd->n", mu_draft, e).astype(np.float64)[:, None]
        s /= frame.sigma.astype(np.float64)[:, None]
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
