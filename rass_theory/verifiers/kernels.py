"""Verifier kernels written once for NumPy and torch, as compositions of pure pieces.

The blackjax pattern: a rule is a short composition

    frame (``_core.prepare``) -> select -> selected-law ratio -> accept -> residual -> rebuild (``_core.finish``)

of small functions of ``(batch, ...)`` that do all array work through the batch's namespace
``batch.nx`` (:mod:`rass_theory.backend`).  A :class:`RankPieces` bundles the pieces of one
rule; a wrong verifier (:mod:`rass_theory.mutants`) is the same composition with one piece
swapped, so every mutant built that way runs on both back ends.

Every law a residual is drawn from is the one law engine :mod:`rass_theory.exact.laws`,
written once against the namespace: :class:`~rass_theory.exact.laws.RankLaw` (RASS and the
threshold policy) with its sampler :func:`~rass_theory.exact.laws.sample`, and
:class:`~rass_theory.exact.laws.DGRSLaw` (the D-GRS levels, computed once per batch).  Only the
root finder differs between back ends (``nx.find_root``: scipy on NumPy, fixed iterations and
no host synchronisation on torch); ``tests/torch/test_math.py`` compares the two.

Proofs: rank selection and the ratio ``proofs/P2-rass-exactness.md`` and
``proofs/P7-selected-law.md``; D-GRS ``proofs/P3-dgrs-closed-form.md``; RMC
``proofs/P6-reductions.md``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..exact import laws as _engine
from ._core import NodeBatch, finish

__all__ = ["rank_residual", "single_draft_residual", "dgrs_final", "draw_rank", "select_rank", "target_ratio", "log_rank_ratio", "log_target_ratio", "accept", "RankPieces",
           "rank_pieces", "select_threshold", "rank_kernel", "rmc_kernel", "dgrs_kernel", "keep_orthogonal"]


def rank_residual(weights, delta, u):
    """Draws from ``(f - g_w)_+ / TV`` per row for rank weights ``(K,)`` or ``(n, K)``
    (:func:`rass_theory.exact.laws.sample` of the rank law)."""
    return _engine.sample(_engine.rank_law(weights), delta, u)


def single_draft_residual(delta, u):
    """Draws from ``(f - phi)_+ / TV``: the ``K = 1`` residual (D-GRS level 1)."""
    return _engine.DGRSLaw(1, delta).sample(u)


def dgrs_final(K: int, delta, u, levels=None):
    """Draws from the last D-GRS residual ``r_K`` per row (``levels`` reused when they fit)."""
    if levels is None or levels.K < K:
        levels = _engine.DGRSLaw(K, delta)
    return levels.sample(u, K)


# ----------------------------------------------------------------------------------------------
# pieces


def draw_rank(nx, weights, u):
    """``rank = #{j < K-1 : u >= W_j}`` per row, ``W_j`` the cumulative weights: ``P(rank = j) = w_j``.

    ``weights`` are ``(K,)`` or ``(n, K)``; ``u`` one uniform per row.
    """
    K = weights.shape[-1]
    cumulative = nx.cumsum(weights, -1)[..., : K - 1]
    if cumulative.ndim == 1:
        cumulative = cumulative[None, :]
    return nx.minimum(nx.count_true(u[:, None] >= cumulative, 1), K - 1)


def select_rank(nx, s, weights, u):
    """Draw a rank per row (:func:`draw_rank`) and return ``(child, order)``.

    ``order = argsort(s)`` (stable, ascending ranks) and ``child = order[rank]`` (drafting-order
    index of the selected child).
    """
    order = nx.argsort(s, 1)
    return nx.take_along(order, draw_rank(nx, weights, u)), order


def log_rank_ratio(nx, weights, s):
    """``log(g_w(s) / phi(s))`` per row for rank weights ``(K,)`` or ``(n, K)`` and ``s (n,)``:
    :meth:`rass_theory.exact.laws.RankLaw.log_ratio` (the Bernstein sum
    ``sum_j w_j K C(K-1, j) Phi(s)^j Phi(-s)^(K-1-j)``, proof ``P7-selected-law``)."""
    return _engine.rank_law(weights).log_ratio(s[:, None])[:, 0]


def log_target_ratio(delta, s):
    """``log(f(s) / phi(s)) = delta s - delta^2 / 2`` with ``f = phi(. - delta)`` (``-inf`` where
    ``delta^2`` overflows, ``delta > 1.3e154``: ``f/phi`` is 0 there)."""
    with np.errstate(over="ignore"):
        return delta * s - 0.5 * delta * delta


def accept(nx, log_ratio, u, degenerate):
    """``log u < log_ratio`` (accept w.p. ``min(1, exp(log_ratio))``), or a degenerate row."""
    with np.errstate(divide="ignore"):
        return (nx.log(u) < log_ratio) | degenerate


def keep_orthogonal(batch: NodeBatch, rows):
    """The default orthogonal piece: keep the selected child's ``z_perp`` (returns ``None``)."""
    return None


def target_ratio(batch: NodeBatch, s_sel):
    """The default target piece: ``log(f/phi)`` at the batch's (safe) deltas."""
    return log_target_ratio(batch.delta_safe, s_sel)


# ----------------------------------------------------------------------------------------------
# rank rules (RASS, threshold policies): select -> ratio -> accept -> residual -> rebuild


@dataclass(frozen=True)
class RankPieces:
    """The pieces of a rule that selects one child, then couples its law ``g`` with ``f``.

    Attributes
    ----------
    select : callable ``(batch, u) -> child``
        Drafting-order index of the selected child per row (``u`` one uniform per row).
    log_selected_ratio : callable ``(batch, s_sel) -> log(g(s_sel) / phi(s_sel))``
    residual : callable ``(batch, rows, u) -> s'``
        Draws from ``(f - g)_+ / TV`` for ``rows`` (every row when ``rows`` is ``None``).
    orthogonal : callable ``(batch, rows) -> z_perp or None``
        ``None`` keeps the selected child's orthogonal part.
    log_target_ratio : callable ``(batch, s_sel) -> log(f(s_sel) / phi(s_sel))``
    finish : callable ``(batch, chosen, accepted, new_s, rows, z_perp) -> result``
        The rebuild, :func:`rass_theory.verifiers._core.finish`.
    """

    select: Callable
    log_selected_ratio: Callable
    residual: Callable
    orthogonal: Callable = keep_orthogonal
    log_target_ratio: Callable = target_ratio
    finish: Callable = finish

    def replace(self, **pieces) -> "RankPieces":
        """The same rule with some pieces swapped."""
        return replace(self, **pieces)


def select_threshold(nx, s, weights, t, u):
    """The threshold policy's selection: the top child if its ``s >= t`` (per row), else a rank
    ``~ w`` (:func:`select_rank`); returns the drafting-order index."""
    rank_child, order = select_rank(nx, s, weights, u)
    top = order[:, -1]
    return nx.where(nx.take_along(s, top) >= t, top, rank_child)


def rank_pieces(weights, t=None) -> RankPieces:
    """The pieces of a rank rule: RASS with rank weights ``(K,)`` or ``(n, K)`` or, with a per-row
    threshold ``t (n,)``, the threshold-rank policy (arrays of the batch's back end).

    The selected-law ratio and the residual are :class:`rass_theory.exact.laws.RankLaw` and
    :func:`rass_theory.exact.laws.sample` (for RASS the ratio is :func:`log_rank_ratio`).
    """
    # one law serves the ratio of every row; the residual's law is built on the rejected rows
    # (the same per-row values as a take, its residual-only arrays computed on those rows only)
    law = _engine.RankLaw(weights, t)

    def select(batch, u):
        if t is None:
            return select_rank(batch.nx, batch.s, weights, u)[0]
        return select_threshold(batch.nx, batch.s, weights, t, u)

    def ratio(batch, s_sel):
        return law.log_ratio(s_sel[:, None])[:, 0]

    def residual(batch, rows, u):
        delta = batch.delta_safe
        if rows is None:
            return _engine.sample(law, delta, u)
        sub = _engine.RankLaw(weights if weights.ndim == 1 else weights[rows], None if t is None else t[rows])
        return _engine.sample(sub, delta[rows], u[rows])

    return RankPieces(select, ratio, residual)


def rank_kernel(batch: NodeBatch, u, pieces: RankPieces):
    """Run a rank rule: select, accept w.p. ``min(1, f/g)``, else draw ``s'`` from ``(f - g)_+ / TV``.

    Parameters
    ----------
    u : array (n, 3)
        Uniforms: rank, accept, residual.

    Notes
    -----
    Degenerate rows select child 0 and accept it.  The output law is the target for every
    selection rule whose selected law is ``g`` (proof ``P2-rass-exactness``); acceptance
    ``1 - TV(g, f)``.
    """
    nx = batch.nx
    child = nx.where(batch.degenerate, 0, pieces.select(batch, u[:, 0]))
    s_sel = nx.take_along(batch.s, child)
    log_ratio = pieces.log_target_ratio(batch, s_sel) - pieces.log_selected_ratio(batch, s_sel)
    accepted = accept(nx, log_ratio, u[:, 1], batch.degenerate)
    rows = nx.rows_where(~accepted)
    if rows is not None and rows.shape[0] == 0:
        return pieces.finish(batch, child, accepted, s_sel[:0], rows, None)
    new_s = pieces.residual(batch, rows, u[:, 2])
    return pieces.finish(batch, child, accepted, new_s, rows, pieces.orthogonal(batch, rows))


# ----------------------------------------------------------------------------------------------
# RMC and D-GRS


def rmc_kernel(batch: NodeBatch, u):
    """Reflection maximal coupling (K = 1): accept w.p. ``min(1, f/phi)``, else ``s -> delta - s``.

    ``u`` holds one uniform per row, shape ``(n,)``; acceptance ``2 Phi(-delta/2)``
    (proof ``P6-reductions``).
    """
    nx = batch.nx
    s, delta = batch.s[:, 0], batch.delta
    accepted = accept(nx, log_target_ratio(delta, s), u, batch.degenerate)
    return finish(batch, nx.zeros_index(batch.n, s), accepted, delta - s)


def dgrs_kernel(batch: NodeBatch, u, *, order=None, level=None, final=None):
    """Greedy rejection over the children (D-GRS), then a draw from the last residual.

    Parameters
    ----------
    u : array (n, K + 1)
        Column ``k`` decides the ``k``-th examined child, column ``K`` the residual draw.
    order : array (n, K) of int, optional
        Examination order per row (default: drafting order, the exact rule).
    level : callable ``k -> j``, optional
        Residual level tested at the ``k``-th examination (1-based; default ``j = k``).
    final : callable ``(batch, delta, u, levels) -> s'``, optional
        The last residual draw (default: ``r_K``).

    Notes
    -----
    Child ``k`` is accepted w.p. ``min(1, r_{k-1}(s_k)/phi(s_k))`` with ``r_0 = f`` and
    ``r_k = (r_{k-1} - phi)_+ / Z_k``; after ``K`` rejections ``s'`` is drawn from ``r_K`` and
    child 0's ``z_perp`` is kept.  Acceptance ``1 - prod_k Z_k`` (proof ``P3-dgrs-closed-form``).
    Where indexing is free (NumPy, torch on the CPU) only the still-open rows are evaluated.
    """
    nx, K = batch.nx, batch.K
    delta = batch.delta_safe
    levels = _engine.DGRSLaw(K, delta)                      # computed once, on first use
    accepted = nx.copy(batch.degenerate)
    chosen = nx.zeros_index(batch.n, batch.s)
    for k in range(K):
        j = k + 1 if level is None else level(k + 1)
        child = nx.index_constant(k, batch.n, batch.s) if order is None else order[:, k]
        s_k = batch.s[:, k] if order is None else nx.take_along(batch.s, child)
        rows = nx.rows_where(~accepted)
        if rows is None:                                       # accelerator: every row, merged
            take = ~accepted & (u[:, k] < levels.accept(j, s_k))
            chosen = nx.where(take, child, chosen)
            accepted = accepted | take
            continue
        if rows.shape[0] == 0:
            break
        p = levels.take(rows).accept(j, s_k[rows])
        hit = rows[u[rows, k] < p]
        accepted[hit] = True
        chosen[hit] = child[hit]
    rows = nx.rows_where(~accepted)
    draw = final if final is not None else (lambda b, d, v, lv: lv.sample(v, K))
    if rows is None:
        return finish(batch, chosen, accepted, draw(batch, delta, u[:, K], levels))
    if rows.shape[0] == 0:
        return finish(batch, chosen, accepted, batch.s[:0, 0], rows)
    new_s = draw(batch, delta[rows], u[rows, K], levels.take(rows))
    return finish(batch, chosen, accepted, new_s, rows)
