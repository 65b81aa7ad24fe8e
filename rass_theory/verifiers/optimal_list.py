"""The optimal list verifier: select by private priorities, couple maximally, draw the residual.

Its acceptance is the list-coupling bound ``alpha*(K, delta)`` at every ``K`` and ``delta``
(``proofs/P10-optimal-list-rule.md``).
"""
from __future__ import annotations

import numpy as np

from .._validation import check_delta, check_K
from ..optimize import list_rule as _rule
from ._base import BuiltinVerifier
from ._core import draw_uniforms, finish, prepare
from ..backend import get_backend
from .rass import fresh_orthogonal

__all__ = ["OptimalListVerifier", "optimal_list", "rule_params"]

rule_params = _rule.rule_params

class OptimalListVerifier(BuiltinVerifier):
    """Batched verifier of the optimal list rule.

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

    Random numbers: ``rng.random((n, 2 + K))`` -- columns: accept, residual, one keep decision
    per child -- then a data-dependent number of uniforms for the fake keys (rejection sampling,
    three uniforms per proposal; see :func:`rass_theory.optimize.list_rule.draw_fake_scores`),
    then fresh orthogonal parts if requested.
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
        if get_backend(children).name == "torch":
            from ._optimal_list_torch import run_torch

            return run_torch(children, mu_draft, mu_target, sigma, rng)
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        u = draw_uniforms(batch, 2 + batch.K)
        accepted = batch.degenerate.copy()
        chosen = np.zeros(batch.n, dtype=np.int64)
        live = np.flatnonzero(~accepted)
        if live.size == 0:  # every node degenerate: child 0 is exact
            return finish(batch, chosen, accepted, np.empty(0))
        rows = slice(None) if live.size == batch.n else live  # a view when every row is live
        s = batch.s[rows]
        p = rule_params(batch.K, batch.delta.astype(np.float64)[rows])
        child = _rule.select(p, s, u[rows, 2:], batch.rng)
        s_sel = s[np.arange(live.size), child]
        take = np.log(u[live, 0]) < _rule.log_accept_ratio(p, s_sel)
        chosen[live] = child
        accepted[live] = take
        return self._correct(batch, p, live, take, chosen, accepted, u)

    def _correct(self, batch, p, live, take, chosen, accepted, u):
        rej = ~take
        rejected = live[rej]
        if rejected.size == 0:
            return finish(batch, chosen, accepted, np.empty(0), rejected)
        p_rej = p if p.delta.size == 1 else p.take(rej)
        if p_rej.delta.size == 1 and rejected.size > 1:
            p_rej = _rule.ListRuleParams(*(np.repeat(getattr(p_rej, f), rejected.size)
                                           for f in _rule.ListRuleParams.__dataclass_fields__))
        new_s = _rule.sample_residual(p_rej, u[rejected, 1])
        fresh = None
        if self.orthogonal == "fresh":
            fresh = fresh_orthogonal(batch)[rejected]
        return finish(batch, chosen, accepted, new_s, rejected, fresh)


def optimal_list(orthogonal: str = "selected") -> OptimalListVerifier:
    """Return the batched verifier whose acceptance is the list-coupling bound.

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
