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
from ._base import BuiltinVerifier
from ._batch import NodeBatch, finish
from ._core import prepare
from .rass import fresh_orthogonal

__all__ = ["OptimalListVerifier", "optimal_list", "rule_params"]

rule_params = _rule.rule_params


class OptimalListVerifier(BuiltinVerifier):
    """Batched verifier of the optimal list rule (NumPy arrays or torch tensors).

    Parameters
    ----------
    orthogonal : {"selected", "fresh"}
        On the correction branch keep the selected child's ``z_perp`` (default) or draw a fresh one.

    Notes
    -----
    Per row (its own ``delta``): children with ``s >= t_a`` keep their score as key; a child
    with ``s < t_a`` gets, with probability ``q(s)``, a fake key drawn from ``nu ~ phi q`` on
    ``(-inf, t_a)``; the largest key is selected.  Its ``s`` has law
    ``g* = f 1{s < t_a} + K phi Phi^(K-1) 1{s >= t_a}``.  Accept w.p. ``min(1, f/g*)`` (always
    below ``t_a``), else draw ``s'`` from ``(f - g*)_+ / (1 - alpha*)`` on ``[t*, inf)`` by inverse
    CDF and rebuild ``child + sigma (s' - s) e``.  Exact because the ratio uses the selected law
    that the selection realises at that row's ``delta`` (``proofs/P2-rass-exactness.md``,
    ``proofs/P10-optimal-list-rule.md``); acceptance ``alpha*(K, delta)``.

    The per-row constants are solved and certified on the host (:func:`rule_params`; every check
    of P10.6, a :class:`~rass_theory.optimize.list_rule.ListRuleCertificateError` naming ``K``,
    ``delta`` and the check if one fails), so a torch batch copies its ``n`` deltas to the host
    once; the fake keys are drawn by rejection sampling (one host check per round).  Everything
    else runs on the inputs' device.

    Random numbers: ``(n, 2 + K)`` uniforms up front -- columns: accept, residual, one keep
    decision per child -- then a data-dependent number of uniforms for the fake keys (three per
    proposal; :func:`rass_theory.optimize.list_rule.draw_fake_scores`), then fresh orthogonal
    parts if requested.
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

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        return self.run(batch, batch.uniform(batch.n, 2 + batch.K))

    def run(self, batch: NodeBatch, u, draw=None):
        """Decide a prepared batch with the uniforms ``u (n, 2 + K)`` (accept, residual, keep).

        ``draw(shape) -> uniforms`` replaces the batch's generator as the fake keys' source.
        """
        nx, n = batch.nx, batch.n
        draw = draw if draw is not None else (lambda shape: batch.uniform(*shape))
        chosen = nx.zeros_index(n, batch.s)
        live = nx.rows_where(~batch.degenerate)                 # None on an accelerator: every row
        if live is not None and live.shape[0] == 0:            # every node degenerate: child 0 is exact
            return finish(batch, chosen, nx.copy(batch.degenerate), batch.s[:0, 0])
        whole = live is None or live.shape[0] == n
        delta = batch.delta if live is None else batch.delta[live]
        if live is None:
            delta = nx.where(batch.degenerate, 0.0, delta)
        host = delta.detach().cpu().numpy() if nx.name == "torch" else delta
        p = rule_params(batch.K, np.asarray(host, dtype=np.float64)).on(batch.s)
        s = batch.s if whole else batch.s[live]
        uu = u if whole else u[live]
        child = _rule.select(p, s, uu[:, 2:], draw)
        s_sel = nx.take_along(s, child)
        take = nx.log(uu[:, 0]) < _rule.log_accept_ratio(p, s_sel)
        if live is None:                                        # accelerator: merge with where
            child = nx.where(batch.degenerate, 0, child)
            accepted = take | batch.degenerate
            new_s = _rule.sample_residual(p, u[:, 1])
            fresh = fresh_orthogonal(batch) if self.orthogonal == "fresh" else None
            return finish(batch, child, accepted, new_s, None, fresh)
        accepted = nx.copy(batch.degenerate)
        chosen[live] = child
        accepted[live] = take
        rej = nx.rows_where(~take)
        rejected = live[rej]
        if rejected.shape[0] == 0:
            return finish(batch, chosen, accepted, s_sel[:0], rejected)
        p_rej = p if p.delta.shape[0] == 1 else p.take(rej)
        new_s = _rule.sample_residual(p_rej, u[rejected, 1])
        fresh = fresh_orthogonal(batch)[rejected] if self.orthogonal == "fresh" else None
        return finish(batch, chosen, accepted, new_s, rejected, fresh)


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
