"""Torch twins of the verifiers and the torch chunk runner of the exactness harness.

``rass_theory.torch.verifiers.rmc() / .dgrs() / .rass(...) / .threshold(...) / .resample()`` follow
the verifier contract of ``docs/ARCHITECTURE.md`` on tensors and a ``torch.Generator``; dtype and device
follow the inputs.  ``run_chunk_torch`` is the harness backend behind
``rt.check_exactness(..., backend="torch", device=...)``.  Importing this package imports torch;
``import rass_theory`` alone does not.
"""
from __future__ import annotations

import importlib

__all__ = ["verifiers", "mutants", "run_chunk_torch", "resolve_device", "TorchVerifierResult"]

_LAZY = {
    "run_chunk_torch": "rass_theory.torch.harness",
    "resolve_device": "rass_theory.torch.harness",
    "TorchVerifierResult": "rass_theory.torch._core",
}


def __getattr__(name):
    if name in ("verifiers", "mutants", "harness"):
        module = importlib.import_module(f"rass_theory.torch.{name}")
        globals()[name] = module
        return module
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rass_theory.torch' has no attribute {name!r}")


def __dir__():
    return __all__
