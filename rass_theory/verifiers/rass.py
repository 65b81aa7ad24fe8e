"""RASS: rank-aware speculative sampling (arXiv 2610.02251), batched."""
from __future__ import annotations

import numpy as np

from .._validation import check_delta, check_K
from ._base import BuiltinVerifier
from ._core import draw_uniforms, finish, prepare
from ._residual import draw_rass_residual
from ._weights import check_row_weights, describe_weights, resolve_weights

__all__ = ["RASSVerifier", "rass", "select_rank", "fresh_orthogonal", "log_selected_ratio"]

_RESIDUALS = ("inverse", "rejection")
_ORTHOGONAL = ("selected", "fresh")


def select_rank(s: np.ndarray, weights: np.ndarray, u: np.ndarray):
    """Draw a rank per row and return the selected child.

    Parameters
    ----------
    s : ndarray (n, K)
        Standardised projections in drafting order.
    weights : ndarray (K,) or (n, K)
        Rank weights, ascending ranks (rank ``K-1`` = largest ``s``).
    u : ndarray (n,)
        Uniforms on [0, 1).

    Returns
    -------
    child : int ndarray (n,)
        Drafting-order index of the selected child.
    rank : int ndarray (n,)
    """
    n, K = s.shape
    cumulative = np.cumsum(weights, axis=-1)[..., : K - 1]
    rank = (u[:, None] >= cumulative).sum(axis=1)
    order = np.argsort(s, axis=1)
    child = order[np.arange(n), rank]
    return child, rank


def log_selected_ratio(weights: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``log(g_w(s) / phi(s))`` per row for rank weights ``(K,)`` or ``(n, K)``.

    Notes
    -----
    ``g_w(s)/phi(s) = sum_j w_j K binom(K-1, j) p^j q^(K-1-j)`` with ``p = Phi(s)``,
    ``q = Phi(-s)`` (both from ``ndtr``, so neither tail cancels).  All terms are non-negative,
    so the sum has relative accuracy ``~K eps``; rows where it falls below ``1e-250`` (far tails,
    large ``K``) are recomputed in log space by :func:`rass_theory.exact.batch.selected_logpdf`.
    """
    from scipy.special import comb, ndtr

    n = s.shape[0]
    K = weights.shape[-1]
    j = np.arange(K)
    coef = weights * (K * comb(K - 1, j))
    p, q = ndtr(s), ndtr(-s)
    total = np.zeros(n)
    for jj in range(K):
        c = coef[..., jj]
        if weights.ndim == 1 and c == 0.0:
            continue
        total += c * p ** jj * q ** (K - 1 - jj)
    with np.errstate(divide="ignore"):
        out = np.log(total)
    tiny = total < 1e-250
    if np.any(tiny):
        from ..exact import batch as exact_batch

        w_t = weights[tiny] if weights.ndim == 2 else weights
        log_phi = -0.5 * s[tiny] ** 2 - 0.5 * np.log(2 * np.pi)
        out[tiny] = exact_batch.selected_logpdf(w_t, np.zeros(int(tiny.sum())), s[tiny]) - log_phi
    return out


def fresh_orthogonal(rng: np.random.Generator, n: int, direction: np.ndarray) -> np.ndarray:
    """Draw ``n`` fresh orthogonal parts ``g - <g, e> e``, ``g ~ N(0, I_d)`` (rows of ``direction``)."""
    g = rng.standard_normal((n, direction.shape[1]))
    return g - np.einsum("nd,nd->n", g, direction)[:, None] * direction


class RASSVerifier(BuiltinVerifier):
    """Batched RASS verifier.

    Parameters
    ----------
    weights : "optimal", "uniform", array (K,), or callable ``(delta, K) -> weights``
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

    Hot path: one einsum projects the children; ``log(g_w/phi)`` is a direct non-negative sum
    (:func:`log_selected_ratio`); rows sharing one ``(w, delta)`` draw the residual from a cached
    table refined by Newton (``verifiers._residual``, same inverse CDF as
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
            if weights not in ("optimal", "uniform"):
                raise ValueError(f"weights must be 'optimal', 'uniform', an array of shape (K,) or a callable, "
                                 f"got {weights!r}")
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

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        batch = prepare(children, mu_draft, mu_target, sigma, rng, K=self.K)
        n, K = batch.n, batch.K
        u = draw_uniforms(batch, 3)
        fresh = fresh_orthogonal(batch.rng, n, batch.frame.direction) if self.orthogonal == "fresh" else None
        accepted = batch.degenerate.copy()
        chosen = np.zeros(n, dtype=np.int64)
        live = np.flatnonzero(~accepted)
        if live.size == 0:
            return finish(batch, chosen, accepted, np.empty(0))
        all_live = live.size == n
        s = batch.s if all_live else batch.s[live]
        delta = batch.delta.astype(np.float64)
        delta = delta if all_live else delta[live]
        w = resolve_weights(self.weights, K, delta)
        child, _ = select_rank(s, w, u[live, 0])
        s_sel = s[np.arange(live.size), child]
        # log f/g_w = log f/phi - log g_w/phi = delta s - delta^2/2 - log(g_w/phi)
        log_ratio = delta * s_sel - 0.5 * delta * delta - log_selected_ratio(w, s_sel)
        take = np.log(u[live, 1]) < log_ratio
        chosen[live] = child
        accepted[live] = take
        rej = ~take
        rejected = live[rej]
        if rejected.size == 0:
            return finish(batch, chosen, accepted, np.empty(0), rejected)
        w_rej = w[rej] if w.ndim == 2 else w
        if self.residual == "inverse":
            new_s = draw_rass_residual(w_rej, delta[rej], u[rejected, 2])
        else:
            from ..exact import batch as exact_batch

            new_s = exact_batch.sample_residual_rejection(w_rej, delta[rej], batch.rng)
        new_s = np.asarray(new_s, dtype=np.float64)
        return finish(batch, chosen, accepted, new_s, rejected,
                      None if fresh is None else fresh[rejected])


def rass(weights="optimal", residual: str = "inverse", orthogonal: str = "selected") -> RASSVerifier:
    """Return the batched rank-aware speculative sampling verifier.

    Parameters
    ----------
    weights : "optimal" (default; ``None`` means the same), "uniform", array (K,), or callable
        ``(delta, K) -> weights``.  Rank weights, ascending ranks.  ``"optimal"`` solves
        ``optimal_rank_weights(K, delta)`` when the batch has one ``delta`` (to 12 significant
        digits) and uses ``optimal_weights_interpolator(K)`` for per-row deltas (the torch twin
        uses the same interpolator for per-row deltas, so both backends give the same law; for a
        single-delta batch torch cannot inspect ``delta`` without a host synchronisation and
        interpolates too unless its ``delta=`` is pinned).  Exactness holds for any weights; only
        the acceptance depends on them.
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
