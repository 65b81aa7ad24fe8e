"""The verifier of any user selection policy on NumPy arrays (proof ``proofs/P8-value-aware-policies.md``).

The threshold-rank policy has its own verifier on both back ends (:mod:`.threshold`).
"""
from __future__ import annotations


import numpy as np

from .._validation import check_delta, check_K
from ._base import BuiltinVerifier
from ._core import finish, prepare
from ..exact import laws as _laws
from ..backend import get_backend
from .rass import fresh_orthogonal

__all__ = ["PolicyVerifier", "policy"]

#: batches with at most this many distinct deltas draw each delta's residual from its own law
_MAX_SHARED_LAWS = 32


def _per_row(fn, delta):
    """Wrap a per-row law ``fn(delta (n,), s (n,))`` to accept ``s (n, m)`` -> ``(n, m)``."""

    def wrapped(s):
        s = np.asarray(s, dtype=np.float64)
        if s.ndim == 1:
            return np.asarray(fn(delta, s), dtype=np.float64)
        m = s.shape[1]
        out = fn(np.repeat(delta, m), s.reshape(-1))
        return np.asarray(out, dtype=np.float64).reshape(s.shape)

    return wrapped


class PolicyVerifier(BuiltinVerifier):
    """Exact verifier for any selection policy whose selected law is known.

    Parameters
    ----------
    policy : SelectionPolicy or callable ``(K, delta) -> SelectionPolicy``
        An object with ``.K``, ``.select(delta (n,), s (n, K), rng) -> child index (n,)``,
        ``.selected_logpdf(delta (n,), s (n,))`` and ``.selected_cdf(delta (n,), s (n,))``.  A
        factory is called once per distinct ``delta`` of a batch (cached by the caller's
        factory, e.g. the optimal threshold policy).
    orthogonal : {"selected", "fresh"}

    Notes
    -----
    The policy selects one child; with ``g`` its selected law, accept w.p.
    ``min(1, f(s)/g(s))`` (log space), else draw ``s'`` from ``(f - g)_+ / TV(f, g)`` by
    inverse CDF (``exact.batch.sample_residual_generic``) and keep the selected child's
    ``z_perp``.  Exact for every policy with a correct ``g`` (proof ``P2-rass-exactness``, which only
    uses the selected law); acceptance ``1 - TV(g, f)``.

    Random numbers: ``rng.random((n, 2))`` (accept, residual), then whatever the policy's
    ``select`` draws from the same generator (fresh orthogonal parts last).

    NumPy only: a :class:`~rass_theory.optimize.policies.SelectionPolicy` is user code on NumPy
    arrays with a NumPy generator (``select``, ``selected_logpdf``, ``selected_cdf``), so running
    it on tensors would copy every batch to the host and synchronise an accelerator.  Torch
    tensors raise a ``TypeError`` naming the rule to use there:
    :func:`rass_theory.verifiers.threshold` (the threshold-rank policy through the shared kernel).
    """

    name = "policy"

    def __init__(self, policy, orthogonal: str = "selected", name: str | None = None):
        if orthogonal not in ("selected", "fresh"):
            raise ValueError(f"orthogonal must be 'selected' or 'fresh', got {orthogonal!r}")
        is_policy = all(hasattr(policy, a) for a in ("select", "selected_logpdf", "selected_cdf"))
        if not is_policy and not callable(policy):
            raise TypeError("policy must have .select, .selected_logpdf and .selected_cdf, "
                            f"or be a factory (K, delta) -> policy; got {type(policy).__name__}")
        self.policy = policy
        self._factory = None if is_policy else policy
        if is_policy and getattr(policy, "K", None) is not None:
            self.K = int(policy.K)
        self.orthogonal = orthogonal
        self._tables = {}
        if name:
            self.name = name

    def __repr__(self) -> str:
        return f"PolicyVerifier({self.policy!r}, orthogonal={self.orthogonal!r})"

    def _shared(self, pol, delta: float):
        """Cached residual table of ``pol`` at ``delta`` (the policy is kept alive with it)."""
        key = (id(pol), delta)
        entry = self._tables.get(key)
        if entry is None:
            if len(self._tables) > 256:
                self._tables.clear()
            entry = (pol, _laws.PolicyLaw(pol, delta))
            self._tables[key] = entry
        return entry[1]

    def policy_for(self, K: int, delta: float):
        """The policy used for ``K`` children at ``delta``."""
        return self.policy if self._factory is None else self._factory(K, float(delta))

    def _groups(self, K: int, live: np.ndarray, delta_all: np.ndarray) -> list:
        """``[(rows, policy), ...]`` covering the live rows: one group for a fixed policy, one per
        distinct ``delta`` for a factory."""
        if self._factory is None:
            return [(live, self.policy)]
        values, inverse = np.unique(delta_all[live], return_inverse=True)
        return [(live[inverse.reshape(-1) == j], self._factory(K, float(v))) for j, v in enumerate(values)]

    def expected_acceptance(self, K: int, delta: float) -> float:
        from scipy import integrate

        from ..exact.batch import target_logpdf

        K, delta = check_K(K), check_delta(delta)
        pol = self.policy_for(K, delta)
        if callable(getattr(pol, "acceptance", None)):
            # closed form through the crossings of f and the selected law (optimize.policies)
            return float(pol.acceptance(delta))
        d = np.array([delta])

        def overlap(s):
            return float(np.exp(min(target_logpdf(d, np.array([s]))[0],
                                    pol.selected_logpdf(d, np.array([s]))[0])))

        value, _ = integrate.quad(overlap, -np.inf, np.inf, limit=200, epsabs=1e-12)
        return float(value)

    def _residual(self, pol, delta, u):
        """Draws from ``(f - g)_+ / TV(f, g)`` of ``pol`` at the rows' ``delta`` (inverse CDF): one
        shared law per distinct delta (at most :data:`_MAX_SHARED_LAWS`), else the policy's own
        per-row ``sample_residual`` or the generic per-row sampler."""
        from ..exact import batch as exact_batch

        values, inverse = np.unique(delta, return_inverse=True)
        if values.size <= _MAX_SHARED_LAWS:
            inverse = inverse.reshape(-1)
            out = np.empty(delta.size)
            for j, v in enumerate(values):
                sel = inverse == j
                out[sel] = _laws.sample(self._shared(pol, float(v)), np.full(int(sel.sum()), float(v)), u[sel])
            return out
        if callable(getattr(pol, "sample_residual", None)):
            return pol.sample_residual(delta, u)
        return exact_batch.sample_residual_generic(_per_row(pol.selected_logpdf, delta),
                                                   _per_row(pol.selected_cdf, delta), delta, u)

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        from ..exact.batch import target_logpdf

        if get_backend(children).name != "numpy":
            raise TypeError("policy verifiers run on NumPy arrays (a SelectionPolicy works on NumPy arrays); "
                            "on torch tensors use rass_theory.verifiers.threshold")
        batch = prepare(children, mu_draft, mu_target, sigma, rng, K=self.K)
        n, K = batch.n, batch.K
        u = batch.uniform(n, 2)
        accepted = batch.degenerate.copy()
        chosen = np.zeros(n, dtype=np.int64)
        new_s = np.zeros(n)
        delta_all = batch.delta.astype(np.float64)
        for rows, pol in self._groups(K, np.flatnonzero(~accepted), delta_all):
            if rows.size == 0:
                continue
            delta = delta_all[rows]
            s = batch.s[rows]
            child = np.asarray(pol.select(delta, s, batch.rng), dtype=np.int64)
            if child.shape != (rows.size,) or np.any((child < 0) | (child >= K)):
                raise ValueError(f"policy.select must return child indices in [0, {K - 1}] of shape "
                                 f"({rows.size},), got shape {child.shape}")
            s_sel = s[np.arange(rows.size), child]
            take = np.log(u[rows, 0]) < target_logpdf(delta, s_sel) - pol.selected_logpdf(delta, s_sel)
            chosen[rows] = child
            accepted[rows] = take
            rej = rows[~take]
            if rej.size:
                new_s[rej] = self._residual(pol, delta[~take], u[rej, 1])
        rejected = np.flatnonzero(~accepted)
        fresh = None
        if self.orthogonal == "fresh" and rejected.size:
            fresh = fresh_orthogonal(batch)[rejected]
        return finish(batch, chosen, accepted, new_s[rejected], rejected, fresh)


def policy(p, orthogonal: str = "selected") -> PolicyVerifier:
    """Return the exact verifier of a value-aware selection policy.

    Parameters
    ----------
    p : SelectionPolicy or callable ``(K, delta) -> SelectionPolicy``
        See :class:`rass_theory.optimize.policies.SelectionPolicy`.
    orthogonal : {"selected", "fresh"}

    Notes
    -----
    Accept the policy's pick w.p. ``min(1, f/g)`` where ``g`` is the policy's selected law,
    otherwise draw from ``(f - g)_+ / TV`` (proof ``proofs/P8-value-aware-policies.md``).  NumPy
    arrays only (torch tensors: ``TypeError``; use :func:`rass_theory.verifiers.threshold`).
    See :class:`PolicyVerifier`.
    """
    return PolicyVerifier(p, orthogonal)


