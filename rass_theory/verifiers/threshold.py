"""The threshold-rank policy's verifier on NumPy arrays and torch tensors (proof ``P8-value-aware-policies``).

Policy: select the top child if its ``s >= t``, otherwise the child of rank ``j ~ w'``.  The
verifier is :func:`rass_theory.verifiers.kernels.rank_kernel` with the threshold pieces
(:func:`rass_theory.verifiers.kernels.rank_pieces` with ``t``: the threshold *select* piece, the log
ratio of :func:`rass_theory.exact.laws.threshold_law` and that law's residual drawn by
:func:`rass_theory.exact.laws.sample`), so it
uses three uniforms per row (rank, accept, residual) on both back ends.  Per-row parameters
``(t_i, w'_i)`` come from the certified table of :mod:`rass_theory.optimize.threshold_table`
(default), from ``optimal_threshold_policy`` per distinct ``delta``, or are fixed.
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from .._validation import check_delta, check_K, check_weights
from ._base import KernelVerifier
from ._batch import NodeBatch
from ._weights import interpolate_rows
from .kernels import RankPieces, rank_kernel, rank_pieces
from .rass import fresh_orthogonal_piece

__all__ = ["ThresholdVerifier", "THRESHOLD_PARAMETERS", "threshold"]

#: How the threshold verifier without a fixed ``(t, w')`` picks its parameters.
THRESHOLD_PARAMETERS = ("interpolated", "optimal")

@functools.lru_cache(maxsize=256)
def _optimal_threshold(K: int, delta: float):
    """The optimised threshold policy at one ``(K, delta)`` (memoised)."""
    from ..optimize.policies import optimal_threshold_policy

    return optimal_threshold_policy(K, delta).policy


@functools.lru_cache(maxsize=64)
def _interpolated_threshold(K: int):
    from ..optimize.threshold_table import InterpolatedThresholdPolicy

    return InterpolatedThresholdPolicy(K)


def _rass_member_weights(K: int, delta: np.ndarray) -> np.ndarray:
    """Rank weights ``(n, K)`` of the threshold family's RASS member (``t = +inf``) at ``delta (n,)``:
    the interpolated optimal RASS weights (``optimize.rank_weights.optimal_weights_interpolator``)."""
    from ..optimize.rank_weights import optimal_weights_interpolator

    return optimal_weights_interpolator(K)(delta)


def _has_table(K: int) -> bool:
    from ..optimize.threshold_table import tabulated_K

    return K in tabulated_K()


class ThresholdVerifier(KernelVerifier):
    """Verifier of the threshold-rank policy on both back ends (see :func:`threshold`)."""

    name = "threshold"

    def __init__(self, t=None, weights=None, K=None, *, delta=None, parameters: str = "interpolated",
                 orthogonal: str = "selected"):
        if (t is None) != (weights is None):
            raise ValueError("give both t and weights, or neither: threshold needs t and weights together "
                             "(or none of them for the optimal policy)")
        if parameters not in THRESHOLD_PARAMETERS:
            raise ValueError(f"parameters must be one of {THRESHOLD_PARAMETERS}, got {parameters!r}")
        if orthogonal not in ("selected", "fresh"):
            raise ValueError(f"orthogonal must be 'selected' or 'fresh', got {orthogonal!r}")
        self.K = None if K is None else check_K(K)
        self._w = None
        if weights is not None:
            w = weights.detach().cpu().numpy() if hasattr(weights, "detach") else weights
            self._w = check_weights(w, self.K, name="weights")
            self.K = self._w.size
            if not hasattr(t, "shape") or getattr(t, "ndim", 0) == 0:
                if isinstance(t, bool) or not isinstance(t, numbers.Real) or math.isnan(float(t)):
                    raise ValueError(f"t must be a real number, +inf or an array (n,), got {t!r}")
                t = float(t)
        self.t = t
        self.delta = None if delta is None else check_delta(delta)
        self.parameters = parameters
        self.orthogonal = orthogonal
        self._device = {}

    def __repr__(self) -> str:
        if self._w is not None:
            return f"ThresholdVerifier(t={self.t!r}, weights={self._w.tolist()}, orthogonal={self.orthogonal!r})"
        pin = "" if self.delta is None else f", delta={self.delta}"
        return f"ThresholdVerifier(parameters={self.parameters!r}, orthogonal={self.orthogonal!r}{pin})"

    def _uses_table(self, K: int) -> bool:
        return self._w is None and self.delta is None and self.parameters == "interpolated" and _has_table(K)

    def _uses_rass_member(self, K: int) -> bool:
        """``"interpolated"`` where ``K`` has no certified table: the family's RASS member."""
        return self._w is None and self.delta is None and self.parameters == "interpolated" and not _has_table(K)

    def parameters_at(self, K: int, delta: float | None = None):
        """``(t, w')`` used for ``K`` children at ``delta`` (host values; ``t`` as given when per row)."""
        K = check_K(K)
        if self._w is not None:
            return self.t, self._w
        pol = self.policy_for(K, delta)
        if self._uses_table(K):
            t, w = pol.parameters(check_delta(delta))
            return float(t[0]), w[0]
        return pol.t, np.asarray(pol.weights, dtype=np.float64)

    def policy_for(self, K: int, delta: float | None = None):
        """The selection policy used for ``K`` children at ``delta``.

        The table's :class:`~rass_theory.optimize.threshold_table.InterpolatedThresholdPolicy`
        (one object per ``K``), the optimum's ``ThresholdRankPolicy`` at ``delta`` (or at the
        pinned ``delta``), or the fixed ``ThresholdRankPolicy(K, t, w')``.
        """
        from ..optimize.policies import ThresholdRankPolicy

        K = check_K(K)
        if self._w is not None:
            if not isinstance(self.t, float):
                raise ValueError("per-row thresholds t (n,) have no single policy")
            return ThresholdRankPolicy(K, self.t, self._w)
        if self._uses_table(K):
            return _interpolated_threshold(K)
        if self._uses_rass_member(K):
            if delta is None:
                raise ValueError("this threshold verifier's parameters depend on delta: give delta")
            return ThresholdRankPolicy(K, math.inf, _rass_member_weights(K, np.array([check_delta(delta)]))[0])
        if self.delta is not None:
            delta = self.delta
        if delta is None:
            raise ValueError("this threshold verifier's parameters depend on delta: give delta")
        return _optimal_threshold(K, float(check_delta(delta)))

    def expected_acceptance(self, K: int, delta: float) -> float | None:
        K, delta = check_K(K), check_delta(delta)
        if self._w is not None and not isinstance(self.t, float):
            return None                                          # per-row thresholds
        return float(self.policy_for(K, delta).acceptance(delta))

    def _host_rows(self, K: int, delta: np.ndarray):
        """``(t (n,), w' (n, K))`` on the host for the rows' deltas (``delta`` float64)."""
        n = delta.shape[0]
        if self.delta is not None or self._w is not None:
            t, w = self.parameters_at(K)
            return np.full(n, float(t)), np.broadcast_to(np.asarray(w, dtype=np.float64), (n, K))
        if self._uses_table(K):
            from ..optimize.threshold_table import threshold_table

            return threshold_table(K).parameters(delta)
        if self._uses_rass_member(K):
            return np.full(n, math.inf), _rass_member_weights(K, delta)
        if n == 0:                                                   # an empty batch: no policy to solve
            return np.empty(0), np.empty((0, K))
        values, inverse = np.unique(delta, return_inverse=True)
        pols = [_optimal_threshold(K, float(v)) for v in values]
        inverse = inverse.reshape(-1)
        return (np.array([p.t for p in pols], dtype=np.float64)[inverse],
                np.stack([np.asarray(p.weights, dtype=np.float64) for p in pols])[inverse])

    def row_parameters(self, batch: NodeBatch):
        """``(t (n,), w' (n, K))`` of the batch's rows, float64 arrays of its back end."""
        nx, n, K = batch.nx, batch.n, batch.K
        if self._w is not None and hasattr(self.t, "shape"):          # per-row thresholds given
            t = self.t
            if nx.name == "torch":
                if getattr(t, "device", None) != batch.device or tuple(t.shape) not in ((), (n,)):
                    raise ValueError(f"t must be a tensor of shape (n,) = {(n,)} on {batch.device}")
                t = t.to(nx.float64).expand(n)
            else:
                t = np.asarray(t, dtype=np.float64)
                if t.shape not in ((), (n,)) or np.isnan(t).any():
                    raise ValueError(f"t must be a real number or an array of shape (n,) = {(n,)} without NaN")
                t = np.broadcast_to(t, (n,))
            key = ("w", K, nx.name, str(batch.device))
            if key not in self._device:
                self._device[key] = nx.constant(self._w, batch.s)
            return t, self._device[key].expand(n, K) if nx.name == "torch" else np.broadcast_to(self._w, (n, K))
        if nx.name == "torch" and self._uses_table(K):
            return self._table_rows(batch)
        if nx.name == "torch" and (self.delta is not None or self._w is not None):
            key = ("fixed", K, nx.name, str(batch.device))
            if key not in self._device:                              # host -> device once
                t, w = self.parameters_at(K)
                self._device[key] = (float(t), nx.constant(np.asarray(w, dtype=np.float64), batch.s))
            t, w = self._device[key]
            return nx.constant(np.full(1, t), batch.s).expand(n), w.expand(n, K)
        delta = batch.delta_safe
        if nx.name == "torch":                                       # optimal per delta: host solve
            t, w = self._host_rows(K, delta.detach().cpu().numpy())
            return nx.constant(t, batch.s), nx.constant(np.array(w), batch.s)
        return self._host_rows(K, delta)

    def _table_rows(self, batch: NodeBatch):
        """Per-row ``(t (n,), w' (n, K))`` interpolated on the device from the certified table."""
        import torch

        from ..optimize.threshold_table import threshold_table

        key = ("table", batch.K, str(batch.device))
        if key not in self._device:                                  # host -> device once
            tab = threshold_table(batch.K)
            self._device[key] = tuple(batch.nx.constant(np.array(a), batch.s)
                                      for a in (tab.grid, tab.p[:, None], tab.weights))
        grid, p_table, w_table = self._device[key]
        delta = batch.delta_safe
        p = interpolate_rows(grid, p_table, delta)[:, 0]
        w = interpolate_rows(grid, w_table, delta)
        t = torch.where(p >= 1.0, torch.full_like(p, math.inf), torch.special.ndtri(torch.clamp(p, max=1.0)))
        return t, w

    def pieces(self, batch: NodeBatch) -> RankPieces:
        """The kernel pieces for a prepared batch (its rows' parameters resolved)."""
        t, w = self.row_parameters(batch)
        pieces = rank_pieces(w, t)
        if self.orthogonal == "fresh":
            pieces = pieces.replace(orthogonal=fresh_orthogonal_piece)
        return pieces


    def run(self, batch: NodeBatch, u):
        """Decide a prepared batch with the uniforms ``u (n, 3)`` (rank, accept, residual)."""
        return rank_kernel(batch, u, self.pieces(batch))


def threshold(t=None, weights=None, K: int | None = None, *, delta=None, parameters: str = "interpolated",
              orthogonal: str = "selected") -> ThresholdVerifier:
    """Verifier of the threshold policy "top child if its ``s >= t``, else a rank from ``weights``".

    NumPy arrays or torch tensors (the back end follows the inputs).

    Parameters
    ----------
    t : float or array (n,), optional
        Threshold on the top child's ``s`` (per row when an array of the inputs' kind).  With
        ``t`` and ``weights`` both omitted each row uses the (near-)optimal threshold policy of
        its ``delta`` (see ``parameters``).
    weights : array (K,), optional
        Fallback rank weights (required with ``t``).
    K : int, optional
        Number of children (checked against ``weights`` and the inputs).
    delta : float, optional
        Without ``t``: use ``optimal_threshold_policy(K, delta)`` for every row (keyword only).
    parameters : {"interpolated", "optimal"}
        Without ``t`` and ``delta``: ``"interpolated"`` (default) reads each row's ``(t, w')``
        from the certified table (:mod:`rass_theory.optimize.threshold_table`, within
        ``max_gap`` of the optimum; on torch interpolated on the device, no host
        synchronisation); where ``K`` has no table (``K = 1`` or ``K > 8``) it uses the family's
        RASS member, ``t = +inf`` with the interpolated optimal RASS weights of each row's
        ``delta`` (exact like every member; at most the threshold's small gain over RASS is
        lost).  ``"optimal"`` solves ``optimal_threshold_policy(K, delta)`` once per distinct
        ``delta`` (cached; from about a second at ``K <= 8`` to 10 s or more at ``K = 12``, so
        only for batches with few distinct deltas; torch reads the deltas on the host).
    orthogonal : {"selected", "fresh"}

    Notes
    -----
    Selected law ``g(s) = K phi(s) Phi(s)^(K-1)`` for ``s >= t`` and
    ``g(s) = sum_j w'_j K C(K-1, j) phi(s) Phi(s)^j (Phi(t) - Phi(s))^(K-1-j)`` for ``s < t``
    (proof ``P8-value-aware-policies``, P8.1); accept w.p. ``min(1, f/g)``, else draw ``s'`` from
    ``(f - g)_+ / TV``.  Exact by ``P2-rass-exactness`` and, with per-row parameters, by P8.5
    (each row is coupled with its own law).  Random numbers: three uniforms per row (rank,
    accept, residual).  ``expected_acceptance(K, delta)`` is the exact acceptance of the policy
    used at ``delta``.
    """
    return ThresholdVerifier(t, weights, K, delta=delta, parameters=parameters, orthogonal=orthogonal)
