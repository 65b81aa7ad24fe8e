"""Exact laws of one speculative node in the rank-1 coordinate ``s`` (``proofs/P1-rank1-reduction.md``).

Public names (re-exported here; implementation modules are one topic each):

- :func:`acceptance`, :func:`rejection_probability`, :data:`RULES` — the rule dispatcher
  (:mod:`.acceptance`).
- :func:`dgrs_residual_masses` and the closed-form D-GRS levels (:mod:`.dgrs`).
- :func:`acceptance_bound`, :func:`bound_threshold`, :func:`list_coupling_bound` — the
  list-coupling bound (:mod:`.bound`).
- :func:`selected_law`, :func:`residual_law` (:mod:`.selected`), :func:`rass_acceptance`,
  :func:`rass_tv` (:mod:`.rass`) — the RASS selected law and its maximal coupling, loaded on
  first use.

Batch helpers for the verifiers live in :mod:`.batch` and :mod:`.dgrs`
(``docs/ARCHITECTURE.md``).  Proofs: ``proofs/README.md``.
"""
from __future__ import annotations

import importlib

# the submodule ``acceptance`` shares its name with the function; importing the function here
# (after the submodule has loaded) makes ``rass_theory.exact.acceptance`` the function.
from rass_theory.exact.acceptance import RULES, acceptance, rejection_probability
from rass_theory.exact.bound import BoundResult, acceptance_bound, bound_threshold, list_coupling_bound
from rass_theory.exact.dgrs import DGRSLevels, dgrs_residual_masses

# names provided by modules loaded on first use: name -> module
_LAZY = {
    "selected_law": "rass_theory.exact.selected",
    "residual_law": "rass_theory.exact.selected",
    "rass_acceptance": "rass_theory.exact.rass",
    "rass_tv": "rass_theory.exact.rass",
}

__all__ = [
    "RULES",
    "acceptance",
    "rejection_probability",
    "acceptance_bound",
    "bound_threshold",
    "list_coupling_bound",
    "BoundResult",
    "dgrs_residual_masses",
    "DGRSLevels",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rass_theory.exact' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
