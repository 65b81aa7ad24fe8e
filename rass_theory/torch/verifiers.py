"""Torch twins of the batched verifiers: RMC, D-GRS, RASS, the threshold policy, resample.

Same contract as :mod:`rass_theory.verifiers` (``docs/ARCHITECTURE.md``) on tensors::

    verifier(children (n, K, d), mu_draft (n, d), mu_target (n, d), sigma float | (n,), rng)
        -> TorchVerifierResult(states (n, d), accepted (n,) bool, child_index (n,) int64)

``rng`` is a ``torch.Generator`` on the inputs' device (``None``: a fresh one seeded from the OS;
an int: a new generator seeded with it).  dtype and device follow the inputs (float64 is the
reference, float32 is supported); arguments that disagree raise ``ValueError`` naming the
argument.  The rules are the kernels of :mod:`rass_theory.verifiers.kernels`, the same code as
the NumPy verifiers, run through the torch namespace of :mod:`rass_theory.backend`: rows are
processed with ``torch.where`` / ``gather`` / ``bmm`` and fixed-iteration root finding; no
``.item()``, no boolean-mask indexing and no ``.cpu()`` in the hot path, so an accelerator call
queues its kernels without waiting for the device.  Two documented exceptions: on the CPU device
only the rejected rows are corrected (``torch.nonzero``, free there), and ``rass("optimal")``
reads the per-row deltas once to resolve its weights exactly as NumPy does (``rass("interpolated")``
and ``rass(delta=...)`` never synchronise).

Accuracy in float32 (float64 is exact to rounding):

* acceptance decisions compare ``log u`` with a log-space ratio (``log_ndtr``); each row's
  acceptance probability carries the float32 rounding of its log ratio, a relative error of a
  few ``2**-24`` (bias of the acceptance rate ``<~1e-6``; the tests check the float32 rate
  against the exact value within 4.5 standard errors).
* uniforms have 24-bit resolution: probabilities are quantised to ``2**-24``.
* the RASS/threshold residual draw is exact up to rounding of ``Phi`` differences (absolute
  ``6e-8``, relative to the residual mass ``TV``; measured against the float64 NumPy sampler:
  ``|s' - s'_ref| < 2e-3`` at ``K = 4, delta = 1``, about ``1e-3`` at ``delta = 0.05``; see
  :func:`rass_theory.exact.torch_laws.sample_residual`).  D-GRS levels and its residual draw are
  always computed in float64 (``O(nK)`` scalars).
* the correction ``children + sigma (s' - s) e`` is rounded in float32 like the children.
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np
import torch

from .._validation import check_delta, check_K, check_weights
from ..exact import torch_laws
from ..verifiers._weights import WEIGHT_NAMES, batch_weights, optimal_single as _optimal_single, resolve_row_weights
from ..verifiers.kernels import RankPieces, dgrs_kernel, rank_kernel, rank_pieces, rmc_kernel, select_rank
from ..verifiers._tensors import TorchVerifierResult, prepare

__all__ = [
    "rmc", "dgrs", "rass", "threshold", "resample", "optimal_list",
    "RMCVerifier", "DGRSVerifier", "RASSVerifier", "ThresholdVerifier", "ResampleVerifier",
    "TorchVerifierResult",
]


class _TorchVerifier:
    """Base of the torch verifiers: a name, the number of children required, exact acceptance."""

    name = "verifier"
    K: int | None = None
    backend = "torch"

    def expected_acceptance(self, K: int, delta: float) -> float | None:
        """Exact acceptance of the rule for ``K`` children at ``delta`` (``None`` if unknown)."""
        return None

    def __repr__(self) -> str:
        return f"rass_theory.torch.verifiers.{type(self).__name__}()"


# --------------------------------------------------------------------------------------------
# RMC
# --------------------------------------------------------------------------------------------

class RMCVerifier(_TorchVerifier):
    """Reflection maximal coupling on tensors (K = 1).

    Notes
    -----
    Accept w.p. ``min(1, exp(delta s - delta^2/2))`` (log space), else reflect
    ``s -> delta - s`` keeping ``z_perp``; acceptance ``2 Phi(-delta/2)`` (proof ``P6-reductions``).
    Random numbers: one uniform per row.
    """

    name = "rmc"
    K = 1

    def expected_acceptance(self, K, delta):
        K, delta = check_K(K), check_delta(delta)
        if K != 1:
            raise ValueError(f"K must be 1 for RMC, got {K}")
        return float(math.erfc(delta / 2.0 / math.sqrt(2.0)))

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        batch = prepare(children, mu_draft, mu_target, sigma, rng, K=1)
        return rmc_kernel(batch, batch.uniform(batch.n))


def rmc() -> RMCVerifier:
    """Torch reflection-maximal-coupling verifier (K = 1). See :class:`RMCVerifier`."""
    return RMCVerifier()


# --------------------------------------------------------------------------------------------
# D-GRS
# --------------------------------------------------------------------------------------------

class DGRSVerifier(_TorchVerifier):
    """D-GRS on tensors: greedy rejection over the children in drafting order.

    Notes
    -----
    Child ``k`` (1-based) is accepted w.p. ``min(1, r_{k-1}(s_k)/phi(s_k))`` with the closed-form
    residuals ``r_k/phi = b_k expm1(delta (s - c_k))`` (:func:`rass_theory.exact.torch_laws.dgrs_levels`,
    float64; the kernel :func:`rass_theory.verifiers.kernels.dgrs_kernel` is NumPy's); after ``K``
    rejections ``s'`` is drawn from ``r_K`` by inverse CDF and child 0's ``z_perp`` is kept.  Acceptance ``1 - prod_k Z_k`` (proof ``P3-dgrs-closed-form``).
    Random numbers: ``K + 1`` uniforms per row (one tensor ``(n, K + 1)``).
    """

    name = "dgrs"

    def expected_acceptance(self, K, delta):
        from ..optimize.dispatch import acceptance
        return float(acceptance("dgrs", check_K(K), check_delta(delta)))

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        return dgrs_kernel(batch, batch.uniform(batch.n, batch.K + 1))


def dgrs() -> DGRSVerifier:
    """Torch D-GRS verifier (drafting order, closed-form residuals). See :class:`DGRSVerifier`."""
    return DGRSVerifier()


# --------------------------------------------------------------------------------------------
# RASS
# --------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _interpolator_table(K: int):
    from ..optimize.rank_weights import optimal_weights_interpolator
    interp = optimal_weights_interpolator(K)
    return np.array(interp.grid, dtype=np.float64), np.array(interp.weights, dtype=np.float64)


def interpolate_weights(grid: torch.Tensor, table: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """Piecewise-linear weights ``(n, K)`` from a table ``(G, K)`` on ``grid (G,)``, on device.

    Below the first / beyond the last grid point the end weights are held.  A convex
    combination of two simplex vectors is on the simplex.
    """
    G = grid.shape[0]
    idx = torch.clamp(torch.searchsorted(grid, delta.contiguous(), right=True), 1, G - 1)
    lo, hi = grid[idx - 1], grid[idx]
    lam = torch.clamp((delta - lo) / (hi - lo), 0.0, 1.0)[:, None]
    return (1.0 - lam) * table[idx - 1] + lam * table[idx]


class RASSVerifier(_TorchVerifier):
    """RASS on tensors.

    Parameters
    ----------
    weights : "optimal", "interpolated", "uniform", array/tensor (K,) or (n, K), or callable
        The same rules as NumPy's :func:`rass_theory.verifiers.rass`, so one call gives one law
        on both back ends.  ``"optimal"`` solves ``optimal_rank_weights(K, delta)`` when the
        live rows share one ``delta`` and interpolates ``optimal_weights_interpolator(K)``
        otherwise, exactly as NumPy does (the same host code; reading the deltas costs one
        device-to-host copy of ``n`` floats, a synchronisation on an accelerator).
        ``"interpolated"`` interpolates the certified optima *on the device* for every batch
        (no synchronisation; NumPy's ``"interpolated"`` gives the same weights to rounding).
        A callable is called as ``weights(K, delta)`` with the per-row ``delta`` tensor on the
        device and must return a tensor ``(K,)`` or ``(n, K)`` there.  Exactness holds for any
        weights.  ``expected_acceptance`` always refers to the weights this verifier uses.
    delta : float, optional
        Pin the ``"optimal"`` weights to ``optimal_rank_weights(K, delta)`` (one configuration;
        no synchronisation).
    grid_size, max_crossings : int
        Options of the residual sampler :func:`rass_theory.exact.torch_laws.sample_residual`.

    Notes
    -----
    The kernel :func:`rass_theory.verifiers.kernels.rank_kernel` with the pieces of
    :func:`rass_theory.verifiers.kernels.rank_pieces` (shared with NumPy): sort by ``s``; draw a
    rank ``j ~ w``; accept the selected child w.p. ``min(1, f/g_w)`` with
    ``g_w(s) = phi(s) sum_j w_j K C(K-1, j) Phi(s)^j (1 - Phi(s))^(K-1-j)`` in log space;
    otherwise draw ``s'`` from ``(f - g_w)_+ / TV`` and keep the selected child's ``z_perp``.
    Acceptance ``1 - TV(g_w, f)`` (proof ``P2-rass-exactness``).

    Random numbers: three uniforms per row (one ``(n, 3)`` tensor: rank, accept, residual).
    On an accelerator the residual is computed for every row (no synchronisation); on the CPU
    only for the rejected rows (``torch.nonzero``, free there).
    """

    name = "rass"

    def __init__(self, weights="optimal", delta=None, grid_size=None, max_crossings=None):
        self._fixed = None
        if isinstance(weights, str):
            if weights not in WEIGHT_NAMES:
                raise ValueError(f"weights must be 'optimal', 'uniform', 'interpolated', an array of shape (K,) or "
                                 f"(n, K), or a callable, got {weights!r}")
        elif callable(weights):
            pass
        else:
            w = weights.detach().cpu().numpy() if isinstance(weights, torch.Tensor) else np.asarray(weights)
            if w.ndim == 1:
                self._fixed = check_weights(w, name="weights")
                self.K = self._fixed.size
            elif w.ndim == 2:
                self.K = w.shape[1]
            else:
                raise ValueError(f"weights must have shape (K,) or (n, K), got {w.shape}")
        self.weights = weights
        self.delta = None if delta is None else check_delta(delta)
        self.residual_options = {"grid_size": grid_size}
        if max_crossings is not None:
            self.residual_options["max_crossings"] = int(max_crossings)
        self._tables = {}

    def __repr__(self):
        w = self.weights if isinstance(self.weights, str) else ("callable" if callable(self.weights) else "array")
        return f"rass_theory.torch.verifiers.RASSVerifier(weights={w!r}, delta={self.delta})"

    # -- weights -----------------------------------------------------------------------------
    def host_weights(self, K: int, delta: float) -> np.ndarray:
        """The weights (K,) this verifier uses for ``K`` children at a scalar ``delta``."""
        K, delta = check_K(K), check_delta(delta)
        if self._fixed is not None:
            return self._fixed
        if isinstance(self.weights, str):
            if self.delta is not None and self.weights == "optimal":
                return _optimal_single(K, float(self.delta))
            return resolve_row_weights(self.weights, K, np.array([delta]), np.array([False]))
        if callable(self.weights):
            out = self.weights(K, torch.tensor([delta], dtype=torch.float64))
            out = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
            return check_weights(out.reshape(-1)[-K:] if out.ndim == 2 else out, K)
        raise ValueError("per-row weights (n, K) have no single acceptance")

    def _cached(self, key, make):
        if key not in self._tables:                     # host -> device once, outside the hot path
            self._tables[key] = make()
        return self._tables[key]

    def device_weights(self, batch) -> torch.Tensor:
        """Rank weights ``(K,)`` or ``(n, K)`` of the batch's rows, float64 on its device."""
        K, n, device = batch.K, batch.n, batch.device
        f64 = torch.float64
        if self.K is not None and K != self.K:
            raise ValueError(f"children must have K = {self.K} children per node to match weights, got K = {K}")
        if self._fixed is not None:
            return self._cached(("fixed", str(device)), lambda: torch.as_tensor(self._fixed, dtype=f64, device=device))
        if isinstance(self.weights, str):
            if self.weights == "optimal" and self.delta is not None:
                return self._cached(("single", K, str(device)), lambda: torch.tensor(
                    np.array(_optimal_single(K, float(self.delta))), dtype=f64, device=device))
            if self.weights == "uniform":
                return self._cached(("uniform", K, str(device)), lambda: torch.full((K,), 1.0 / K, dtype=f64,
                                                                                   device=device))
            if self.weights == "interpolated":
                grid, table = self._cached(("table", K, str(device)), lambda: tuple(
                    torch.as_tensor(a, dtype=f64, device=device) for a in _interpolator_table(K)))
                return interpolate_weights(grid, table, batch.delta_safe)
            return batch_weights(self.weights, batch)     # "optimal": NumPy's resolution, on the host
        if callable(self.weights):
            w = self.weights(K, batch.delta)
            if not isinstance(w, torch.Tensor) or w.device != batch.delta.device:
                raise TypeError("a weights callable must return a torch.Tensor on the inputs' device")
        else:
            w = torch.as_tensor(self.weights, device=device)
        w = w.to(f64)
        if tuple(w.shape) not in ((K,), (n, K)):
            raise ValueError(f"weights must have shape (K,) or (n, K) = {(n, K)}, got {tuple(w.shape)}")
        return w

    def expected_acceptance(self, K, delta):
        from ..optimize.dispatch import acceptance
        K, delta = check_K(K), check_delta(delta)
        if self._fixed is None and not isinstance(self.weights, str) and not callable(self.weights):
            return None
        return float(acceptance("rass", K, delta, weights=self.host_weights(K, delta)))

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        batch = prepare(children, mu_draft, mu_target, sigma, rng, K=self.K)
        u = batch.uniform(batch.n, 3)
        return rank_kernel(batch, u, rank_pieces(self.device_weights(batch), **self.residual_options))


def rass(weights="optimal", delta=None, grid_size=None, max_crossings=None) -> RASSVerifier:
    """Torch RASS verifier. See :class:`RASSVerifier` (parameters, accuracy, random numbers)."""
    return RASSVerifier(weights, delta, grid_size, max_crossings)


# --------------------------------------------------------------------------------------------
# Threshold policy
# --------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _optimal_threshold(K: int, delta: float):
    from ..optimize.policies import optimal_threshold_policy
    res = optimal_threshold_policy(K, delta)
    return float(res.t), np.asarray(res.weights, dtype=np.float64)


class ThresholdVerifier(_TorchVerifier):
    """Value-aware threshold policy on tensors: top child if its ``s >= t``, else rank ``~ w``.

    Parameters
    ----------
    t : float or Tensor (n,), optional
    weights : array (K,), optional
        Fallback rank weights (required with ``t``).
    K : int, optional
        Required with ``t`` when ``weights`` does not fix it.
    delta : float, optional
        With ``t`` and ``weights`` omitted: use ``optimal_threshold_policy(K, delta)`` (solved
        on the host once per ``K``, cached).  With ``t``, ``weights`` and ``delta`` all omitted
        (the default): each row's ``(t, w')`` is interpolated in its ``delta`` from the certified
        table of :mod:`rass_theory.optimize.threshold_table` *on the device* (no host
        synchronisation), the same parameters as NumPy's default ``verifiers.threshold()``;
        ``K`` must be tabulated (``ValueError`` naming ``K`` otherwise).

    Notes
    -----
    Selected law (:class:`rass_theory.exact.torch_laws.SelectedLaw`, proof ``P8``):
    ``g(s) = K phi Phi^(K-1)`` for ``s >= t`` and
    ``sum_j w_j K C(K-1, j) phi Phi^j (Phi(t) - Phi)^(K-1-j)`` below; accept w.p.
    ``min(1, f/g)``, else draw from ``(f - g)_+ / TV``, keeping the selected child's ``z_perp``.
    Random numbers: three uniforms per row (rank, accept, residual).
    """

    name = "threshold"

    def __init__(self, t=None, weights=None, K=None, delta=None, grid_size=None, max_crossings=None):
        if (t is None) != (weights is None):
            raise ValueError("give both t and weights, or neither (optimal threshold policy at delta)")
        if weights is not None:
            w = check_weights(weights, K, name="weights")
            self.K = w.size
            self._w = w
        else:
            self.K = None if K is None else check_K(K)
            self._w = None
        if t is not None and not isinstance(t, torch.Tensor):
            if isinstance(t, bool) or not isinstance(t, numbers.Real) or math.isnan(float(t)):
                raise ValueError(f"t must be a real number, +inf or a tensor (n,), got {t!r}")
            t = float(t)
        self.t = t
        self.delta = None if delta is None else check_delta(delta)
        self._device_w = {}
        self.residual_options = {"grid_size": grid_size}
        if max_crossings is not None:
            self.residual_options["max_crossings"] = int(max_crossings)

    @property
    def interpolated(self) -> bool:
        """True when each row's parameters come from the certified table (no ``t``, no ``delta``)."""
        return self._w is None and self.delta is None

    def policy_for(self, K: int, delta: float | None = None):
        """``(t, weights)`` used for ``K`` children (host values; the table's at ``delta`` when interpolated)."""
        if self._w is not None:
            return self.t, self._w
        if self.interpolated:
            from ..optimize.threshold_table import threshold_table
            if delta is None:
                raise ValueError("the interpolated threshold policy needs delta to name its parameters")
            t, w = threshold_table(check_K(K)).parameters(delta)
            return float(t[0]), w[0]
        return _optimal_threshold(check_K(K), float(self.delta))

    def expected_acceptance(self, K, delta):
        from ..optimize.policies import threshold_acceptance
        K, delta = check_K(K), check_delta(delta)
        t, w = self.policy_for(K, delta)
        if isinstance(t, torch.Tensor):
            return None
        return float(threshold_acceptance(K, delta, t, w))

    def _table_rows(self, batch):
        """Per-row ``(t (n,), w (n, K))`` interpolated on the device from the certified table."""
        from ..optimize.threshold_table import threshold_table
        K, device = batch.K, batch.device
        key = ("table", K, str(device))
        if key not in self._device_w:                      # host -> device once, outside the hot path
            tab = threshold_table(K)
            f64 = torch.float64
            self._device_w[key] = tuple(torch.as_tensor(np.array(a), dtype=f64, device=device)
                                        for a in (tab.grid, tab.p[:, None], tab.weights))
        grid, p_table, w_table = self._device_w[key]
        delta = batch.delta_safe.to(torch.float64)
        p = interpolate_weights(grid, p_table, delta)[:, 0]
        w = interpolate_weights(grid, w_table, delta)
        t = torch.where(p >= 1.0, torch.full_like(p, math.inf), torch.special.ndtri(torch.clamp(p, max=1.0)))
        return t, w

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        batch = prepare(children, mu_draft, mu_target, sigma, rng, K=self.K)
        n, K, device = batch.n, batch.K, batch.device
        if self.interpolated:
            t_rows, w = self._table_rows(batch)
        else:
            t, w_host = self.policy_for(K)
            key = (K, str(device))
            if key not in self._device_w:                      # host -> device once, outside the hot path
                self._device_w[key] = torch.as_tensor(np.array(w_host), dtype=torch.float64, device=device)
            w = self._device_w[key].expand(n, K).contiguous()
            if isinstance(t, torch.Tensor):
                if t.device != device or tuple(t.shape) not in ((), (n,)):
                    raise ValueError(f"t must be a tensor of shape (n,) = {(n,)} on {device}")
                t_rows = t.to(torch.float64).expand(n)
            else:
                t_rows = torch.full((n,), t, dtype=torch.float64, device=device)
        law = torch_laws.threshold_law(w, t_rows)
        options = self.residual_options

        def select(batch, u):                              # top child if its s >= t, else rank ~ w
            rank_child, order = select_rank(batch.nx, batch.s, w, u)
            top = order[:, -1]
            return torch.where(batch.s.gather(1, top[:, None])[:, 0] >= t_rows, top, rank_child)

        def ratio(batch, s_sel):
            return law.logpdf(s_sel[:, None])[:, 0] - torch_laws.log_phi(s_sel)

        def residual(batch, rows, u):
            if rows is None:
                return torch_laws.law_residual(law, batch.delta_safe, u, **options)
            return torch_laws.law_residual(law.subset(rows), batch.delta_safe[rows], u[rows], **options)

        return rank_kernel(batch, batch.uniform(n, 3), RankPieces(select, ratio, residual))


def threshold(t=None, weights=None, K=None, delta=None, grid_size=None, max_crossings=None) -> ThresholdVerifier:
    """Torch verifier of the threshold-rank policy. See :class:`ThresholdVerifier`."""
    return ThresholdVerifier(t, weights, K, delta, grid_size, max_crossings)


# --------------------------------------------------------------------------------------------
# Resample
# --------------------------------------------------------------------------------------------

class ResampleVerifier(_TorchVerifier):
    """Ignore the drafts: ``mu_target + sigma N(0, I_d)`` per row, never accepts.

    Random numbers: ``torch.randn((n, d))`` in the children's dtype.
    """

    name = "resample"

    def expected_acceptance(self, K, delta):
        check_K(K)
        check_delta(delta)
        return 0.0

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        batch = prepare(children, mu_draft, mu_target, sigma, rng)
        z = torch.randn(batch.n, batch.d, generator=batch.rng, dtype=batch.out_dtype, device=batch.device)
        states = mu_target + batch.sigma[:, None].to(batch.out_dtype) * z
        accepted = torch.zeros(batch.n, dtype=torch.bool, device=batch.device)
        index = torch.full((batch.n,), -1, dtype=torch.int64, device=batch.device)
        return TorchVerifierResult(states, accepted, index)


def resample() -> ResampleVerifier:
    """Torch verifier that samples the target kernel directly. See :class:`ResampleVerifier`."""
    return ResampleVerifier()


def optimal_list():
    """Torch verifier whose acceptance is the list-coupling bound (:mod:`rass_theory.torch.optimal_list`)."""
    from .optimal_list import optimal_list as make

    return make()
