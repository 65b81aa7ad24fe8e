"""The verifiers on torch tensors: the same classes and factories as :mod:`rass_theory.verifiers`.

Every rule is one class for both back ends (the back end follows the inputs), so
``rass_theory.torch.verifiers.rass(...)`` *is* ``rass_theory.verifiers.rass(...)``.  On tensors
the contract reads::

    verifier(children (n, K, d), mu_draft (n, d), mu_target (n, d), sigma float | (n,), rng)
        -> TorchVerifierResult(states (n, d), accepted (n,) bool, child_index (n,) int64)

``rng`` is a ``torch.Generator`` on the inputs' device (``None``: a fresh one seeded from the OS;
an int: a new generator seeded with it).  dtype and device follow the inputs (float64 is the
reference, float32 is supported; the frame and every decision are float64); arguments that
disagree raise ``ValueError`` naming the argument.  Rows are processed with ``where`` /
``gather`` / ``bmm`` and fixed-iteration root finding: no ``.item()``, no boolean-mask indexing
and no ``.cpu()`` in the hot path (``tests/torch/test_sync_free.py``), with documented
exceptions: on the CPU device only the rejected rows are corrected (``torch.nonzero``, free
there); ``rass("optimal")`` without ``delta``, ``threshold(parameters="optimal")`` (or an
untabulated ``K``) and ``optimal_list()`` read the per-row deltas once on the host, and the
optimal list rule's fake keys are drawn by rejection sampling (one host check per round).

On the CPU device (the default ``rass_theory.torch.cpu_engine("numpy")``) the kernel verifiers
decide on NumPy views of the tensors, with the uniforms drawn from the caller's generator as
above: the same decisions and generator state as the torch namespace, states equal to rounding
(``tests/torch/test_cpu_engine.py``), and the values checked as on NumPy (NaN or infinite inputs
raise ``ValueError``).  ``cpu_engine("torch")`` runs the torch namespace on the CPU.

Accuracy in float32 inputs: acceptance decisions compare ``log u`` with a float64 log ratio;
the correction ``children + sigma (s' - s) e`` is rounded in float32 like the children.
"""
from __future__ import annotations

from ..verifiers import (DGRSVerifier, OptimalListVerifier, RASSVerifier, ResampleVerifier, RMCVerifier,
                         ThresholdVerifier, dgrs, optimal_list, rass, resample, rmc, threshold)
from ..verifiers._tensors import TorchVerifierResult

__all__ = [
    "rmc", "dgrs", "rass", "threshold", "resample", "optimal_list",
    "RMCVerifier", "DGRSVerifier", "RASSVerifier", "ThresholdVerifier", "ResampleVerifier", "OptimalListVerifier",
    "TorchVerifierResult",
]
