"""A catalogue of realistic *wrong* verifiers ("mutants") that prove the harness has teeth.

Each entry of :data:`MUTANTS` is a factory ``factory(K) -> verifier`` whose docstring says what
is wrong, why the bug is plausible, and which statistic of
:func:`rass_theory.check_exactness` should catch it.  Every mutant obeys the verifier contract's
shapes (all but ``claims_child_after_correction``, which breaks the "accepted => exact copy"
clause on purpose), so only the *law* of its output, its acceptance or the contract checker can
expose it.  Every one is wrong in law or in contract somewhere on the harness's default grid
(``rass_theory.stats.grid.DEFAULT_CELLS``); most at ``K = 4``, some only where real runs go:
K >= 5 or odd K, delta above 4.5, ``||mu_draft||/sigma`` in the thousands (float32), dim > 128,
calls in sequence (the generator, aliasing, the states' dtype), or at the power of the
2.5-million-row cell.  ``tests/test_mutants_unit.py`` shows the size of the discrepancy for the
closed-form ones, ``bench/results/harness_mutants.md`` the verdict of the defaults on each.

Most mutants are an exact rule's kernel (:mod:`rass_theory.verifiers.kernels`) with one piece
swapped -- the selection, the ratio, the residual, the orthogonal part or the rebuild of
:class:`~rass_theory.verifiers.kernels.RankPieces`, or the order and levels of
:func:`~rass_theory.verifiers.kernels.dgrs_kernel` -- so they run on NumPy arrays and torch
tensors alike (:data:`MUTANT_BACKENDS`; :mod:`rass_theory.torch.mutants` is this catalogue filtered).

Bugs that look wrong but are *not* wrong in law are deliberately absent: reconstructing the
correction with another child's ``z_perp``, with ``-z_perp``, or with fresh projected noise all
give the target law at a single node (every child's orthogonal part is independent of all the
``s`` values that drive the decision), so no exactness test can or should reject them.

Statistics referred to below: ``s`` -- goodness of fit of the projection to ``N(delta, 1)``;
``r`` -- ``||z_perp||^2`` against ``chi^2(d - 1)``; ``acceptance`` -- the accepted count
against the exact acceptance of the rule the mutant imitates; ``contract`` -- the contract
checker.

>>> from rass_theory.mutants import MUTANTS, all_mutants
>>> len(MUTANTS) >= 8
True
"""
from __future__ import annotations

import copy
import functools
from dataclasses import replace

import numpy as np

from ._validation import check_K
from .backend import NAMES, get_backend
from .verifiers._base import BuiltinVerifier
from .verifiers._core import finish, prepare
from .verifiers._result import VerifierResult
from .verifiers._weights import batch_weights, optimal_single
from .verifiers.kernels import (accept, dgrs_kernel, draw_rank, log_target_ratio, rank_kernel,
                                rank_pieces, target_ratio)
from .verifiers.kernels import dgrs_final as _dgrs_final, rank_residual as _rank_residual
from .verifiers.kernels import single_draft_residual as _single_draft_residual

__all__ = ["MUTANTS", "MUTANT_CATCHES", "MUTANT_BACKENDS", "all_mutants", "MutantVerifier",
           "round_bfloat16"]

#: name -> factory(K) returning the mutant verifier.
MUTANTS: dict = {}
#: name -> the statistic(s) expected to expose it.
MUTANT_CATCHES: dict = {}
#: name -> the back ends the mutant runs on (:data:`rass_theory.backend.NAMES` when it is built
#: from the shared kernels of :mod:`rass_theory.verifiers.kernels` with one piece swapped).
MUTANT_BACKENDS: dict = {}


def _register(name: str, catches: str, min_K: int = 1, backends: tuple = NAMES, imitates="rass"):
    """Register the mutant ``name``: the decorated ``build(K)`` returns its rule, the registered
    factory ``factory(K)`` the :class:`MutantVerifier` around it (claiming the acceptance of
    ``imitates``)."""
    def decorator(build):
        @functools.wraps(build)
        def factory(K: int = 4):
            return MutantVerifier(name, K, build(K), imitates)

        MUTANTS[name] = factory
        MUTANT_CATCHES[name] = catches
        MUTANT_BACKENDS[name] = backends
        factory.min_K = min_K                    # the smallest K where the bug shows (all_mutants)
        return factory

    return decorator


def all_mutants(K: int = 4, backend: str = "numpy") -> dict:
    """Instantiate every mutant that applies to nodes with ``K`` children on ``backend``.

    Parameters
    ----------
    K : int, default 4
        Children per node.  Mutants whose bug needs several children (e.g. the D-GRS ordering
        bugs) are left out for smaller ``K``, where they would coincide with an exact rule.
    backend : {"numpy", "torch"}
        Keep the mutants that run on this back end (:data:`MUTANT_BACKENDS`).

    Returns
    -------
    dict
        ``name -> verifier`` in catalogue order.
    """
    K = check_K(K)
    if backend not in NAMES:
        raise ValueError(f"backend must be one of {NAMES}, got {backend!r}")
    return {name: factory(K) for name, factory in MUTANTS.items()
            if K >= factory.min_K and backend in MUTANT_BACKENDS[name]}


class MutantVerifier(BuiltinVerifier):
    """A wrong verifier assembled from switchable pieces (see the factories for each bug).

    The expected acceptance reported is that of the *exact* rule the mutant imitates, so that
    the harness's acceptance test compares against what the mutant's author would have claimed.
    """

    imitates = "rass"

    def __init__(self, name: str, K: int, rule, imitates: str = "rass"):
        self.name = name
        self.K_hint = K
        self._rule = rule
        self.imitates = imitates

    def __repr__(self) -> str:
        return f"MutantVerifier({self.name!r}, K={self.K_hint})"

    def expected_acceptance(self, K: int, delta: float):
        from .optimize.dispatch import acceptance

        if self.imitates is None:  # the author declares nothing
            return None
        if self.imitates == "rmc":
            return float(acceptance("rmc", 1, delta))
        return float(acceptance(self.imitates, K, delta))

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        return self._rule(children, mu_draft, mu_target, sigma, rng)


# ----------------------------------------------------------------------------------------------
# building blocks


def _zero(batch, s):
    """``log(g/phi) = 0``: the draft density in place of the selected law."""
    return s * 0.0


def _select_piece(kind: str, weights):
    """The selection piece: ``"sorted"`` (RASS), ``"drafting"`` (rank used as a drafting index), ``"top"``."""
    if kind == "drafting":
        return lambda batch, u: draw_rank(batch.nx, weights, u)
    if kind == "top":
        return lambda batch, u: batch.nx.argsort(batch.s, 1)[:, -1]
    return rank_pieces(weights).select


def _residual_piece(kind, weights, cache: dict):
    """The residual piece (see :func:`_rank_rule`); rows ``None`` means every row."""
    exact = rank_pieces(weights).residual
    if callable(kind):
        return lambda batch, rows, u: kind(batch, rows, u, weights)

    def rows_of(batch, rows, u):
        d = batch.delta_safe
        return (d, u) if rows is None else (d[rows], u[rows])

    def residual(batch, rows, u):
        nx = batch.nx
        if kind == "single":
            return _single_draft_residual(*rows_of(batch, rows, u))
        if kind == "target":
            d, uu = rows_of(batch, rows, u)
            return d + nx.ndtri(uu * (1 - 2.0 ** -40) + 2.0 ** -41)
        if kind == "cached":                    # the first call's first row, cached under K
            d0 = cache.setdefault(batch.K, float(batch.delta_safe[0]))
            d, uu = rows_of(batch, rows, u)
            w0 = nx.constant(np.array(optimal_single(batch.K, d0)), batch.s)
            return _rank_residual(w0, d * 0.0 + d0, uu)
        if kind == "coarse32" and nx.is_float32(batch.children):
            u = (u * 256 // 1 + 0.5) / 256      # a 256-entry table, nearest entry
        if kind == "truncated4":
            return _truncated_residual(batch, rows, u, weights)
        return exact(batch, rows, u)

    return residual


def _truncated_residual(batch, rows, u, weights):
    """Residual draws with ``|s' - delta| > 4`` redrawn (NumPy only)."""
    exact = rank_pieces(weights).residual
    new_s = np.asarray(exact(batch, rows, u), dtype=np.float64)
    d = batch.delta_safe[rows]
    out = np.flatnonzero(np.abs(new_s - d) > 4.0)
    while out.size:
        w = weights[rows[out]] if weights.ndim == 2 else weights
        new_s[out] = _rank_residual(np.ascontiguousarray(w), d[out], batch.rng.random(out.size))
        out = out[np.abs(new_s[out] - d[out]) > 4.0]
    return new_s


def _rounded(residual, rounding):
    def piece(batch, rows, u):
        return rounding(batch.nx, residual(batch, rows, u))

    return piece


def _bfloat16(nx, x):
    """``x`` rounded to bfloat16 (8 significant bits), in float64."""
    if nx.name == "torch":
        import torch

        return x.to(torch.bfloat16).to(x.dtype)
    return round_bfloat16(x)


def _orthogonal_piece(kind: str):
    """The orthogonal piece: ``"selected"``, ``"zero"``, ``"unprojected"`` (both back ends) or a
    NumPy-only variant of :func:`_orth_variant`."""
    if kind == "selected":
        return None
    if kind == "zero":
        return lambda batch, rows: batch.direction * 0.0 if rows is None else batch.direction[rows] * 0.0
    if kind == "unprojected":
        def fresh(batch, rows):
            r = batch.n if rows is None else rows.shape[0]
            return batch.nx.normal(batch.rng, (r, batch.d), batch.s)
        return fresh
    return kind                                  # resolved per call by _orth_variant


def _claimed_finish(batch, chosen, accepted, new_s, rows, z_perp):
    """The rebuild, then every row reported accepted with the selected child's index."""
    res = finish(batch, chosen, accepted, new_s, rows, z_perp)
    return batch.result(res.states, accepted | ~accepted, chosen)


def _written_back_finish(batch, chosen, accepted, new_s, rows, z_perp):
    """The rebuild, written into ``children`` in place, every row reported accepted."""
    res = _claimed_finish(batch, chosen, accepted, new_s, rows, z_perp)
    nx, ar = batch.nx, batch.nx.arange(batch.n, batch.s)
    batch.children[ar, chosen] = nx.where(accepted[:, None], batch.children[ar, chosen], res.states)
    return res


def _rank_rule(*, select="sorted", w_correct=None, ratio="g", residual="g", orth="selected",
               residual_round=None, claim_child=False, alter_batch=None, ratio_scale=None,
               write_back=False):
    """Return a RASS-like rule: the RASS kernel with the named pieces swapped (optimal weights).

    ``select``: ``"sorted"``, ``"drafting"`` or ``"top"``; ``w_correct``: the weights of the
    ratio and the residual as a function of the selection weights; ``ratio``: ``"g"``,
    ``"phi"`` (the draft density) or ``"one"`` (always accept); ``residual``: ``"g"``,
    ``"single"``, ``"target"``, ``"cached"`` (the first call's first row, cached per ``K``),
    ``"coarse32"`` (a 256-entry table on float32 inputs), ``"truncated4"`` (NumPy) or a function
    ``(batch, rows, u, weights) -> s'``; ``orth``: see :func:`_orthogonal_piece`;
    ``alter_batch(batch, children, mu_draft, mu_target, sigma) -> batch`` swaps the prepared
    frame (e.g. :func:`_row0_delta`); ``ratio_scale="sigma"`` evaluates the ratio at ``sigma s``; ``claim_child`` and
    ``write_back`` swap the rebuild.  Every option but the NumPy-only ones named there runs on
    both back ends.
    """
    cache = {}

    def rule(children, mu_draft, mu_target, sigma, rng):
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        if alter_batch is not None:
            batch = alter_batch(batch, children, mu_draft, mu_target, sigma)
        u = batch.uniform(batch.n, 3)
        ws = batch_weights("optimal", batch)
        wc = ws if w_correct is None else w_correct(ws)
        pieces = rank_pieces(wc).replace(select=_select_piece(select, ws),
                                          residual=_residual_piece(residual, wc, cache))
        if ratio in ("phi", "one"):
            pieces = pieces.replace(log_selected_ratio=_zero)
        if ratio == "one":
            pieces = pieces.replace(log_target_ratio=_zero)
        if ratio_scale == "sigma":
            base = pieces.log_selected_ratio
            pieces = pieces.replace(log_target_ratio=lambda b, s: target_ratio(b, s * b.sigma),
                                    log_selected_ratio=lambda b, s: base(b, s * b.sigma))
        if residual_round is not None:
            pieces = pieces.replace(residual=_rounded(pieces.residual, residual_round))
        if residual == "reuse_rank":
            base_residual = rank_pieces(wc).residual
            pieces = pieces.replace(residual=lambda b, rows, uu: base_residual(b, rows, u[:, 0]))
        orth_piece = _orthogonal_piece(orth)
        if isinstance(orth_piece, str):
            pieces = pieces.replace(finish=_orth_variant_finish(orth_piece, u[:, 2]))
        elif orth_piece is not None:
            pieces = pieces.replace(orthogonal=orth_piece)
        if claim_child:
            pieces = pieces.replace(finish=_claimed_finish)
        if write_back:
            pieces = pieces.replace(finish=_written_back_finish)
        return rank_kernel(batch, u, pieces)

    return rule


def _off_e(g, e):  # NumPy only
    """``g`` with its component along the unit rows ``e`` removed."""
    return g - np.einsum("nd,nd->n", g, e)[:, None] * e


def _selected_zperp(batch, chosen, rows):  # NumPy only
    """``z_perp`` of the chosen child of ``rows`` (standardised, float64)."""
    x = batch.children[rows, chosen[rows]].astype(np.float64)
    return _off_e((x - batch.mu_draft[rows]) / batch.sigma[rows, None], batch.direction[rows])


def _orth_variant(kind, batch, chosen, rejected, new_s, u_res):
    """The NumPy-only wrong orthogonal parts of the correction branch (see the factories)."""
    e = batch.direction[rejected]
    if kind == "box_muller":
        g = batch.rng.standard_normal(e.shape)
        radius = np.sqrt(-2.0 * np.log(batch.rng.random(rejected.size)))
        g[:, 0] = radius * np.cos(2 * np.pi * u_res)
        if g.shape[1] > 1:
            g[:, 1] = radius * np.sin(2 * np.pi * u_res)
        return _off_e(g, e)
    if kind == "roll":
        return _selected_zperp(batch, chosen, (rejected - 1) % batch.n)
    if kind == "tiled128":
        d = e.shape[1]
        block = batch.rng.standard_normal((rejected.size, min(d, 128)))
        return _off_e(np.tile(block, (1, -(-d // block.shape[1])))[:, :d], e)
    zp = _selected_zperp(batch, chosen, rejected)  # "sign_tied"
    a = np.zeros(e.shape[1])
    a[0] = 1.0
    side = np.sign(zp @ a) * np.sign(new_s - batch.delta_safe[rejected])
    return zp * np.where(side == 0, 1.0, side)[:, None]


def _orth_variant_finish(kind, u_res):
    """A rebuild whose orthogonal part is :func:`_orth_variant` (it needs ``chosen`` and ``s'``)."""

    def fin(batch, chosen, accepted, new_s, rows, z_perp):
        if rows is None or rows.size == 0:
            return finish(batch, chosen, accepted, new_s, rows, z_perp)
        return finish(batch, chosen, accepted, new_s, rows,
                      _orth_variant(kind, batch, chosen, rows, np.asarray(new_s, dtype=np.float64), u_res[rows]))

    return fin


def _dgrs_rule(*, order="drafting", levels="recursive"):
    """Return a D-GRS-like rule: the D-GRS kernel with the examination ``order`` (``"drafting"``
    or ``"sorted"``) and the residual ``levels`` (``"recursive"``, ``"flat"``: every child
    against ``f`` and the end from ``(f - phi)_+``, ``"shifted"``: off by one, ``"clamped4"``:
    the level table stops at ``k = 4``) swapped."""

    def rule(children, mu_draft, mu_target, sigma, rng):
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        nx, K = batch.nx, batch.K
        kw = {}
        if order == "sorted":
            kw["order"] = nx.argsort(batch.s, 1)
        if levels == "flat":
            kw["level"] = lambda k: 1
            kw["final"] = lambda b, d, v, lv: _single_draft_residual(d, v)
        elif levels == "shifted":
            kw["level"] = lambda k: min(k + 1, K)
        elif levels == "clamped4":
            kw["level"] = lambda k: min(k, 4)
            kw["final"] = lambda b, d, v, lv: _dgrs_final(min(b.K, 4), d, v)
        return dgrs_kernel(batch, batch.uniform(batch.n, K + 1), **kw)

    return rule


def _row0_delta(batch, *inputs):
    """Row 0's ``delta`` (and degeneracy) for every row of ``batch``."""
    first = batch.nx.zeros_index(batch.n, batch.s)
    return replace(batch, delta=batch.delta[first], degenerate=batch.degenerate[first])


def _reversed(ws):
    return ws.flip(-1) if hasattr(ws, "flip") else ws[..., ::-1].copy()


# ----------------------------------------------------------------------------------------------
# the catalogue


@_register("ratio_against_draft", catches="s, acceptance")
def ratio_against_draft(K: int = 4):
    """RASS whose acceptance ratio uses the draft density ``phi`` instead of the selected law ``g_w``.

    Wrong: accepts the ranked child w.p. ``min(1, f/phi)`` although its density is ``g_w``, then
    corrects with the right residual ``(f - g_w)_+``; the accepted part ``g_w min(1, f/phi)`` is
    not ``min(f, g_w)``.  Plausible: it is the single-draft (RMC) ratio, copied over when a code
    base moves from K = 1 to ranked selection.  At K = 4, delta = 0.5 the selected child sits to
    the right of the target, so the output ``s`` is shifted right.  Caught by ``s`` (and by the
    acceptance count).
    """
    return _rank_rule(ratio="phi")


@_register("single_draft_residual", catches="s")
def single_draft_residual(K: int = 4):
    """RASS with the correct ratio ``f/g_w`` but the single-draft residual ``(f - phi)_+ / TV``.

    Wrong: after rank selection the missing mass is ``(f - g_w)_+``, not ``(f - phi)_+``.
    Plausible: the RMC residual (reflection region ``s > delta/2``) is reused unchanged.  The
    acceptance is right (only the residual branch is wrong).  Caught by ``s`` only.
    """
    return _rank_rule(residual="single")


@_register("residual_from_target", catches="s")
def residual_from_target(K: int = 4):
    """RASS that draws the correction from the target ``f`` itself instead of the residual.

    Wrong: output density ``min(f, g_w) + TV f`` double-counts the overlap.  Plausible: "on
    rejection just sample the target" sounds harmless.  Caught by ``s`` (too much mass where
    ``g_w`` and ``f`` overlap).
    """
    return _rank_rule(residual="target")


@_register("dgrs_flat_residual", catches="s, acceptance", min_K=2, imitates="dgrs")
def dgrs_flat_residual(K: int = 4):
    """D-GRS with a non-recursive residual: every child tested with ``min(1, f/phi)``, final draw from ``(f - phi)_+``.

    Wrong: for K >= 2, after child 1 is rejected the remaining mass is ``r_1``, not ``f``; the
    output ``min(f, phi)(1 - TV^K)/(1 - TV) + TV^K (f - phi)_+ / TV`` over-weights the overlap.
    Plausible: each child looks like an independent RMC step.  Caught by ``s`` and by the
    acceptance count (``1 - TV^K`` instead of ``1 - prod Z_k``).
    """
    return _dgrs_rule(levels="flat")


@_register("dgrs_sorted_order", catches="s", min_K=2, imitates="dgrs")
def dgrs_sorted_order(K: int = 4):
    """D-GRS that examines the children sorted by ``s`` (ascending) instead of in drafting order.

    Wrong: the level-k test assumes child k is a fresh ``N(0, 1)`` draw independent of the
    earlier rejections; the k-th smallest of K draws is not.  Plausible: the children were
    already sorted for RASS and the same array is reused.  Caught by ``s`` (too many small
    values accepted early).
    """
    return _dgrs_rule(order="sorted")


@_register("dgrs_level_off_by_one", catches="s, acceptance", min_K=2, imitates="dgrs")
def dgrs_level_off_by_one(K: int = 4):
    """D-GRS whose child k is tested against level ``r_k`` instead of ``r_{k-1}`` (off by one).

    Wrong: child 1 should be tested against ``r_0 = f`` but meets ``r_1``, and the last child
    reuses ``r_{K-1}``.  Plausible: 0-based versus 1-based level indexing.  Caught by ``s`` and
    the acceptance count.
    """
    return _dgrs_rule(levels="shifted")


@_register("weights_reversed_in_correction", catches="s, acceptance", min_K=2)
def weights_reversed_in_correction(K: int = 4):
    """RASS that selects with rank weights ``w`` but computes ratio and residual with ``w[::-1]``.

    Wrong: the correction must use the law of what was actually selected.  Plausible: ascending
    versus descending rank conventions differ between the paper's notation and the selection
    code.  Caught by ``s`` and the acceptance count.
    """
    return _rank_rule(w_correct=_reversed)


@_register("orth_zeroed_on_correction", catches="r")
def orth_zeroed_on_correction(K: int = 4):
    """RASS that rebuilds the corrected state from ``s'`` alone: ``mu_draft + sigma s' e``.

    Wrong: ``z_perp`` is zero on the correction branch, so ``||z_perp||^2`` has an atom at 0 of
    mass ``1 - acceptance``.  Plausible: the theory is one-dimensional and the rebuild forgets
    the other ``d - 1`` coordinates.  Invisible to any test on ``s``.  Caught by ``r``.
    """
    return _rank_rule(orth="zero")


@_register("orth_unprojected_fresh", catches="s")
def orth_unprojected_fresh(K: int = 4):
    """RASS with ``orthogonal="fresh"`` that forgets to project the fresh noise off ``e``.

    Wrong: the correction is ``mu_draft + sigma (s' e + g)`` with ``g ~ N(0, I_d)`` whose own
    component along ``e`` adds ``N(0, 1)`` to ``s'`` on the correction branch.  Plausible: "fresh
    orthogonal noise" implemented as fresh noise.  ``||z_perp||^2`` stays ``chi^2(d-1)``.
    Caught by ``s`` (too wide).
    """
    return _rank_rule(orth="unprojected")


def round_bfloat16(x) -> np.ndarray:
    """Round float64 values to the nearest bfloat16 (8 significant bits), returned as float64.

    Emulates ``torch.tensor(x, dtype=torch.bfloat16)``: cast to float32, round the low 16 bits
    of the binary representation to nearest-even, zero them.
    """
    f32 = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    bits = f32.view(np.uint32).astype(np.uint64)
    rounding = np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))
    bits = ((bits + rounding) >> np.uint64(16)) << np.uint64(16)
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


@_register("precision_bf16_residual", catches="s (fine-bin chi-square / G test)")
def precision_bf16_residual(K: int = 4):
    """RASS whose residual coordinate ``s'`` is computed in bfloat16 while states are float64.

    Wrong: the corrected ``s'`` lives on the bfloat16 lattice (8 significant bits: spacing
    ``2^-7`` on ``[1, 2)``, ``2^-6`` on ``[2, 4)``), so the correction branch of the output law
    is atomic: a fraction ``1 - acceptance`` of the outputs sits on a lattice that a continuous
    law hits with probability 0.  Plausible: a mixed-precision (autocast) kernel evaluates the
    scalar inverse CDF in bfloat16 while the float64 state update ``child + sigma (s' - s) e``
    looks exact.  A sup-distance test barely moves.  Caught by ``s`` through the chi-square / G
    test on fine PIT bins (bins narrower than the lattice).
    """
    return _rank_rule(residual_round=_bfloat16)


@_register("always_accept_top", catches="s, acceptance")
def always_accept_top(K: int = 4):
    """Always commit the child with the largest ``s`` (the one "closest to the target").

    Wrong: the output is the maximum of K standard normals, not ``N(delta, 1)``.  Plausible: a
    greedy "pick the best draft" heuristic presented as a verifier.  Caught by ``s`` and the
    acceptance count (always 1).
    """
    return _rank_rule(select="top", ratio="one")


@_register("rass_drafting_order", catches="s", min_K=2)
def rass_drafting_order(K: int = 4):
    """RASS that draws the rank but indexes the children in drafting order (forgot to sort).

    Wrong: the selected child is then a plain ``N(0, 1)`` draw, but the ratio and residual use
    ``g_w``.  Plausible: ``children[j]`` instead of ``children[order[j]]``.  Caught by ``s``.
    """
    return _rank_rule(select="drafting")


@_register("reflection_drops_zperp", catches="r", imitates="rmc")
def reflection_drops_zperp(K: int = 4):
    """RMC on child 0 whose reflection rebuilds the state from the reflected ``s`` only.

    Wrong: on rejection the state is ``mu_draft + sigma (delta - s) e``, losing ``z_perp``:
    ``||z_perp||^2`` has an atom at 0 of mass ``TV = 1 - 2 Phi(-delta/2)``.  Plausible: the
    reflection is written in the rank-1 coordinate and mapped back without the orthogonal part.
    For K > 1 the other children are ignored (which alone would be exact).  Caught by ``r``.
    """

    def rule(children, mu_draft, mu_target, sigma, rng):
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        nx, s, delta = batch.nx, batch.s[:, 0], batch.delta
        accepted = accept(nx, log_target_ratio(delta, s), batch.uniform(batch.n, 1)[:, 0], batch.degenerate)
        rows = nx.rows_where(~accepted)
        new_s = delta - s if rows is None else (delta - s)[rows]
        return finish(batch, nx.zeros_index(batch.n, s), accepted, new_s, rows,
                      _orthogonal_piece("zero")(batch, rows))

    return rule


@_register("claims_child_after_correction", catches="contract")
def claims_child_after_correction(K: int = 4):
    """Exact RASS law, but corrected rows are reported as accepted with the selected child's index.

    Wrong: the contract says an accepted state *is* the child; here it is the correction.  The
    output law is exact.  Plausible: ``accepted`` computed as "a child was selected" rather than
    "the selected child was kept".  Caught by the contract checker (``not_a_copy``) and by the
    acceptance count (always 1).
    """
    return _rank_rule(claim_child=True)


# ----------------------------------------------------------------------------------------------
# bugs that only heterogeneous batches, other dtypes, read-only inputs, whole-state statistics or
# row-independence tests can see (issue 9); each is exact on the old single-node float64 batch


@_register("row0_delta_for_batch", catches="s, acceptance (heterogeneous rows)")
def row0_delta_for_batch(K: int = 4):
    """RASS that reads ``delta`` from row 0 and uses it for the whole batch (weights, ratio, residual).

    Wrong: every row has its own node; rows whose delta differs from row 0's are accepted and
    corrected against the wrong target.  Plausible: ``delta = float(delta[0])`` written for a
    batch that was assumed to share one node.  Exact on a homogeneous batch.  Caught by ``s`` and
    the per-group acceptance counts.
    """
    return _rank_rule(alter_batch=_row0_delta)


@_register("residual_table_cached_by_K", catches="s (heterogeneous rows, nodes change between calls)")
def residual_table_cached_by_K(K: int = 4):
    """RASS whose residual table is built on the first call and cached under the key ``K`` only.

    Wrong: the residual law depends on ``delta``; every later row is corrected from the first
    row's residual.  Plausible: a memo dictionary keyed on the number of drafts.  Exact while
    every node is the same.  Caught by ``s``.
    """
    return _rank_rule(residual="cached")


@_register("sigma_not_divided_in_ratio", catches="s, acceptance (sigma != 1)")
def sigma_not_divided_in_ratio(K: int = 4):
    """RASS whose acceptance ratio is evaluated at ``<x - mu_draft, e>`` instead of ``<x - mu_draft, e> / sigma``.

    Wrong: the ratio is off for every ``sigma != 1``.  Plausible: the division is done in the state update and
    forgotten in the ratio.  Exact at ``sigma = 1``.  Caught by ``s`` and the acceptance counts.
    """
    return _rank_rule(ratio_scale="sigma")


@_register("float32_coarse_residual", catches="float32 pass: s fine bins")
def float32_coarse_residual(K: int = 4):
    """RASS whose float32 path draws the residual from a 256-entry table (nearest entry).

    Wrong: on float32 inputs the correction's ``s'`` takes 256 values per node (an atomic law);
    the float64 path is exact.  Plausible: a fast low-precision kernel with a lookup table.
    Caught by a float32 pass only (fine-bin chi-square of ``s``).
    """
    return _rank_rule(residual="coarse32")


@_register("correction_written_into_children", catches="contract (mutated_input)")
def correction_written_into_children(K: int = 4):
    """RASS that writes its correction into ``children`` in place and reports every row as accepted.

    Wrong: the verifier must not modify its inputs, and a corrected row is not accepted.
    Plausible: an in-place update to save memory.  With writable inputs the "accepted state is a
    child" check compares against the mutated array and passes, and the law is exact.  Caught by
    the read-only inputs (``mutated_input``).
    """
    return _rank_rule(write_back=True)


def _always_accept_first(children, mu_draft, mu_target, sigma, rng):
    batch = prepare(children, mu_draft, mu_target, sigma, rng, project=False)
    first = batch.nx.zeros_index(batch.n, batch.children)
    return batch.result(batch.nx.take_rows(batch.children, first), batch.degenerate | ~batch.degenerate, first)


@_register("always_accept_first", catches="s, acceptance_bound (no declared acceptance)", imitates=None)
def always_accept_first(K: int = 4):
    """Commit child 0 on every row and declare no expected acceptance.

    Wrong: the output is the draft, not the target, and an acceptance of 1 exceeds the
    list-coupling bound at every ``delta > 0``.  Plausible: a stub verifier left in a pipeline.
    Caught by ``s`` and by ``acceptance_bound`` even though nothing is declared.
    """
    return _always_accept_first


@_register("box_muller_angle_reuses_residual_uniform", catches="xcov_s, joint_s_dir0", backends=("numpy",))
def box_muller_angle_reuses_residual_uniform(K: int = 4):
    """RASS with fresh orthogonal noise whose Box-Muller angle is ``2 pi u`` with the residual's own ``u``.

    Wrong: on the correction branch the direction of ``z_perp`` is a function of the new ``s'``;
    every marginal (``s``, ``||z_perp||^2``, any single direction) stays exact.  Plausible: one
    uniform reused for two draws.  Caught by the cross-covariance of ``s - delta`` with
    ``z_perp`` and the joint ``(s, <v, z>)`` histogram.
    """
    return _rank_rule(orth="box_muller")


@_register("residual_truncated_at_4sd", catches="grid/large_delta:s_hi4 (far tails)", backends=("numpy",))
def residual_truncated_at_4sd(K: int = 4):
    """RASS whose residual table covers ``|s' - delta| <= 4`` only (draws outside are redrawn).

    Wrong: the target's mass beyond 4 sd (``Phi(-4) = 3.2e-5`` per side) is missing on the
    correction branch, which carries the right tail at large delta.  Plausible: a tabulated
    inverse CDF on a finite grid.  Invisible to binned tests (one bin beyond 3.5 sd).  Caught by
    the far-tail count of ``s - delta > 4`` over large-delta rows, pooled over the grid.
    """
    return _rank_rule(residual="truncated4")


@_register("zperp_from_previous_row", catches="s, indep_next (heterogeneous rows)", backends=("numpy",))
def zperp_from_previous_row(K: int = 4):
    """RASS whose correction takes ``z_perp`` from row ``i - 1`` (an off-by-one index).

    Wrong: the orthogonal part belongs to another node (not orthogonal to this row's ``e``) and
    couples neighbouring rows.  Plausible: ``zp[rows - 1]`` for ``zp[rows]``.  On a homogeneous
    batch every row's law is exact and only the rows' independence breaks.  Caught by ``s``
    (heterogeneous directions) and ``indep_next``.
    """
    return _rank_rule(orth="roll")


def _sharded_same_seed(inner):
    def rule(children, mu_draft, mu_target, sigma, rng):
        gen = np.random.default_rng(rng)
        seed = int(gen.integers(0, 2**63 - 1))
        n = np.shape(children)[0]
        parts = np.array_split(np.arange(n), 2) if n > 1 else [np.arange(n)]
        sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (n,))
        outs = [inner(children[p], mu_draft[p], mu_target[p], sig[p], np.random.default_rng(seed))
                for p in parts if p.size]
        return VerifierResult(np.concatenate([o.states for o in outs]), np.concatenate([o.accepted for o in outs]),
                              np.concatenate([o.child_index for o in outs]))

    return rule


@_register("two_shards_same_seed", catches="indep_half", backends=("numpy",))
def two_shards_same_seed(K: int = 4):
    """Exact RASS run on two shards of the batch, each with a generator seeded by the same seed.

    Wrong: row ``i`` and row ``i + ceil(n/2)`` use the same uniforms, so the batch is dependent
    although every row's law is exact.  Plausible: per-device shards seeded identically.
    Caught by the rank correlation of paired rows ``(i, i + n/2)``.
    """
    from .verifiers import rass

    return _sharded_same_seed(rass())


@_register("zperp_sign_tied_to_s", catches="xcov_s", backends=("numpy",))
def zperp_sign_tied_to_s(K: int = 4):
    """RASS whose corrected ``z_perp`` is flipped to the side of the first axis given by ``sign(s' - delta)``.

    Wrong: the sign of ``<a, z_perp>`` equals the sign of ``s - delta`` on the correction branch;
    ``s``, ``||z_perp||`` and every single direction keep their laws.  Plausible: an
    "orientation-consistent" reflection heuristic.  Caught by the cross-covariance of
    ``s - delta`` with ``z_perp``.
    """
    return _rank_rule(orth="sign_tied")


# ----------------------------------------------------------------------------------------------
# bugs that only the regime verifiers really run in can see (issue 19): every K (odd, >= 5),
# tiny and large delta, large ||mu_draft||/sigma, high dimension, calls in sequence, and power
# enough for a 2e-3 defect.  Each is exact on the old default grid (K in {2, 4}, delta <= 3,
# ||mu||/sigma <= 30, dim 8, one call per batch).


@_register("dgrs_levels_clamped_at_4", catches="s, acceptance (K >= 5)", backends=("numpy",), imitates="dgrs")
def dgrs_levels_clamped_at_4(K: int = 4):
    """D-GRS whose residual-level table stops at ``k = 4``: children 5.. are tested against ``r_4``.

    Wrong: for K >= 5 child ``k`` must meet ``r_{k-1}`` and the final draw ``r_K``; with the table
    clamped, children 5..K are tested against ``r_3``'s successor ``r_4`` again and the end draws
    from ``r_4``.  Plausible: a fixed-size table sized for the K <= 4 of a paper's experiments.
    Exact for K <= 4.  Caught by ``s`` and the acceptance count at K = 8.
    """
    return _dgrs_rule(levels="clamped4")


def _middle_coefficient_missing(ws):
    """Rank weights as a selected-law table filled by symmetry sees them: the middle rank's
    binomial coefficient is never set at odd K, so its term is lost (what is left is renormalised)."""
    K = ws.shape[-1]
    if K % 2 == 0 or K < 3:
        return ws
    out = ws.clone() if hasattr(ws, "clone") else np.array(ws, dtype=np.float64, copy=True)
    out[..., (K - 1) // 2] = 0.0
    total = out.sum(-1, keepdims=True)
    ok = total > 0.5   # rows whose whole weight sat on the middle rank keep it (the bug never shows there)
    return out / total * ok + ws * ~ok if hasattr(ws, "clone") else np.where(ok, out / np.where(ok, total, 1.0), ws)


@_register("binomial_table_middle_missing", catches="s, acceptance (odd K)")
def binomial_table_middle_missing(K: int = 4):
    """RASS whose order-statistic table ``C(K-1, j)`` is filled by symmetry and misses the middle entry at odd K.

    Wrong: the selected law ``g_w = phi sum_j w_j K C(K-1, j) Phi^j (1 - Phi)^(K-1-j)`` is
    computed without the middle rank's term, so ratio and residual use a density that is too
    small where the middle order statistic lives.  Plausible: ``table[j] = table[K-1-j] = comb(K-1, j)``
    for ``j < (K-1)/2`` leaves ``table[(K-1)/2]`` at zero.  Exact at even K.  Caught by ``s``
    and the acceptance count at K = 3.
    """
    return _rank_rule(w_correct=_middle_coefficient_missing)


def _log1p_ndtr_residual(batch, rows, u, weights):
    """Residual draws whose ``log g_w`` takes ``log(1 - Phi(s))`` as ``log1p(-ndtr(s))`` (NumPy)."""
    from scipy import special, stats as st

    from .exact.batch import sample_residual_generic, selected_cdf

    d = batch.delta_safe if rows is None else batch.delta_safe[rows]
    w = weights if weights.ndim == 2 else np.broadcast_to(weights, (batch.n, weights.shape[0]))
    w = np.ascontiguousarray(w if rows is None else w[rows], dtype=np.float64)
    Kk = w.shape[1]
    j = np.arange(Kk)
    logc = np.log(Kk) + special.gammaln(Kk) - special.gammaln(j + 1) - special.gammaln(Kk - j)

    def log_g_rows(s, idx):
        p = special.ndtr(s)[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.log(w[idx])[:, None, :] + logc + j * np.log(p) + (Kk - 1 - j) * np.log1p(-p)
            return st.norm.logpdf(s) + special.logsumexp(terms, axis=-1)

    def cdf_rows(s, idx):
        m = s.shape[1]
        return selected_cdf(np.repeat(w[idx], m, axis=0), np.repeat(d[idx], m), s.reshape(-1)).reshape(s.shape)

    uu = np.asarray(u if rows is None else u[rows], dtype=np.float64)
    out = np.asarray(rank_pieces(weights).residual(batch, rows, u), dtype=np.float64).copy()
    far = np.flatnonzero(d >= 3.0)   # below, the naive formula is exact to working precision
    if far.size:
        with np.errstate(invalid="ignore"):
            out[far] = sample_residual_generic(lambda s: log_g_rows(s, far), lambda s: cdf_rows(s, far), d[far],
                                               uu[far], grid_size=101)
    return out


@_register("log1p_ndtr_residual", catches="s (delta >= 4.5), contract (non-finite states)", backends=("numpy",))
def log1p_ndtr_residual(K: int = 4):
    """RASS whose residual evaluates ``log(1 - Phi(s))`` as ``log1p(-ndtr(s))``, which is ``-inf`` beyond ``s = 8.29``.

    Wrong: ``ndtr(s)`` rounds to 1 above 8.29, so the top rank's term ``0 * log1p(-1)`` is NaN
    and the residual's crossing search and inverse CDF break down wherever the target's mass
    reaches that far, i.e. from ``delta ~ 4.5`` on.  Plausible: the textbook formula, exact to
    machine precision everywhere a unit test usually looks (``|s| < 5``).  Caught by ``s`` on the
    large-delta rows (or by the contract, where the draw comes out NaN).
    """
    return _rank_rule(residual=_log1p_ndtr_residual)


def _expanded_square_delta(batch, children, mu_draft, mu_target, sigma):
    """``delta = sqrt(|a|^2 - 2 a.b + |b|^2) / sigma`` in the inputs' dtype (NumPy): catastrophic cancellation."""
    a = np.asarray(mu_target)
    b = np.asarray(mu_draft)
    d2 = np.einsum("nd,nd->n", a, a) - 2 * np.einsum("nd,nd->n", a, b) + np.einsum("nd,nd->n", b, b)
    sig = np.broadcast_to(np.asarray(sigma, dtype=a.dtype), d2.shape)
    bad = (np.sqrt(np.maximum(d2, 0)) / sig).astype(np.float64)
    return replace(batch, delta=bad, degenerate=bad <= 1.5e-8)


@_register("delta_by_expanded_square", catches="float32 pass: s, acceptance (large ||mu_draft||/sigma)",
           backends=("numpy",))
def delta_by_expanded_square(K: int = 4):
    """RASS whose ``delta`` is ``sqrt(|mu_t|^2 - 2 <mu_t, mu_d> + |mu_d|^2) / sigma`` computed in the inputs' dtype.

    Wrong: the expanded square cancels ``||mu_draft||^2``; in float32 at ``||mu||/sigma = 3e3``
    the error of ``delta^2`` is about ``6e-8 * 9e6 = 0.5``, so ratio and residual use the wrong
    target.  Plausible: the "vectorised" norm of a difference, and exact in float64 below
    ``||mu||/sigma ~ 1e4``.  Caught by the float32 pass (``s``, acceptance) once the draft means
    are as large as in real runs.
    """
    return _rank_rule(alter_batch=_expanded_square_delta)


def _degenerate_relative_to_mu(batch, children, mu_draft, mu_target, sigma):
    """Rows with ``delta <= sqrt(eps) ||mu_draft|| / sigma`` (``eps`` of the inputs' dtype) made degenerate (NumPy)."""
    md = np.asarray(mu_draft)
    tol = np.sqrt(np.finfo(md.dtype).eps) * np.linalg.norm(md.astype(np.float64), axis=1) / batch.sigma
    return replace(batch, degenerate=batch.degenerate | (batch.delta <= tol))


@_register("degenerate_tolerance_relative_to_mu", catches="float32 pass: s (large ||mu_draft||/sigma)",
           backends=("numpy",))
def degenerate_tolerance_relative_to_mu(K: int = 4):
    """RASS that calls a node degenerate when ``||mu_t - mu_d|| <= sqrt(eps) ||mu_d||`` (``eps`` of the inputs' dtype).

    Wrong: degeneracy is about ``delta = ||mu_t - mu_d|| / sigma``, not about the size of the
    means; at ``||mu||/sigma = 1e4`` in float32 every node with ``delta < 3.4`` accepts child 0.
    Plausible: a "relative tolerance" copied from a floating-point comparison helper.  Exact on
    small draft means.  Caught by the float32 pass once ``||mu||/sigma`` is large.
    """
    return _rank_rule(alter_batch=_degenerate_relative_to_mu)


@_register("orth_noise_tiled_128", catches="rperp (dim > 128)", backends=("numpy",))
def orth_noise_tiled_128(K: int = 4):
    """RASS with fresh orthogonal noise drawn as a 128-wide block and tiled to the dimension.

    Wrong: above d = 128 the coordinates repeat, so ``||z_perp||^2`` has about twice the
    variance of ``chi^2(d - 1)`` on the correction branch.  Plausible: a noise buffer sized for
    the CIFAR latents of an experiment, broadcast to larger states.  Exact at d <= 128.  Caught
    by ``rperp`` on the dim-256 cell.
    """
    return _rank_rule(orth="tiled128")


def _own_generator(inner, kind: str):
    """Run ``inner`` with a generator of its own instead of ``rng``: ``"reseeded"`` (a constant
    seed on every call) or ``"copied"`` (a copy of ``rng``'s state), on either back end."""
    def rule(children, mu_draft, mu_target, sigma, rng):
        if get_backend(children).name == "torch":
            import torch

            gen = torch.Generator(device=children.device)
            if kind == "reseeded":
                gen.manual_seed(20260101)
            else:
                gen.set_state(rng.get_state())
        else:
            gen = np.random.default_rng(20260101) if kind == "reseeded" else copy.deepcopy(rng)
        return inner(children, mu_draft, mu_target, sigma, gen)

    return rule


#: exact RASS (optimal weights): the unswapped kernel the contract and generator mutants wrap
_rass_rule = _rank_rule()


@_register("reseeds_its_generator", catches="contract (rng_not_advanced), indep_calls")
def reseeds_its_generator(K: int = 4):
    """Exact RASS that ignores ``rng`` and draws from a generator seeded with a constant on every call.

    Wrong: consecutive calls reuse the same uniforms, so their outputs are dependent, and the
    caller's generator never advances.  Plausible: ``np.random.default_rng(seed)`` inside the
    function "for reproducibility".  Every single call's law is exact.  Caught by the
    calls-in-sequence probe (``rng_not_advanced``, ``indep_calls``).
    """
    return _own_generator(_rass_rule, "reseeded")


@_register("draws_from_a_copy_of_rng", catches="contract (rng_not_advanced), indep_calls")
def draws_from_a_copy_of_rng(K: int = 4):
    """Exact RASS that draws from ``copy.deepcopy(rng)``, so the caller's generator never advances.

    Wrong: two consecutive calls draw the same uniforms (rank correlation of matched rows about
    0.5).  Plausible: a defensive copy "so the caller's state is not touched".  Caught by the
    calls-in-sequence probe.
    """
    return _own_generator(_rass_rule, "copied")


class _BufferedResult:
    """A verifier that returns views of one internal buffer, overwritten by the next call."""

    def __init__(self, inner):
        self.inner = inner
        self.buffer = None

    def __call__(self, children, mu_draft, mu_target, sigma, rng):
        res = self.inner(children, mu_draft, mu_target, sigma, rng)
        states = res.states
        n = states.shape[0]
        if self.buffer is None or self.buffer.shape[0] < n or self.buffer.shape[1:] != states.shape[1:] \
                or self.buffer.dtype != states.dtype or type(self.buffer) is not type(states):
            self.buffer = states.clone() if hasattr(states, "clone") else np.array(states, copy=True)
        self.buffer[:n] = states
        return type(res)(self.buffer[:n], res.accepted, res.child_index)


@_register("result_aliases_buffer", catches="contract (result_aliased)")
def result_aliases_buffer(K: int = 4):
    """Exact RASS whose ``states`` is a view of a buffer the verifier reuses on its next call.

    Wrong: a caller that keeps the result (a sampler's trajectory, a test) sees it overwritten
    by the next call.  Plausible: a preallocated output buffer for speed.  Each result is exact
    when read at once.  Caught by the calls-in-sequence probe (``result_aliased``).
    """
    return _BufferedResult(_rass_rule)


def _as_float64_states(children, mu_draft, mu_target, sigma, rng):
    res = _rass_rule(children, mu_draft, mu_target, sigma, rng)
    states = res.states
    states = states.to(dtype=__import__("torch").float64) if hasattr(states, "to") else np.asarray(states, np.float64)
    return type(res)(states, res.accepted, res.child_index)


@_register("float64_states_for_float32_inputs", catches="contract (states_dtype)")
def float64_states_for_float32_inputs(K: int = 4):
    """Exact RASS that returns float64 states whatever the inputs' dtype.

    Wrong: the contract says states keep the inputs' dtype (a float32 pipeline silently doubles
    its memory and mixes precisions).  Plausible: the float64 rebuild is returned without the
    final cast.  Caught by the contract (``states_dtype``) on the float32 pass.
    """
    return _as_float64_states


@_register("residual_reuses_rank_uniform", catches="s (power cell)")
def residual_reuses_rank_uniform(K: int = 4):
    """RASS whose residual draw reuses the uniform that drew the rank.

    Wrong: on the correction branch ``s'`` is a function of the rank's uniform, which is not
    uniform given a rejection (the rejection probability depends on the rank drawn); total
    variation about 2e-3 at K = 4.  Plausible: three uniforms were drawn and one index was
    copied twice.  Caught by ``s`` in the power cell only (a 2.5-million-row cell).
    """
    return _rank_rule(residual="reuse_rank")
