"""Shared machinery of the batched verifiers on both back ends: the node batch and the rebuild.

Every verifier follows the same three steps (proof ``P1-rank1-reduction``):

1. validate the node batch and project every child on the node's unit direction ``e`` with one
   einsum (NumPy) or batched matmul (torch),
   ``s[i, k] = <children[i, k] - mu_draft[i], e[i]> / sigma[i]`` (the orthogonal parts are
   never formed);
2. decide, per row, in the scalar coordinate ``s`` only (:mod:`rass_theory.verifiers.kernels`);
3. copy the accepted child's row, and rebuild only the rejected rows as
   ``children[i, k] + sigma[i] (s'[i] - s[i, k]) e[i]``, which equals
   ``mu_draft + sigma (s' e + z_perp[i, k])``: the state with child ``k``'s orthogonal part.

:class:`NodeBatch` and :func:`finish` (:mod:`._batch`) are written once against the array
namespace ``nx`` (:mod:`rass_theory.backend`); only the input checks differ: NumPy checks values
here (NaN, infinities), torch checks metadata only in :mod:`._tensors` (reading values would
synchronise an accelerator).  :func:`prepare` picks one by the inputs' kind.
"""
from __future__ import annotations

import numpy as np

from .._validation import as_generator
from ..backend import NUMPY, get_backend
from ..frame import Rank1Frame, check_finite, validate_node_inputs
from ._batch import BatchShape, NodeBatch, finish, project_children

__all__ = ["BatchShape", "NodeBatch", "prepare", "finish", "project_children"]


def prepare(children, mu_draft, mu_target, sigma, rng, *, K: int | None = None,
            project: bool = True) -> NodeBatch:
    """Validate the contract's inputs and project the children (one einsum over the batch).

    NumPy inputs are checked here (values included); torch tensors by
    :func:`rass_theory.verifiers._tensors.prepare` (metadata only).

    Parameters
    ----------
    K : int, optional
        Required number of children per node (``ValueError`` naming ``children`` otherwise).
    project : bool
        Skip the projection for rules that ignore the drafts (NumPy; torch always projects).
    """
    if get_backend(children).name == "torch":
        from ._tensors import prepare as prepare_tensors

        return prepare_tensors(children, mu_draft, mu_target, sigma, rng, K=K)
    for name, value in (("mu_draft", mu_draft), ("mu_target", mu_target), ("sigma", sigma)):
        if get_backend(value).name == "torch":
            raise TypeError(f"children must be a torch.Tensor when {name} is one (pass NumPy arrays or torch "
                            f"tensors, not both)")
    # the means' finiteness is checked by the frame (mu_draft, then mu_target through the difference)
    children, mu_draft, mu_target, sig = validate_node_inputs(children, mu_draft, mu_target, sigma,
                                                              finite_children=not project, finite_means=False)
    if K is not None and children.shape[1] != K:
        raise ValueError(f"children must have K = {K} child(ren) per node for this verifier, "
                         f"got shape {children.shape}")
    gen = as_generator(rng)
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
    return NodeBatch(NUMPY, children, frame.mu_draft, frame.sigma, frame.direction, frame.delta,
                     frame.degenerate, s, gen)
