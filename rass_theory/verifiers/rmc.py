"""Reflection maximal coupling (RMC), the single-draft verifier (De Bortoli et al. 2025).

One class for NumPy arrays and torch tensors: the back end follows the inputs."""
from __future__ import annotations

from scipy.special import ndtr

from .._validation import check_delta, check_K
from ._base import KernelVerifier
from .kernels import rmc_kernel

__all__ = ["RMCVerifier", "rmc"]


class RMCVerifier(KernelVerifier):
    """Batched RMC verifier for nodes with exactly one child (K = 1).

    Notes
    -----
    With ``s`` the child's standardised projection and ``f(s) = phi(s - delta)``, the child is
    accepted with probability ``min(1, f(s)/phi(s)) = min(1, exp(s delta - delta^2/2))``
    (computed in log space).  Otherwise the state is reflected, ``s -> delta - s``, keeping the
    child's orthogonal part ``z_perp``.  The output has the target law ``N(mu_target, sigma^2 I)``
    and the acceptance probability is ``2 Phi(-delta/2) = 1 - TV(phi, f)`` (proof ``P6-reductions``).

    Random numbers: one uniform per row (NumPy ``rng.random((n, 1))``; torch the same layout
    from the ``torch.Generator``).  Degenerate rows (``delta <= sqrt(eps)``) accept the child.
    """

    name = "rmc"
    K = 1

    def expected_acceptance(self, K: int, delta: float) -> float:
        K = check_K(K)
        delta = check_delta(delta)
        if K != 1:
            raise ValueError(f"K must be 1 for RMC, got {K}")
        return float(2.0 * ndtr(-delta / 2.0))

    def uniforms_per_row(self, K: int) -> int:
        return 1

    def run(self, batch, u):
        """Decide a prepared batch with the uniforms ``u (n, 1)`` (either back end)."""
        return rmc_kernel(batch, u[:, 0])


def rmc() -> RMCVerifier:
    """Return the batched reflection-maximal-coupling verifier (K = 1).

    Returns
    -------
    RMCVerifier
        Callable ``(children (n, 1, d), mu_draft (n, d), mu_target (n, d), sigma, rng)
        -> VerifierResult`` on NumPy arrays (``rng`` a numpy Generator, int or None) and
        ``-> TorchVerifierResult`` on torch tensors (``rng`` a torch.Generator, int or None).

    Notes
    -----
    Accept with probability ``min(1, phi(s - delta)/phi(s))``, else reflect ``s -> delta - s``
    keeping ``z_perp``; acceptance ``2 Phi(-delta/2)``.  See :class:`RMCVerifier` and
    ``proofs/P6-reductions.md``.
    """
    return RMCVerifier()
