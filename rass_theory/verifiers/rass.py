"""RASS: rank-aware speculative sampling (arXiv 2610.02251), batched."""
from __future__ import annotations

import numpy as np

from .._validation import check_delta, check_K
from ..exact import batch as exact_batch
from ._base import BuiltinVerifier
from ._core import NodeBatch, prepare
from ._weights import WEIGHT_NAMES, check_row_weights, describe_weights, resolve_row_weights, resolve_weights
from .kernels import RankPieces, rank_kernel, rank_pieces

__all__ = ["RASSVerifier", "rass", "fresh_orthogonal"]

_RESIDUALS = ("inverse", "rejection")
_ORTHOGONAL = ("selected", "fresh")


def fresh_orthogonal(rng: np.random.Generator, n: int, direction: np.ndarray) -> np.ndarray:
    """Draw ``n`` fresh orthogonal parts ``g - <g, e> e``, ``g ~ N(0, I_d)`` (rows of ``direction``)."""
    g = rng.standard_normal((n, direction.shape[1]))
    return g - np.einsum("nd,nd->n", g, direction)[:, None] * direction


def fresh_orthogonal_piece(batch: NodeBatch, rows):
    """Orthogonal piece drawing fresh ``z_perp`` for every row (``n d`` normals), kept on ``rows``."""
    return fresh_orthogonal(batch.rng, batch.n, batch.direction)[rows]


def rejection_residual_piece(weights) -> callable:
    """Residual piece drawing ``(f - g_w)_+ / TV`` by rejection (a data-dependent number of draws)."""

    def residual(batch, rows, u):
        w = weights[rows] if weights.ndim == 2 else weights
        return exact_batch.sample_residual_rejection(w, batch.delta_safe[rows], batch.rng)

    return residual


class RASSVerifier(BuiltinVerifier):
    """Batched RASS verifier.

    Parameters
    ----------
    weights : "optimal", "uniform", array (K,), or callable ``(K, delta) -> weights``
    residual : {"inverse", "rejection"}
        Inverse-CDF residual draw (default; uses one uniform per row) or the rejection sampler
        (cross-check; consumes a data-dependent number of draws after the fixed block, so rows
        are then not independent of each other's random stream).
    orthogonal : {"selected", "fresh"}
        On the correction branch keep the selected child's ``z_perp`` (default) or draw a fresh
        one (``n * d`` extra normals drawn for every row after the uniforms).

    Notes
    -----
    Children are sorted by ``s``; a rank ``j ~ w`` is drawn per row; the selected child's ``s``
    has density ``g_w(s) = phi(s) sum_j w_j K!/(j!(K-1-j)!) Phi(s)^j (1-Phi(s))^(K-1-j)``.
    Accept with probability ``min(1, f(s)/g_w(s))`` (log space); otherwise draw ``s'`` from
    ``(f - g_w)_+ / TV(f, g_w)`` and rebuild ``mu_draft + sigma (s' e + z_perp)``.  The output law
    is the target for every ``w``; acceptance is ``1 - TV(g_w, f)`` (proof ``P2-rass-exactness``).

    Random numbers: ``rng.random((n, 3))`` -- columns: rank, accept, residual.

    Hot path: the kernel :func:`rass_theory.verifiers.kernels.rank_kernel` (shared with the torch
    back end): one einsum projects the children; ``log(g_w/phi)`` is a log-sum-exp of log-space
    Bernstein terms (:func:`rass_theory.verifiers.kernels.log_rank_ratio`); rows sharing one
    ``(w, delta)`` draw the residual from a cached table refined by the engine's root finder
    (:mod:`rass_theory.exact.residual_tables`, same inverse CDF as
    :func:`rass_theory.exact.batch.sample_residual` to ``~1e-12``); only rejected rows are
    rebuilt, as ``child + sigma (s' - s) e``.
    """

    name = "rass"

    def __init__(self, weights="optimal", residual: str = "inverse", orthogonal: str = "selected"):
        if residual not in _RESIDUALS:
            raise ValueError(f"residual must be one of {_RESIDUALS}, got {residual!r}")
        if orthogonal not in _ORTHOGONAL:
            raise ValueError(f"orthogonal must be one of {_ORTHOGONAL}, got {orthogonal!r}")
        if weights is None:
            weights = "optimal"
        if isinstance(weights, str):
            if weights not in WEIGHT_NAMES:
                raise ValueError(f"weights must be 'optimal', 'uniform', 'interpolated', an array of shape (K,) "
                                 f"or a callable, got {weights!r}")
        elif not callable(weights):
            w = np.asarray(weights, dtype=np.float64)
            if w.ndim != 1:
                raise ValueError(f"weights must be 'optimal', 'uniform', a callable or an array of shape (K,), "
                                 f"got shape {w.shape}")
            weights = check_row_weights(w, w.size, 0, "weights")
            self.K = weights.size
        self.weights = weights
        self.residual = residual
        self.orthogonal = orthogonal

    def __repr__(self) -> str:
        return (f"RASSVerifier(weights={describe_weights(self.weights)}, residual={self.residual!r}, "
                f"orthogonal={self.orthogonal!r})")

    def weights_for(self, K: int, delta) -> np.ndarray:
        """Rank weights this verifier uses for ``K`` children at ``delta`` (scalar or (n,))."""
        delta = np.atleast_1d(check_delta(delta, allow_array=True))
        return resolve_weights(self.weights, check_K(K), delta)

    def expected_acceptance(self, K: int, delta: float) -> float:
        from ..optimize.dispatch import acceptance

        K, delta = check_K(K), check_delta(delta)
        if isinstance(self.weights, str) and self.weights == "optimal":
            return float(acceptance("rass", K, delta))
        return float(acceptance("rass", K, delta, weights=self.weights_for(K, delta)))

    def pieces(self, weights) -> RankPieces:
        """The kernel pieces of this verifier for row weights ``(K,)`` or ``(n, K)``."""
        pieces = rank_pieces(weights)
        if self.residual == "rejection":
            pieces = pieces.replace(residual=rejection_residual_piece(weights))
        if self.orthogonal == "fresh":
            pieces = pieces.replace(orthogonal=fresh_orthogonal_piece)
        return pieces

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        batch = prepare(children, mu_draft, mu_target, sigma, rng, K=self.K)
        u = batch.uniform(batch.n, 3)
        w = resolve_row_weights(self.weights, batch.K, batch.delta, batch.degenerate)
        return rank_kernel(batch, u, self.pieces(w))


def rass(weights="optimal", residual: str = "inverse", orthogonal: str = "selected") -> RASSVerifier:
    """Return the batched rank-aware speculative sampling verifier.

    Parameters
    ----------
    weights : "optimal" (default; ``None`` means the same), "interpolated", "uniform", array (K,),
        or callable ``(K, delta) -> weights``.  Rank weights, ascending ranks.  ``"optimal"``
        solves ``optimal_rank_weights(K, delta)`` when the batch has one ``delta`` (to 12
        significant digits) and uses ``optimal_weights_interpolator(K)`` for per-row deltas;
        ``"interpolated"`` uses the interpolator for every batch.  Both mean the same on the
        torch back end (:func:`rass_theory.torch.verifiers.rass`), so one call gives one law on
        both.  Exactness holds for any weights; only the acceptance depends on them.
    residual : {"inverse", "rejection"}
    orthogonal : {"selected", "fresh"}

    Returns
    -------
    RASSVerifier

    Notes
    -----
    Accept the selected child w.p. ``min(1, f(s)/g_w(s))``, else draw from
    ``(f - g_w)_+ / TV(f, g_w)``; acceptance ``1 - TV(g_w, f)``.  See :class:`RASSVerifier` and
    ``proofs/P2-rass-exactness.md``.
    """
    return RASSVerifier(weights, residual, orthogonal)
