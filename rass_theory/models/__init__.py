"""Torch velocity models for the samplers: adapters and a small learned model shipped as data.

* :func:`from_velocity` -- a plain velocity callable ``fn(x, s)``;
* :func:`from_edm_denoiser` -- an EDM denoiser ``D(x, t)`` converted to a flow-matching velocity;
* :func:`from_diffusers` -- a diffusers network with its ``FlowMatchEulerDiscreteScheduler`` or
  EDM scheduler (optional extra: ``pip install rass_theory[diffusers]``);
* :func:`from_gaussian_mixture` -- the analytic NumPy Gaussian mixture, on tensors;
* :func:`digits_flow` -- a flow-matching MLP trained on scikit-learn's 8x8 digits (``dim = 64``).

All return a :class:`VelocityModel` (``dim``, ``image_shape``, ``velocity(x, s)`` on flattened
states, output validation).  Importing this package imports torch; ``import rass_theory`` does not.
"""
from __future__ import annotations

import importlib

__all__ = ["VelocityModel", "ModelOutputError", "from_velocity", "from_edm_denoiser", "from_gaussian_mixture",
           "from_diffusers", "digits_flow", "edm_to_flow"]

_LAZY = {
    "VelocityModel": "adapters", "ModelOutputError": "adapters", "from_velocity": "adapters",
    "from_edm_denoiser": "adapters", "from_gaussian_mixture": "adapters", "edm_to_flow": "adapters",
    "from_diffusers": "diffusers_adapter", "digits_flow": "digits",
}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"rass_theory.models.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    if name in ("adapters", "digits", "diffusers_adapter"):
        module = importlib.import_module(f"rass_theory.models.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'rass_theory.models' has no attribute {name!r}")


def __dir__():
    return __all__
