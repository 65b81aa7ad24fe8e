"""Known-wrong torch verifiers: ports of :mod:`rass_theory.mutants` that the torch harness must reject.

Each factory ``name(K)`` returns a callable with the torch verifier contract whose
``expected_acceptance`` is that of the *exact* rule it imitates (what its author would claim),
so the harness's acceptance test compares against that claim.  The ported bugs:

======================================  =====================================================
``ratio_against_draft``                 RASS accepting w.p. ``min(1, f/phi)`` instead of ``f/g_w``
``single_draft_residual``               RASS correcting from ``(f - phi)_+`` (the K = 1 residual)
``residual_from_target``                RASS correcting with a fresh ``s' ~ N(delta, 1)``
``weights_reversed_in_correction``      ratio and residual computed with ``w[::-1]``
``orth_zeroed_on_correction``           corrected state rebuilt from ``s'`` alone (``z_perp = 0``)
``precision_bf16_residual``             residual coordinate rounded to bfloat16
``rass_drafting_order``                 rank drawn but children indexed in drafting order
``always_accept_top``                   commit the child with the largest ``s``
``dgrs_flat_residual``                  D-GRS testing every child with ``min(1, f/phi)``
``dgrs_sorted_order``                   D-GRS examining children sorted by ``s``
``row0_delta_for_batch``                RASS using row 0's delta for the whole batch
``always_accept_first``                 commit child 0 on every row, no acceptance declared
``correction_written_into_children``    correction written into ``children`` in place, row reported accepted
======================================  =====================================================
"""
from __future__ import annotations

import dataclasses

import torch

from .._validation import check_K
from . import _math
from ._core import TorchVerifierResult, finish, prepare
from .verifiers import RASSVerifier, _residual_where_rejected, _select_rank, _TorchVerifier

__all__ = ["MUTANTS", "all_mutants", "TorchMutant"]

#: name -> factory(K) returning the torch mutant.
MUTANTS: dict = {}
_MIN_K: dict = {}


def _register(name: str, min_K: int = 1):
    def decorator(factory):
        MUTANTS[name] = factory
        _MIN_K[name] = min_K
        return factory
    return decorator


def all_mutants(K: int = 4) -> dict:
    """Instantiate every torch mutant that applies to nodes with ``K`` children (name -> verifier)."""
    K = check_K(K)
    return {name: f(K) for name, f in MUTANTS.items() if K >= _MIN_K[name]}


class TorchMutant(_TorchVerifier):
    """A wrong torch verifier: a named rule plus the exact acceptance of the rule it imitates."""

    def __init__(self, name: str, rule, imitates: str = "rass"):
        self.name = name
        self._rule = rule
        self.imitates = imitates
        self._reference = RASSVerifier("optimal")

    def __repr__(self):
        return f"rass_theory.torch.mutants.TorchMutant({self.name!r})"

    def expected_acceptance(self, K, delta):
        from ..exact.acceptance import acceptance
        if self.imitates == "rass":
            return self._reference.expected_acceptance(K, delta)
        return float(acceptance(self.imitates, K, delta))

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        return self._rule(children, mu_draft, mu_target, sigma, rng)


def _single_draft_residual(delta, u):
    """Inverse-CDF draw from ``(f - phi)_+ / TV`` (D-GRS level 1), float64."""
    log_b, c, _ = _math.dgrs_levels(1, delta)
    return _math.dgrs_sample_final_residual(delta, u, log_b, c)


def _rank_rule(*, ratio="g", residual="g", reverse_correction=False, orth="keep", precision=None,
               select="sorted", delta_used="row"):
    """A RASS-like rule with switchable (possibly wrong) pieces; weights as ``rass("optimal")``."""
    reference = RASSVerifier("optimal")

    def rule(children, mu_draft, mu_target, sigma, rng):
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        if delta_used == "row0":
            batch = dataclasses.replace(batch, delta=batch.delta[:1].expand_as(batch.delta).clone(),
                                        delta_safe=batch.delta_safe[:1].expand_as(batch.delta_safe).clone(),
                                        degenerate=batch.degenerate[:1].expand_as(batch.degenerate).clone())
        n, K = batch.n, batch.K
        u = batch.uniform(n, 3)
        w = reference._device_weights(batch).contiguous()
        child, _ = _select_rank(batch, w, u[:, 0])
        if select == "drafting":               # the drawn rank used as a drafting-order index
            rank = torch.argsort(torch.argsort(batch.s, dim=1, stable=True), dim=1).gather(1, child[:, None])[:, 0]
            child = rank
        w_corr = w.flip(-1) if reverse_correction else w
        law = _math.rank_law(w_corr.contiguous())
        s_sel = batch.s.gather(1, child[:, None])
        d = batch.delta_safe
        log_f = _math.log_phi(s_sel - d[:, None])
        log_g = _math.log_phi(s_sel) if ratio == "phi" else law.logpdf(s_sel)
        accepted = (torch.log(u[:, 1]) < (log_f - log_g)[:, 0]) | batch.degenerate
        if residual == "g":
            new_s = _residual_where_rejected(batch, law, accepted, child, u[:, 2], {})
        elif residual == "phi":
            new_s = _single_draft_residual(d, u[:, 2].to(torch.float64)).to(batch.dtype)
        else:  # "target"
            new_s = d + torch.special.ndtri(u[:, 2] * (1 - 2 ** -40) + 2 ** -41)
        if precision == "bfloat16":
            new_s = new_s.to(torch.bfloat16).to(batch.dtype)
        result = finish(batch, child, accepted, new_s)
        if orth == "zero":
            rebuilt = batch.mu_draft + batch.sigma[:, None] * new_s.to(batch.dtype)[:, None] * batch.direction
            states = torch.where(accepted[:, None], result.states, rebuilt)
            result = type(result)(states, result.accepted, result.child_index)
        return result

    return rule


def _dgrs_rule(*, order="drafting", levels="recursive"):
    """A D-GRS-like rule: ``order`` of examination, ``levels`` of the residuals."""

    def rule(children, mu_draft, mu_target, sigma, rng):
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        n, K = batch.n, batch.K
        u = batch.uniform(n, K + 1).to(torch.float64)
        d = batch.delta_safe
        log_b, c, _ = _math.dgrs_levels(K, d)
        order_idx = (torch.argsort(batch.s, dim=1, stable=True) if order == "sorted"
                     else torch.arange(K, device=batch.device).expand(n, K))
        accepted = batch.degenerate.clone()
        chosen = torch.zeros(n, dtype=torch.int64, device=batch.device)
        for k in range(K):
            ck = order_idx[:, k]
            s_k = batch.s.gather(1, ck[:, None])[:, 0]
            if levels == "flat":
                p = _math.dgrs_accept_prob(1, d, s_k, log_b, c)
            else:
                p = _math.dgrs_accept_prob(k + 1, d, s_k, log_b, c)
            take = (~accepted) & (u[:, k] < p)
            chosen = torch.where(take, ck, chosen)
            accepted = accepted | take
        if levels == "flat":
            new_s = _single_draft_residual(d, u[:, K])
        else:
            new_s = _math.dgrs_sample_final_residual(d, u[:, K], log_b, c)
        return finish(batch, chosen, accepted, new_s)

    return rule


def _always_accept_top(children, mu_draft, mu_target, sigma, rng):
    batch = prepare(children, mu_draft, mu_target, sigma, rng)
    top = torch.argmax(batch.s, dim=1)
    accepted = torch.ones(batch.n, dtype=torch.bool, device=batch.device)
    return finish(batch, top, accepted, batch.s.gather(1, top[:, None])[:, 0])


@_register("ratio_against_draft")
def ratio_against_draft(K: int = 4):
    """RASS whose acceptance ratio uses the draft density ``phi`` instead of ``g_w``."""
    return TorchMutant("ratio_against_draft", _rank_rule(ratio="phi"))


@_register("single_draft_residual")
def single_draft_residual(K: int = 4):
    """RASS with the correct ratio but the single-draft residual ``(f - phi)_+ / TV``."""
    return TorchMutant("single_draft_residual", _rank_rule(residual="phi"))


@_register("residual_from_target")
def residual_from_target(K: int = 4):
    """RASS correcting with a fresh ``s' ~ N(delta, 1)`` instead of the residual."""
    return TorchMutant("residual_from_target", _rank_rule(residual="target"))


@_register("weights_reversed_in_correction", min_K=2)
def weights_reversed_in_correction(K: int = 4):
    """RASS selecting with ``w`` but computing ratio and residual with ``w[::-1]``."""
    return TorchMutant("weights_reversed_in_correction", _rank_rule(reverse_correction=True))


@_register("orth_zeroed_on_correction")
def orth_zeroed_on_correction(K: int = 4):
    """RASS rebuilding the corrected state as ``mu_draft + sigma s' e`` (orthogonal part lost)."""
    return TorchMutant("orth_zeroed_on_correction", _rank_rule(orth="zero"))


@_register("precision_bf16_residual")
def precision_bf16_residual(K: int = 4):
    """RASS whose residual coordinate ``s'`` is rounded to bfloat16 (8 significant bits)."""
    return TorchMutant("precision_bf16_residual", _rank_rule(precision="bfloat16"))


@_register("rass_drafting_order", min_K=2)
def rass_drafting_order(K: int = 4):
    """RASS that draws the rank but indexes the children in drafting order (forgot to sort)."""
    return TorchMutant("rass_drafting_order", _rank_rule(select="drafting"))


@_register("always_accept_top", min_K=2)
def always_accept_top(K: int = 4):
    """Always commit the child with the largest ``s``."""
    return TorchMutant("always_accept_top", _always_accept_top)


@_register("dgrs_flat_residual", min_K=2)
def dgrs_flat_residual(K: int = 4):
    """D-GRS testing every child with ``min(1, f/phi)`` and drawing the end from ``(f - phi)_+``."""
    return TorchMutant("dgrs_flat_residual", _dgrs_rule(levels="flat"), imitates="dgrs")


@_register("dgrs_sorted_order", min_K=2)
def dgrs_sorted_order(K: int = 4):
    """D-GRS examining the children sorted by ``s`` instead of in drafting order."""
    return TorchMutant("dgrs_sorted_order", _dgrs_rule(order="sorted"), imitates="dgrs")



@_register("row0_delta_for_batch")
def row0_delta_for_batch(K: int = 4):
    """RASS reading ``delta`` from row 0 for the whole batch (exact only on homogeneous batches)."""
    return TorchMutant("row0_delta_for_batch", _rank_rule(delta_used="row0"))


def _always_accept_first(children, mu_draft, mu_target, sigma, rng):
    n = children.shape[0]
    return TorchVerifierResult(children[:, 0].clone(), torch.ones(n, dtype=torch.bool, device=children.device),
                               torch.zeros(n, dtype=torch.int64, device=children.device))


@_register("always_accept_first")
def always_accept_first(K: int = 4):
    """Commit child 0 on every row and declare no acceptance (caught by ``acceptance_bound`` and ``s``)."""
    mutant = TorchMutant("always_accept_first", _always_accept_first)
    mutant.expected_acceptance = None
    return mutant


def _written_into_children(children, mu_draft, mu_target, sigma, rng):
    res = RASSVerifier("optimal")(children, mu_draft, mu_target, sigma, rng)
    rows = torch.nonzero(~res.accepted).flatten()
    chosen = res.child_index.clone()
    if rows.numel():
        # the selected child is not reported on corrected rows; write into child 0
        chosen[rows] = 0
        children[rows, 0] = res.states[rows].to(children.dtype)
    return TorchVerifierResult(res.states, torch.ones_like(res.accepted), chosen)


@_register("correction_written_into_children")
def correction_written_into_children(K: int = 4):
    """RASS writing each correction into ``children`` in place and reporting the row accepted."""
    return TorchMutant("correction_written_into_children", _written_into_children)
