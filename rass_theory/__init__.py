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

import lazy_loader

__version__ = "0.1.0"

# SPEC 1 lazy loading (lazy_loader): module -> the public names it defines
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=["exact", "optimize", "verifiers", "mutants", "stats", "diffusion", "plot", "scale", "frame",
                "backend", "torch"],
    submod_attrs={
        "optimize": ["policies"],
        "optimize.dispatch": ["acceptance", "rejection_probability"],
        "exact.dgrs": ["dgrs_residual_masses"],
        "exact.bound": ["acceptance_bound", "bound_threshold"],
        "exact.selected": ["selected_law", "residual_law"],
        "frame": ["Rank1Frame"],
        "optimize.rank_weights": ["optimal_rank_weights", "optimal_weights_table"],
        "optimize.list_rule": ["optimal_list_rule"],
        "scale.check": ["check_exactness", "certify"],
    },
)
__all__ = sorted(__all__ + ["__version__"])
