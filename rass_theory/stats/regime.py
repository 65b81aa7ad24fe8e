"""Where the harness's rows live: the default synthetic regime, or one recorded from a run.

A *regime* says how each row's node is drawn: its ``delta`` (grouped: every group has one
value, so its exact acceptance can be tested), its kernel scale ``sigma`` and its draft-mean
norm ``rho = ||mu_draft|| / sigma``.  The default regime (:func:`default_regime`) covers where
verifiers run in practice (``docs/ARCHITECTURE.md``, section on the harness's regime):

* ``delta``: half the rows at the cell's named delta, the rest spread over tiny values
  (``1e-3 .. 1e-2``), the middle (``0.25 .. 3``) and large values up to 12
  (:func:`~rass_theory.stats.node.spread_deltas`);
* ``sigma`` log-uniform on ``[0.1, 10]``;
* ``rho`` zero for one row in ten, else log-uniform on ``[0.01, 1e4]`` (on the papers' Gaussian
  mixture every verified node has ``rho > 30``, median 315 to 1116, 99th percentile 8730).

:func:`regime_from_trace` turns a recorded :class:`rass_theory.diffusion.traces.DeltaTrace`, a
run, or a mapping ``{"delta": ..., "sigma": ..., "mu_ratio": ...}`` into a regime whose rows
resample the recorded nodes jointly; each recorded ``delta`` is replaced by the nearest (in
``log delta``) of at most ``max_groups`` representative values (the trace's quantiles), so every
group still has one exact acceptance.  Fields a trace does not record (``sigma``, ``mu_ratio``)
keep the default law and the report says so.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Regime", "regime_from_trace", "SIGMA_RANGE", "RHO_RANGE", "ZERO_RHO_SHARE", "MAX_GROUPS"]

#: Default per-row kernel scales: log-uniform on this range.
SIGMA_RANGE = (0.1, 10.0)
#: Default ``||mu_draft|| / sigma``: log-uniform on this range for all but :data:`ZERO_RHO_SHARE` of the rows.
RHO_RANGE = (0.01, 1.0e4)
ZERO_RHO_SHARE = 0.1
#: Most delta groups a recorded regime is reduced to.
MAX_GROUPS = 16


@dataclass(frozen=True, eq=False)
class Regime:
    """A recorded regime: per recorded node its delta group, and optionally ``sigma`` and ``rho``.

    Attributes
    ----------
    deltas : tuple of float
        Representative deltas (group ``g`` has ``deltas[g]``); ``deltas[0]`` is the median group.
    group : ndarray of int (m,)
        Group of each recorded node.
    sigma, rho : ndarray (m,) or None
        Recorded kernel scale and ``||mu_draft|| / sigma`` of each node (``None``: not recorded;
        the default law is used).
    Ks : tuple of int
        Children counts the trace records (empty: not recorded).
    source : str
        What the regime was built from.
    """

    deltas: tuple
    group: np.ndarray
    sigma: np.ndarray | None
    rho: np.ndarray | None
    Ks: tuple = ()
    source: str = "trace"

    @property
    def group_probs(self) -> np.ndarray:
        return np.bincount(self.group, minlength=len(self.deltas)) / self.group.size

    def describe(self) -> str:
        """One line for reports: what was drawn from the trace and what kept the default law."""
        q = np.quantile(np.asarray(self.deltas)[self.group], [0.0, 0.5, 0.99, 1.0])
        parts = [f"regime from {self.source}: {self.group.size} recorded nodes, delta in {len(self.deltas)} groups "
                 f"(min {q[0]:.3g}, median {q[1]:.3g}, 99% {q[2]:.3g}, max {q[3]:.3g})"]
        for name, arr, default in (("sigma", self.sigma, "log-uniform on [0.1, 10]"),
                                   ("||mu_draft||/sigma", self.rho, "default law")):
            if arr is None:
                parts.append(f"{name} not recorded ({default})")
            else:
                a = np.quantile(arr, [0.5, 0.99])
                parts.append(f"{name} from the trace (median {a[0]:.3g}, 99% {a[1]:.3g})")
        return "; ".join(parts)

    def fingerprint(self) -> str:
        """A digest of the regime's arrays (stored in checkpoints)."""
        h = hashlib.sha256()
        h.update(np.asarray(self.deltas, dtype=np.float64).tobytes())
        for arr in (self.group, self.sigma, self.rho):
            h.update(b"-" if arr is None else np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()[:16]

    def draw(self, rng: np.random.Generator, n: int):
        """``(group (n,), sigma (n,) or None, rho (n,) or None)``: ``n`` recorded nodes, with replacement."""
        idx = rng.integers(0, self.group.size, n)
        return (self.group[idx], None if self.sigma is None else self.sigma[idx],
                None if self.rho is None else self.rho[idx])


def _field(trace, names):
    for nm in names:
        if isinstance(trace, dict):
            if nm in trace and trace[nm] is not None:
                return trace[nm]
        else:
            value = getattr(trace, nm, None)
            if value is not None:
                return value
    return None


def _positive_array(value, name, *, allow_zero):
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"regime: {name} must be an array of real numbers") from exc
    if arr.size == 0:
        raise ValueError(f"regime: {name} must hold at least one recorded node")
    bad = ~np.isfinite(arr) | ((arr < 0) if allow_zero else (arr <= 0))
    if bad.any():
        rule = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"regime: every {name} must be finite and {rule}; {int(bad.sum())} value(s) are not "
                         f"(e.g. {arr[bad][:3].tolist()})")
    return arr


def regime_from_trace(trace, max_groups: int = MAX_GROUPS) -> Regime:
    """Build a :class:`Regime` from a recorded trace.

    Parameters
    ----------
    trace : DeltaTrace, run, Regime or mapping
        Anything with a ``delta`` array (``DeltaTrace``; a run through its ``nodes``, whose ``K``
        is also read), optionally ``sigma`` and ``mu_ratio`` (alias ``rho``) arrays of the same
        length.  Deltas must be ``>= 0``; ``sigma > 0``; ``mu_ratio >= 0``.
    max_groups : int
        Number of representative deltas (the trace's ``(i + 1/2) / G`` quantiles).

    Returns
    -------
    Regime

    Raises
    ------
    TypeError
        ``trace`` has no ``delta``.
    ValueError
        Arrays empty, of different lengths, or out of range.
    """
    if isinstance(trace, Regime):
        return trace
    source = type(trace).__name__
    nodes = getattr(trace, "nodes", None)
    if _field(trace, ("delta",)) is None and nodes is not None:
        trace, source = nodes, f"{source}.nodes"
    raw = _field(trace, ("delta",))
    if raw is None:
        raise TypeError(f"regime must be a DeltaTrace, a run with a node trace, or a mapping with a 'delta' array; "
                        f"got {type(trace).__name__}")
    delta = _positive_array(raw, "delta", allow_zero=True)
    sigma, rho = _field(trace, ("sigma",)), _field(trace, ("mu_ratio", "rho"))
    sigma = None if sigma is None else _positive_array(sigma, "sigma", allow_zero=False)
    rho = None if rho is None else _positive_array(rho, "mu_ratio", allow_zero=True)
    for name, arr in (("sigma", sigma), ("mu_ratio", rho)):
        if arr is not None and arr.size != delta.size:
            raise ValueError(f"regime: {name} has {arr.size} values but delta has {delta.size}")
    Ks = _field(trace, ("K",))
    Ks = () if Ks is None or np.ndim(Ks) == 0 else tuple(sorted({int(k) for k in np.asarray(Ks).reshape(-1)}))
    G = int(max_groups)
    if G < 1:
        raise ValueError(f"max_groups must be >= 1, got {max_groups}")
    reps = np.unique(np.quantile(delta, (np.arange(G) + 0.5) / G, method="inverted_cdf"))
    median = float(np.quantile(delta, 0.5, method="inverted_cdf"))
    order = np.argsort(np.abs(np.log1p(reps) - math.log1p(median)), kind="stable")
    reps = reps[order]                                  # the group nearest the median first
    lr = np.log(np.maximum(reps, 1e-12))
    group = np.argmin(np.abs(np.log(np.maximum(delta, 1e-12))[:, None] - lr[None, :]), axis=1)
    return Regime(tuple(float(x) for x in reps), group.astype(np.int64), sigma, rho, Ks, source)
