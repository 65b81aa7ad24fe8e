"""rass_theory: exact theory and exactness tests for speculative sampling in diffusion models.

The public names below are a stable contract (``docs/ARCHITECTURE.md``, "Public API and the
verifier contract").  They are
loaded lazily so that ``import rass_theory`` stays fast and does not import heavy optional
machinery (torch, dask, matplotlib) until it is used.

>>> import rass_theory as rt
>>> round(rt.acceptance("rmc", 1, 1.0), 6)
0.617075
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY_ATTRIBUTES = {
    "acceptance": "rass_theory.optimize.dispatch",
    "dgrs_residual_masses": "rass_theory.exact.dgrs",
    "rejection_probability": "rass_theory.optimize.dispatch",
    "acceptance_bound": "rass_theory.exact.bound",
    "bound_threshold": "rass_theory.exact.bound",
    "selected_law": "rass_theory.exact.selected",
    "residual_law": "rass_theory.exact.selected",
    "Rank1Frame": "rass_theory.frame",
    "optimal_rank_weights": "rass_theory.optimize.rank_weights",
    "optimal_list_rule": "rass_theory.optimize.list_rule",
    "optimal_weights_table": "rass_theory.optimize.rank_weights",
    "check_exactness": "rass_theory.scale.check",
    "certify": "rass_theory.scale.check",
}
_LAZY_SUBMODULES = {
    "exact", "optimize", "verifiers", "mutants", "stats", "diffusion", "plot", "scale", "frame",
    "policies",
}

__all__ = sorted(list(_LAZY_ATTRIBUTES) + list(_LAZY_SUBMODULES) + ["__version__"])


def __getattr__(name: str):
    if name in _LAZY_ATTRIBUTES:
        module = importlib.import_module(_LAZY_ATTRIBUTES[name])
        value = getattr(module, name)
        globals()[name] = value
        return value
    if name in _LAZY_SUBMODULES:
        target = "rass_theory.optimize.policies" if name == "policies" else f"rass_theory.{name}"
        module = importlib.import_module(target)
        globals()[name] = module
        return module
    if name == "torch":
        # ``rass_theory.torch`` is a subpackage; imported explicitly by users who want it.
        return importlib.import_module("rass_theory.torch")
    raise AttributeError(f"module 'rass_theory' has no attribute {name!r}")


def __dir__():
    return __all__
