"""Known-wrong torch verifiers: the mutants of :mod:`rass_theory.mutants` that run on tensors.

Every mutant built from the shared kernels of :mod:`rass_theory.verifiers.kernels` with one piece
swapped runs on both back ends, so the torch catalogue is not a port: it is the same factories,
filtered by :data:`rass_theory.mutants.MUTANT_BACKENDS`.  Each factory ``name(K)`` returns a verifier
whose ``expected_acceptance`` is that of the *exact* rule it imitates (what its author would
claim); the NumPy-only mutants (Box-Muller, row-roll and sign-tied orthogonal parts, the
4-sd truncated residual, sharded seeds) are left out.
"""
from __future__ import annotations

from .. import mutants as _catalogue
from ..mutants import MutantVerifier

__all__ = ["MUTANTS", "all_mutants", "MutantVerifier"]

#: name -> factory(K) of the mutants that run on torch tensors.
MUTANTS: dict = {name: factory for name, factory in _catalogue.MUTANTS.items()
                 if "torch" in _catalogue.MUTANT_BACKENDS[name]}

globals().update(MUTANTS)   # tm.single_draft_residual(4), ... as before


def all_mutants(K: int = 4) -> dict:
    """Instantiate every torch mutant that applies to nodes with ``K`` children (name -> verifier)."""
    return _catalogue.all_mutants(K, backend="torch")
