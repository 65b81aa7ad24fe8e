"""D-GRS: greedy rejection over the children in drafting order (arXiv 2609.17691)."""
from __future__ import annotations

import numpy as np

from .._validation import check_delta, check_K
from ._base import BuiltinVerifier
from ._core import draw_uniforms, finish, prepare
from ._residual import draw_dgrs_final_residual

__all__ = ["DGRSVerifier", "dgrs"]


class DGRSVerifier(BuiltinVerifier):
    """Batched D-GRS verifier (sequence coupling in drafting order).

    Notes
    -----
    Residuals ``r_0 = f``, ``r_k = (r_{k-1} - phi)_+ / Z_k``.  Children are examined in drafting
    order; child ``k`` (1-based) is accepted with probability ``min(1, r_{k-1}(s_k)/phi(s_k))``
    (closed form from :mod:`rass_theory.exact.dgrs`).  After ``K`` rejections the coordinate is
    drawn from ``r_K`` by inverse CDF (a cached table plus Newton per distinct ``delta``, see
    ``verifiers._residual.DGRSFinalResidual``) and the state keeps child 0's orthogonal part.  Acceptance
    ``1 - prod_k Z_k`` (proof ``P3-dgrs-closed-form``).

    Random numbers: ``rng.random((n, K + 1))``; column ``k`` decides child ``k``, column ``K`` is
    the residual draw.  Rows are decided in vectorised form; only the loop over ``K`` is Python.
    """

    name = "dgrs"

    def expected_acceptance(self, K: int, delta: float) -> float:
        from ..exact.acceptance import acceptance

        return float(acceptance("dgrs", check_K(K), check_delta(delta)))

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        from ..exact import dgrs as exact_dgrs

        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        K, n = batch.K, batch.n
        u = draw_uniforms(batch, K + 1)
        delta = batch.delta.astype(np.float64)
        accepted = batch.degenerate.copy()
        chosen = np.zeros(n, dtype=np.int64)
        open_rows = np.flatnonzero(~accepted)
        for k in range(K):
            if open_rows.size == 0:
                break
            p = exact_dgrs.batch_accept_prob(k + 1, delta[open_rows], batch.s[open_rows, k])
            take = u[open_rows, k] < p
            hit = open_rows[take]
            accepted[hit] = True
            chosen[hit] = k
            open_rows = open_rows[~take]
        new_s = np.empty(0)
        if open_rows.size:
            new_s = draw_dgrs_final_residual(K, delta[open_rows], u[open_rows, K])
        return finish(batch, chosen, accepted, np.asarray(new_s, dtype=np.float64), open_rows)


def dgrs() -> DGRSVerifier:
    """Return the batched D-GRS verifier (drafting order, recursive closed-form residuals).

    Notes
    -----
    Child ``k`` accepted w.p. ``min(1, r_{k-1}(s_k)/phi(s_k))`` with ``r_0 = f`` and
    ``r_k = (r_{k-1} - phi)_+ / Z_k``; after ``K`` rejections draw ``s'`` from ``r_K`` and keep
    child 0's ``z_perp``.  See :class:`DGRSVerifier` and ``proofs/P3-dgrs-closed-form.md``.
    """
    return DGRSVerifier()
