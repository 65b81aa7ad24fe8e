"""RASS: rank-aware speculative sampling (arXiv 2610.02251), batched, on NumPy arrays and torch tensors."""
from __future__ import annotations

import numpy as np

from .._validation import check_delta, check_K, check_weights
from ._base import KernelVerifier
from ._batch import NodeBatch
from ._weights import (WEIGHT_NAMES, batch_weights, describe_weights, device_interpolated, optimal_single,
                       resolve_weights)
from .kernels import RankPieces, rank_kernel, rank_pieces

__all__ = ["RASSVerifier", "rass", "fresh_orthogonal", "fresh_orthogonal_piece"]

_RESIDUALS = ("inverse", "rejection")
_ORTHOGONAL = ("selected", "fresh")


def fresh_orthogonal(batch: NodeBatch):
    """``n`` fresh orthogonal parts ``g - <g, e> e``, ``g ~ N(0, I_d)`` (``n d`` float64 normals)."""
    nx, e = batch.nx, batch.direction
    g = nx.normal(batch.rng, (batch.n, batch.d), batch.children)
    return g - nx.rowdot(g, e)[:, None] * e


def fresh_orthogonal_piece(batch: NodeBatch, rows):
    """Orthogonal piece drawing fresh ``z_perp`` for every row, kept on ``rows`` (every row when ``None``)."""
    z = fresh_orthogonal(batch)
    return z if rows is None else z[rows]


def rejection_residual_piece(weights) -> callable:
    """Residual piece drawing ``(f - g_w)_+ / TV`` by rejection (NumPy; a data-dependent number of draws)."""

    def residual(batch, rows, u):
        from ..exact import batch as exact_batch

        w = weights[rows] if weights.ndim == 2 else weights
        return exact_batch.sample_residual_rejection(w, batch.delta_safe[rows], batch.rng)

    return residual


class RASSVerifier(KernelVerifier):
    """Batched RASS verifier (NumPy arrays or torch tensors; the back end follows the inputs).

    Parameters
    ----------
    weights : "optimal", "interpolated", "uniform", array (K,) or (n, K), or callable
        See :func:`rass`.
    residual : {"inverse", "rejection"}
        Inverse-CDF residual draw (default; one uniform per row) or the rejection sampler (NumPy
        only, a cross-check; it consumes a data-dependent number of draws after the fixed block,
        so rows are then not independent of each other's random stream).
    orthogonal : {"selected", "fresh"}
        On the correction branch keep the selected child's ``z_perp`` (default) or draw a fresh
        one (``n * d`` extra normals drawn for every row after the uniforms).
    delta : float, optional
        Pin ``"optimal"`` to ``optimal_rank_weights(K, delta)`` for every batch (one configuration;
        never reads the batch's deltas, so no host synchronisation on an accelerator).

    Notes
    -----
    Children are sorted by ``s``; a rank ``j ~ w`` is drawn per row; the selected child's ``s``
    has density ``g_w(s) = phi(s) sum_j w_j K!/(j!(K-1-j)!) Phi(s)^j (1-Phi(s))^(K-1-j)``.
    Accept with probability ``min(1, f(s)/g_w(s))`` (log space); otherwise draw ``s'`` from
    ``(f - g_w)_+ / TV(f, g_w)`` and rebuild ``mu_draft + sigma (s' e + z_perp)``.  The output law
    is the target for every ``w``; acceptance is ``1 - TV(g_w, f)`` (proof ``P2-rass-exactness``).

    Random numbers: three uniforms per row, one ``(n, 3)`` block (rank, accept, residual).

    Hot path: the kernel :func:`rass_theory.verifiers.kernels.rank_kernel` with the pieces of
    :func:`rass_theory.verifiers.kernels.rank_pieces`, the same code on both back ends: one
    einsum/bmm projects the children; ``log(g_w/phi)`` is a log-sum-exp of log-space Bernstein
    terms; the residual is drawn from the law engine; only rejected rows are rebuilt, as
    ``child + sigma (s' - s) e`` (on an accelerator every row is computed and merged with
    ``where``: no host synchronisation, except ``"optimal"`` without ``delta``, which reads the
    deltas once to resolve its weights exactly as NumPy does).
    """

    name = "rass"

    def __init__(self, weights="optimal", residual: str = "inverse", orthogonal: str = "selected", *,
                 delta=None):
        if residual not in _RESIDUALS:
            raise ValueError(f"residual must be one of {_RESIDUALS}, got {residual!r}")
        if orthogonal not in _ORTHOGONAL:
            raise ValueError(f"orthogonal must be one of {_ORTHOGONAL}, got {orthogonal!r}")
        if weights is None:
            weights = "optimal"
        self._fixed = None
        if isinstance(weights, str):
            if weights not in WEIGHT_NAMES:
                raise ValueError(f"weights must be 'optimal', 'uniform', 'interpolated', an array of shape (K,) "
                                 f"or (n, K), or a callable, got {weights!r}")
        elif not callable(weights):
            w = weights.detach().cpu().numpy() if hasattr(weights, "detach") else np.asarray(weights, np.float64)
            if w.ndim == 1:
                self._fixed = check_weights(w, name="weights")
                self.K = self._fixed.size
            elif w.ndim == 2:
                self.K = w.shape[1]
            else:
                raise ValueError(f"weights must have shape (K,) or (n, K), got {w.shape}")
        self.weights = weights
        self.residual = residual
        self.orthogonal = orthogonal
        self.delta = None if delta is None else check_delta(delta)
        self._device = {}

    def __repr__(self) -> str:
        pin = "" if self.delta is None else f", delta={self.delta}"
        return (f"RASSVerifier(weights={describe_weights(self.weights)}, residual={self.residual!r}, "
                f"orthogonal={self.orthogonal!r}{pin})")

    def weights_for(self, K: int, delta) -> np.ndarray:
        """Host rank weights this verifier uses for ``K`` children at ``delta`` (scalar or (n,))."""
        K = check_K(K)
        delta = np.atleast_1d(check_delta(delta, allow_array=True))
        if self._fixed is not None:
            return self._fixed
        if self.delta is not None and isinstance(self.weights, str) and self.weights == "optimal":
            return optimal_single(K, float(self.delta))
        if not isinstance(self.weights, str) and not callable(self.weights):
            raise ValueError("per-row weights (n, K) have no weights at a given delta")
        return resolve_weights(self.weights, K, delta)

    def expected_acceptance(self, K: int, delta: float) -> float | None:
        from ..optimize.dispatch import acceptance

        K, delta = check_K(K), check_delta(delta)
        if not isinstance(self.weights, str) and not callable(self.weights) and self._fixed is None:
            return None
        if isinstance(self.weights, str) and self.weights == "optimal" and self.delta is None:
            return float(acceptance("rass", K, delta))
        return float(acceptance("rass", K, delta, weights=self.weights_for(K, delta)))

    def _cached(self, key, make):
        if key not in self._device:                     # host -> device once, outside the hot path
            self._device[key] = make()
        return self._device[key]

    def row_weights(self, batch: NodeBatch):
        """Rank weights ``(K,)`` or ``(n, K)`` of the batch's rows, float64 arrays of its back end."""
        nx, K, n = batch.nx, batch.K, batch.n
        if self.K is not None and K != self.K:
            raise ValueError(f"children must have K = {self.K} children per node to match weights, got K = {K}")
        dev = f"{nx.name}:{batch.device}"
        if self._fixed is not None:
            return self._cached(("fixed", dev), lambda: nx.constant(self._fixed, batch.s))
        if isinstance(self.weights, str):
            if self.weights == "optimal" and self.delta is not None:
                return self._cached(("pinned", K, dev), lambda: nx.constant(np.array(optimal_single(K, self.delta)), batch.s))
            if self.weights == "uniform":
                return self._cached(("uniform", K, dev), lambda: nx.constant(np.full(K, 1.0 / K), batch.s))
            if self.weights == "interpolated" and nx.name == "torch":
                return device_interpolated(K, batch, self._device)     # on the device, no host sync
            return batch_weights(self.weights, batch)
        if callable(self.weights):
            if nx.inputs == "numpy":
                return batch_weights(self.weights, batch)
            import torch

            # on tensors the callable sees the per-row deltas as a tensor (the host path's too)
            delta = batch.delta if nx.name == "torch" else torch.from_numpy(batch.delta)
            w = self.weights(K, delta)
            if not hasattr(w, "device") or w.device != delta.device:
                raise TypeError("a weights callable must return a torch.Tensor on the inputs' device")
            if nx.name == "numpy":
                w = w.detach().numpy()
        else:
            w = self.weights
        w = check_weights(w, K, name="weights", n=n) if nx.name == "numpy" else nx.constant(w, batch.s)
        if tuple(w.shape) not in ((K,), (n, K)):
            raise ValueError(f"weights must have shape (K,) or (n, K) = {(n, K)}, got {tuple(w.shape)}")
        return w

    def pieces(self, weights) -> RankPieces:
        """The kernel pieces of this verifier for row weights ``(K,)`` or ``(n, K)``."""
        pieces = rank_pieces(weights)
        if self.residual == "rejection":
            pieces = pieces.replace(residual=rejection_residual_piece(weights))
        if self.orthogonal == "fresh":
            pieces = pieces.replace(orthogonal=fresh_orthogonal_piece)
        return pieces


    def run(self, batch: NodeBatch, u):
        """Decide a prepared batch with the uniforms ``u (n, 3)`` (rank, accept, residual)."""
        if self.residual == "rejection" and batch.nx.inputs != "numpy":
            raise TypeError("residual='rejection' runs on NumPy arrays only (its number of draws is data "
                            "dependent); use residual='inverse' on torch tensors")
        return rank_kernel(batch, u, self.pieces(self.row_weights(batch)))


def rass(weights="optimal", residual: str = "inverse", orthogonal: str = "selected", *,
         delta=None) -> RASSVerifier:
    """Return the batched rank-aware speculative sampling verifier (NumPy arrays or torch tensors).

    Parameters
    ----------
    weights : "optimal" (default; ``None`` means the same), "interpolated", "uniform", array (K,)
        or (n, K), or callable ``(K, delta) -> weights``.  Rank weights, ascending ranks.
        ``"optimal"`` solves ``optimal_rank_weights(K, delta)`` when the batch has one ``delta``
        (to 12 significant digits) and uses ``optimal_weights_interpolator(K)`` for per-row
        deltas; ``"interpolated"`` uses the interpolator for every batch (on torch, on the
        device).  A callable gets the batch's deltas as arrays of its back end (NumPy: a float
        when the rows share one ``delta``).  Exactness holds for any weights; only the
        acceptance depends on them.
    residual : {"inverse", "rejection"}
        ``"rejection"`` is NumPy only (``TypeError`` on tensors).
    orthogonal : {"selected", "fresh"}
    delta : float, optional
        Pin ``"optimal"`` to the optimum at this ``delta`` (keyword only).

    Returns
    -------
    RASSVerifier

    Notes
    -----
    Accept the selected child w.p. ``min(1, f(s)/g_w(s))``, else draw from
    ``(f - g_w)_+ / TV(f, g_w)``; acceptance ``1 - TV(g_w, f)``.  See :class:`RASSVerifier` and
    ``proofs/P2-rass-exactness.md``.
    """
    return RASSVerifier(weights, residual, orthogonal, delta=delta)
