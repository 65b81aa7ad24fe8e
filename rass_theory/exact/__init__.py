"""Exact laws of one speculative node in the rank-1 coordinate ``s`` (``proofs/P1-rank1-reduction.md``).

Public names (re-exported here; implementation modules are one topic each):

- :data:`RULES`; the closed-form rules and rule validation are :mod:`.acceptance` (the public
  ``acceptance`` of every rule is :mod:`rass_theory.optimize.dispatch`, ``rt.acceptance``).
- :func:`dgrs_residual_masses` and the closed-form D-GRS levels (:mod:`.dgrs`).
- :func:`acceptance_bound`, :func:`bound_threshold`, :func:`list_coupling_bound` — the
  list-coupling bound (:mod:`.bound`).
- :func:`selected_law`, :func:`residual_law` (:mod:`.selected`), :func:`rass_acceptance`,
  :func:`rass_tv` (:mod:`.rass`) — the RASS selected law and its maximal coupling.
- The residual-law engine: :mod:`.laws` (the selected laws and the one crossing search,
  masses and inverse-CDF draws; its root finder is ``backend.NUMPY.find_root``), :mod:`._window`
  (the truncation window), :mod:`.batch` (per-row wrappers for arrays and callables) and
  :mod:`.segments` (mixtures of segments: acceptance, TV, gradient, certified gap).

Batch helpers for the verifiers live in :mod:`.batch` and :mod:`.dgrs`
(``docs/ARCHITECTURE.md``).  Proofs: ``proofs/README.md``.
"""
from __future__ import annotations

from rass_theory.exact.acceptance import RULES
from rass_theory.exact.bound import BoundResult, acceptance_bound, bound_threshold, list_coupling_bound
from rass_theory.exact.dgrs import DGRSLevels, dgrs_residual_masses
from rass_theory.exact.rass import rass_acceptance, rass_tv
from rass_theory.exact.selected import residual_law, selected_law

__all__ = [
    "RULES",
    "acceptance_bound",
    "bound_threshold",
    "list_coupling_bound",
    "BoundResult",
    "dgrs_residual_masses",
    "DGRSLevels",
    "selected_law",
    "residual_law",
    "rass_acceptance",
    "rass_tv",
]
