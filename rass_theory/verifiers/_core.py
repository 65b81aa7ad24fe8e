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

from .._validation import as_generator
from ..backend import get_backend
from ._batch import BatchShape, NodeBatch, finish, prepare_arrays, project_children

__all__ = ["BatchShape", "NodeBatch", "prepare", "finish", "project_children"]


def prepare(children, mu_draft, mu_target, sigma, rng, *, K: int | None = None,
            project: bool = True, host: bool = False) -> NodeBatch:
    """Validate the contract's inputs and project the children (one einsum over the batch).

    NumPy inputs are checked here (values included); torch tensors by
    :func:`rass_theory.verifiers._tensors.prepare` (metadata only).

    Parameters
    ----------
    K : int, optional
        Required number of children per node (``ValueError`` naming ``children`` otherwise).
    project : bool
        Skip the projection for rules that ignore the drafts (NumPy; torch always projects).
    host : bool
        CPU tensors may be decided on NumPy views (:func:`rass_theory.verifiers._tensors.prepare`):
        for callers that read the batch only through ``batch.nx``, ``batch.uniform`` and
        ``batch.result`` (the kernel verifiers).
    """
    if get_backend(children).name == "torch":
        from ._tensors import prepare as prepare_tensors

        return prepare_tensors(children, mu_draft, mu_target, sigma, rng, K=K, host=host)
    for name, value in (("mu_draft", mu_draft), ("mu_target", mu_target), ("sigma", sigma)):
        if get_backend(value).name == "torch":
            raise TypeError(f"children must be a torch.Tensor when {name} is one (pass NumPy arrays or torch "
                            f"tensors, not both)")
    return prepare_arrays(children, mu_draft, mu_target, sigma, as_generator(rng), K=K, project=project)
