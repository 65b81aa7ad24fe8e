"""The trivial exact verifier: ignore the drafts and draw from the target (both back ends)."""
from __future__ import annotations

import numpy as np

from .._validation import as_generator, check_delta, check_K
from ..backend import get_backend
from ..frame import validate_node_inputs
from ._base import BuiltinVerifier
from ._core import prepare
from ._result import VerifierResult

__all__ = ["ResampleVerifier", "resample"]


class ResampleVerifier(BuiltinVerifier):
    """Return a fresh target draw ``mu_target + sigma * N(0, I_d)`` for every node.

    Notes
    -----
    Exact by construction, never accepts (``accepted`` all False, ``child_index`` all -1); the
    zero-speedup baseline and a control for the harness.  Random numbers: ``n * d`` standard
    normals in the children's dtype (float32 or float64), row ``i`` from stream block ``i``:
    NumPy ``rng.standard_normal((n, d))``, torch ``torch.randn((n, d))`` on the inputs' device.
    """

    name = "resample"

    def expected_acceptance(self, K: int, delta: float) -> float:
        check_K(K)
        check_delta(delta)
        return 0.0

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        if get_backend(children).name == "torch":
            import torch

            batch = prepare(children, mu_draft, mu_target, sigma, rng)        # metadata checks only
            n, device = batch.n, batch.device
            z = torch.randn(n, batch.d, generator=batch.rng, dtype=batch.out_dtype, device=device)
            states = mu_target + batch.sigma[:, None].to(batch.out_dtype) * z
            return batch.result(states, torch.zeros(n, dtype=torch.bool, device=device),
                                torch.full((n,), -1, dtype=torch.int64, device=device))
        children, mu_draft, mu_target, sig = validate_node_inputs(children, mu_draft, mu_target, sigma)
        gen = as_generator(rng)
        n, _, d = children.shape
        dtype = children.dtype if children.dtype in (np.float32, np.float64) else np.float64
        z = gen.standard_normal((n, d), dtype=dtype)
        states = (mu_target + sig[:, None] * z).astype(children.dtype, copy=False)
        return VerifierResult(states, np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64))


def resample() -> ResampleVerifier:
    """Return the verifier that ignores the drafts and samples the target kernel directly.

    Notes
    -----
    ``states = mu_target + sigma z`` with ``z ~ N(0, I_d)``; acceptance 0.  See
    :class:`ResampleVerifier`.
    """
    return ResampleVerifier()
