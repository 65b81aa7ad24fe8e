"""D-GRS: greedy rejection over the children in drafting order (arXiv 2609.17691).

One class for NumPy arrays and torch tensors: the back end follows the inputs."""
from __future__ import annotations

from .._validation import check_delta, check_K
from ._base import KernelVerifier
from .kernels import dgrs_kernel

__all__ = ["DGRSVerifier", "dgrs"]


class DGRSVerifier(KernelVerifier):
    """Batched D-GRS verifier (sequence coupling in drafting order).

    Notes
    -----
    Residuals ``r_0 = f``, ``r_k = (r_{k-1} - phi)_+ / Z_k``.  Children are examined in drafting
    order; child ``k`` (1-based) is accepted with probability ``min(1, r_{k-1}(s_k)/phi(s_k))``
    (closed form, the levels of :class:`rass_theory.exact.laws.DGRSLaw`, computed once per batch).
    After ``K`` rejections the coordinate is drawn from ``r_K`` by inverse CDF
    (:meth:`rass_theory.exact.laws.DGRSLaw.sample`) and the state keeps child 0's orthogonal part.  Acceptance
    ``1 - prod_k Z_k`` (proof ``P3-dgrs-closed-form``).

    Random numbers: ``rng.random((n, K + 1))``; column ``k`` decides child ``k``, column ``K`` is
    the residual draw.  Rows are decided in vectorised form; only the loop over ``K`` is Python
    (:func:`rass_theory.verifiers.kernels.dgrs_kernel`, shared with the torch back end).
    """

    name = "dgrs"

    def expected_acceptance(self, K: int, delta: float) -> float:
        from ..optimize.dispatch import acceptance

        return float(acceptance("dgrs", check_K(K), check_delta(delta)))

    def uniforms_per_row(self, K: int) -> int:
        return K + 1

    def run(self, batch, u):
        """Decide a prepared batch with the uniforms ``u (n, K + 1)`` (either back end)."""
        return dgrs_kernel(batch, u)


def dgrs() -> DGRSVerifier:
    """Return the batched D-GRS verifier (drafting order, recursive closed-form residuals).

    Notes
    -----
    Child ``k`` accepted w.p. ``min(1, r_{k-1}(s_k)/phi(s_k))`` with ``r_0 = f`` and
    ``r_k = (r_{k-1} - phi)_+ / Z_k``; after ``K`` rejections draw ``s'`` from ``r_K`` and keep
    child 0's ``z_perp``.  See :class:`DGRSVerifier` and ``proofs/P3-dgrs-closed-form.md``.
    """
    return DGRSVerifier()
