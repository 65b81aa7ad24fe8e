"""Torch verifiers (the shared kernels of :mod:`rass_theory.verifiers.kernels` on tensors), the
mutants that run on tensors, and the torch chunk runner of the exactness harness.

``rass_theory.torch.verifiers.rmc() / .dgrs() / .rass(...) / .threshold(...) / .resample()`` follow
the verifier contract of ``docs/ARCHITECTURE.md`` on tensors and a ``torch.Generator``; dtype and device
follow the inputs.  On the CPU device they decide on NumPy views of the tensors with the
generator's uniforms (``cpu_engine("numpy")``, the default: the same decisions as the torch
namespace, at NumPy's speed); ``cpu_engine("torch")`` runs the accelerator code there.
``run_chunk_torch`` is the harness backend behind
``rt.check_exactness(..., backend="torch", device=...)`` (picked by :mod:`rass_theory.scale.check`).
Importing this package imports torch; ``import rass_theory`` alone does not.
"""
from __future__ import annotations

from . import verifiers
from ..verifiers._tensors import CPU_ENGINES, TorchVerifierResult, cpu_engine
from .harness import resolve_device, run_chunk_torch
from . import mutants

__all__ = ["verifiers", "mutants", "run_chunk_torch", "resolve_device", "TorchVerifierResult", "cpu_engine",
           "CPU_ENGINES"]
