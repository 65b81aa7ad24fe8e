"""The optimal list verifier: select by private priorities, couple maximally, draw the residual.

One class for NumPy arrays and torch tensors; the rule's per-row pieces (parameters, fake keys,
selection, log ratio, residual) are those of :mod:`rass_theory.optimize.list_rule`, written once
against the backend namespace.  Its acceptance is the list-coupling bound ``alpha*(K, delta)``
at every ``K`` and ``delta`` (``proofs/P10-optimal-list-rule.md``).
"""
from __future__ import annotations

import numpy as np

from .._validation import check_delta, check_K
from ..optimize import list_rule as _rule
from ._base import KernelVerifier
from ._batch import NodeBatch
from .kernels import RankPieces, rank_kernel, target_ratio
from .rass import fresh_orthogonal_piece

__all__ = ["OptimalListVerifier", "optimal_list", "rule_params"]

rule_params = _rule.rule_params


class OptimalListVerifier(KernelVerifier):
    """Batched verifier of the optimal list rule (NumPy arrays or torch tensors).

    Parameters
    ----------
    orthogonal : {"selected", "fresh"}
        On the correction branch keep the selected child's ``z_perp`` (default) or draw a fresh one.

    Notes
    -----
    Per row (its own ``delta``) the private-priority rule selects a child whose ``s`` has law
    ``g* = f 1{s < t_a} + K phi Phi^(K-1) 1{s >= t_a}``; accept w.p. ``min(1, f/g*)`` (always
    below ``t_a``), else draw ``s'`` from ``(f - g*)_+ / (1 - alpha*)`` on ``[t*, inf)`` by inverse
    CDF and rebuild ``child + sigma (s' - s) e``.  Exact because the ratio uses the law that the
    selection realises at that row's ``delta``; acceptance ``alpha*(K, delta)``
    (``proofs/P2-rass-exactness.md``, ``proofs/P10-optimal-list-rule.md``).  The verifier is
    :func:`rass_theory.verifiers.kernels.rank_kernel` with the rule's pieces from
    :mod:`rass_theory.optimize.list_rule` (one code for both back ends).

    The per-row constants are solved and certified on the host (:func:`rule_params`, every check
    of P10.6, a :class:`~rass_theory.optimize.list_rule.ListRuleCertificateError` if one fails),
    so a torch batch copies its ``n`` deltas to the host once; the fake keys are drawn by
    rejection sampling (one host check per round); everything else runs on the inputs' device.

    Random numbers: ``(n, 3)`` uniforms up front (column 0 unused, accept, residual), then
    ``(n, K)`` keep decisions, then three uniforms per fake-key proposal
    (:func:`rass_theory.optimize.list_rule.draw_fake_scores`), then fresh orthogonal parts if
    requested.
    """

    name = "optimal_list"

    def __init__(self, orthogonal: str = "selected"):
        if orthogonal not in ("selected", "fresh"):
            raise ValueError(f"orthogonal must be 'selected' or 'fresh', got {orthogonal!r}")
        self.orthogonal = orthogonal

    def __repr__(self) -> str:
        return f"OptimalListVerifier(orthogonal={self.orthogonal!r})"

    def expected_acceptance(self, K: int, delta: float) -> float:
        """``alpha*(K, delta)`` as attained by the rule (:func:`optimal_list_rule`)."""
        return float(_rule.optimal_list_rule(check_K(K), check_delta(delta)).acceptance)

    def pieces(self, batch: NodeBatch, draw=None) -> RankPieces:
        """The rule's kernel pieces for a prepared batch (its rows' constants solved and certified).

        ``draw(shape) -> uniforms`` is the source of the keep decisions and fake keys (default:
        the batch's generator).
        """
        nx = batch.nx
        delta = batch.delta_safe                       # degenerate rows: any certified rule (they accept child 0)
        host = delta.detach().cpu().numpy() if nx.name == "torch" else delta
        p = rule_params(batch.K, np.asarray(host, dtype=np.float64)).on(batch.s)
        shared = p.delta.shape[0] == 1
        draw = draw if draw is not None else (lambda shape: batch.uniform(*shape))

        def select(batch, u):                          # private priorities: K keep decisions per row
            return _rule.select(p, batch.s, draw((batch.n, batch.K)), draw)

        def ratio(batch, s_sel):                       # g* = f below t_a: the log ratio is exactly 0 there
            return nx.where(s_sel < p.t_keep, target_ratio(batch, s_sel), _rule.log_selected_ratio(p, s_sel))

        def residual(batch, rows, u):
            if rows is None:
                return _rule.sample_residual(p, u)
            return _rule.sample_residual(p if shared else p.take(rows), u[rows])

        pieces = RankPieces(select, ratio, residual)
        return pieces.replace(orthogonal=fresh_orthogonal_piece) if self.orthogonal == "fresh" else pieces


    def run(self, batch: NodeBatch, u, draw=None):
        """Decide a prepared batch with the uniforms ``u (n, 3)`` (column 0 unused, accept, residual).

        :func:`rass_theory.verifiers.kernels.rank_kernel` with the rule's pieces (:meth:`pieces`).
        """
        return rank_kernel(batch, u, self.pieces(batch, draw))


def optimal_list(orthogonal: str = "selected") -> OptimalListVerifier:
    """Return the batched verifier whose acceptance is the list-coupling bound (NumPy or torch).

    Parameters
    ----------
    orthogonal : {"selected", "fresh"}

    Returns
    -------
    OptimalListVerifier

    Notes
    -----
    Selection by private priorities realises ``g* = f`` below ``t_a`` and the law of the
    maximum above, then maximal coupling against ``g*`` and an exact residual draw; acceptance
    ``alpha*(K, delta) = min_t [Phi(t - delta) + 1 - Phi(t)^K]``.  See
    :class:`OptimalListVerifier` and ``proofs/P10-optimal-list-rule.md``.

    Examples
    --------
    >>> import numpy as np, rass_theory as rt
    >>> v = rt.verifiers.optimal_list()
    >>> round(v.expected_acceptance(4, 0.5), 6) == round(rt.acceptance_bound(4, 0.5), 6)
    True
    """
    return OptimalListVerifier(orthogonal)
