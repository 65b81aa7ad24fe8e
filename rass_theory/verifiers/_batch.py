"""The node batch of the verifiers on both back ends, and the rebuild of the committed states.

:class:`NodeBatch` (the validated batch in rank-1 coordinates) and :func:`finish` (copy the
chosen child per row, rebuild the rejected rows as ``children[i, k] + sigma[i] (s'[i] - s[i, k]) e[i]``)
are written once against the array namespace ``nx`` (:mod:`rass_theory.backend`); the input
checks that build a batch live in :mod:`._core` (NumPy) and :mod:`._tensors` (torch), both of
which import this module (proof ``P1-rank1-reduction``).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..backend import NUMPY
from ..frame import Rank1Frame, check_finite, validate_node_inputs
from ._result import VerifierResult

__all__ = ["BatchShape", "NodeBatch", "project_children", "prepare_arrays", "finish"]


class BatchShape:
    """``n``, ``K`` and ``d`` of a node batch, read from its ``children (n, K, d)`` (NumPy or torch)."""

    n = property(lambda self: self.children.shape[0], doc="Number of nodes.")
    K = property(lambda self: self.children.shape[1], doc="Children per node.")
    d = property(lambda self: self.children.shape[2], doc="State dimension.")


@dataclass(frozen=True)
class NodeBatch(BatchShape):
    """A validated batch of nodes in rank-1 coordinates, on either back end.

    Attributes
    ----------
    nx : namespace
        :mod:`rass_theory.backend` namespace of the arrays.
    children : array (n, K, d)
        The inputs' dtype and device.
    mu_draft : array (n, d), float64
    sigma : array (n,), float64
    direction : array (n, d), float64
        Unit vector ``e`` (``e_1`` where ``mu_target == mu_draft``, on both back ends).
    delta : array (n,), float64
    degenerate : bool array (n,)
        ``delta <= sqrt(eps_float64)``: these rows accept child 0.
    s : array (n, K), float64
        Standardised projections of the children on ``e``.
    rng : numpy.random.Generator or torch.Generator
    result : type
        Result class (:class:`VerifierResult` or its torch twin).
    """

    nx: object
    children: object
    mu_draft: object
    sigma: object
    direction: object
    delta: object
    degenerate: object
    s: object
    rng: object
    result: type = VerifierResult

    @functools.cached_property
    def delta_safe(self):
        """``delta`` with degenerate rows replaced by 1 (keeps every scalar formula finite)."""
        return self.nx.where(self.degenerate, 1.0, self.delta)

    @property
    def device(self):
        """Device of the inputs (torch); ``"cpu"`` for NumPy."""
        return getattr(self.children, "device", "cpu")

    @property
    def dtype(self):
        """The compute dtype (float64) of ``s``, ``delta``, the laws and the uniforms."""
        return self.nx.float64

    @property
    def out_dtype(self):
        """The inputs' dtype: the dtype of the output states."""
        return self.children.dtype

    def uniform(self, *shape):
        """Uniforms of ``shape`` from the batch's generator (float64; row ``i`` of an ``(n, m)``
        draw takes stream positions ``i m .. i m + m - 1``, so rows are reproducible)."""
        return self.nx.uniform(self.rng, shape, self.children)


def project_children(nx, children, mu_draft, direction, sigma):
    """``s[i, k] = (<children[i, k], e[i]> - <mu_draft[i], e[i]>) / sigma[i]`` in float64."""
    s = nx.project(children, direction)
    s -= nx.rowdot(mu_draft, direction)[:, None]
    s /= sigma[:, None]
    return s


def prepare_arrays(children, mu_draft, mu_target, sigma, gen, *, K: int | None = None, project: bool = True,
                   nx=NUMPY, result=VerifierResult) -> NodeBatch:
    """Check NumPy inputs (values included) and build their batch, ``rng`` already a generator ``gen``.

    The NumPy side of :func:`rass_theory.verifiers._core.prepare`.  ``nx`` and ``result``: the
    batch's namespace and result type (the torch host path,
    :func:`rass_theory.verifiers._tensors.prepare`, passes its own).
    """
    # the means' finiteness is checked by the frame (mu_draft, then mu_target through the difference)
    children, mu_draft, mu_target, sig = validate_node_inputs(children, mu_draft, mu_target, sigma,
                                                              finite_children=not project, finite_means=False)
    if K is not None and children.shape[1] != K:
        raise ValueError(f"children must have K = {K} child(ren) per node for this verifier, "
                         f"got shape {children.shape}")
    frame = Rank1Frame.from_means(mu_draft, mu_target, sig)
    # the projection, like the frame and every decision, is float64 for any input dtype
    # (float32 children are exact in float64): proofs/P1-rank1-reduction.md
    if project:
        s = project_children(NUMPY, children, frame.mu_draft, frame.direction, frame.sigma)
        # every entry of children enters s (with a finite factor, or 0 * inf = NaN): one
        # reduction over s (n, K) instead of children (n, K, d)
        check_finite(s, "children", children)
    else:
        s = np.empty((children.shape[0], 0))
    return NodeBatch(nx, children, frame.mu_draft, frame.sigma, frame.direction, frame.delta,
                     frame.degenerate, s, gen, result)


def finish(batch: NodeBatch, chosen, accepted, new_s, rows=None, z_perp_fresh=None):
    """Assemble the result: copy the chosen child per row, rebuild the rejected rows.

    Parameters
    ----------
    chosen : int array (n,)
        Child whose row is copied (the accepted child; on rejected rows the child whose
        orthogonal part the correction keeps).
    accepted : bool array (n,)
    new_s : float array
        Corrected coordinate ``s'``: for the rows ``rows`` when given (in that order), else for
        every row (values on accepted rows are ignored).
    rows : int array (r,), optional
        The rejected rows, ``nx.rows_where(~accepted)`` by default.  On an accelerator, where
        that is ``None``, every row is rebuilt and merged with ``where``.
    z_perp_fresh : float array (r, d) or (n, d), optional
        Replace the chosen child's orthogonal part by this one on the rejected rows (``rows``
        given) or on every row (``rows`` ``None``); it must already be orthogonal to ``e``.
    """
    nx = batch.nx
    states = nx.take_rows(batch.children, chosen)              # exact copies, (n, d)
    index = nx.where(accepted, chosen, -1)
    if rows is None:
        rows = nx.rows_where(~accepted)
        if rows is not None:
            new_s = new_s[rows]
    if rows is None:                                            # accelerator: no host sync
        if z_perp_fresh is None:
            s_chosen = nx.take_along(batch.s, chosen)
            rebuilt = states + nx.cast((batch.sigma * (new_s - s_chosen))[:, None] * batch.direction, states.dtype)
        else:
            rebuilt = nx.cast(batch.mu_draft + batch.sigma[:, None] * (new_s[:, None] * batch.direction
                                                                      + z_perp_fresh), states.dtype)
        states = nx.where(accepted[:, None], states, rebuilt)
    elif rows.shape[0]:
        e = batch.direction[rows]
        sig = batch.sigma[rows]
        if z_perp_fresh is None:
            shift = (sig * (new_s - batch.s[rows, chosen[rows]]))[:, None] * e
            states = nx.add_rows(states, rows, shift)
        else:
            rebuilt = batch.mu_draft[rows] + sig[:, None] * (new_s[:, None] * e + z_perp_fresh)
            states[rows] = nx.cast(rebuilt, states.dtype)
    return batch.result(states, accepted, index)
