"""Resolution of the ``weights`` argument of the RASS verifier into per-row rank weights."""
from __future__ import annotations

import functools

import numpy as np

from .._validation import check_weights

__all__ = ["WEIGHT_NAMES", "resolve_weights", "resolve_row_weights", "batch_weights", "describe_weights",
           "optimal_single", "interpolator_table", "interpolate_rows", "device_interpolated"]

#: The named weight rules of the RASS verifiers (both back ends).
WEIGHT_NAMES = ("optimal", "interpolated", "uniform")


@functools.lru_cache(maxsize=512)
def optimal_single(K: int, delta: float) -> np.ndarray:
    """``optimal_rank_weights(K, delta).weights``, checked, cached and read-only."""
    from ..optimize.rank_weights import optimal_rank_weights

    w = np.asarray(optimal_rank_weights(K, delta).weights, dtype=np.float64)
    w = check_weights(w, K, name="optimal_rank_weights(K, delta).weights")
    w.setflags(write=False)
    return w


def resolve_weights(spec, K: int, delta: np.ndarray) -> np.ndarray:
    """Rank weights for rows with standardised displacements ``delta`` (n,).

    Parameters
    ----------
    spec : "optimal", "interpolated", "uniform", array (K,), or callable ``(K, delta) -> weights``
        ``"optimal"`` uses ``optimal_rank_weights(K, delta).weights`` (cached) when every row
        has the same ``delta`` (to 12 significant digits) and ``optimal_weights_interpolator(K)`` otherwise;
        ``"interpolated"`` uses the interpolator for every batch.  A callable is
        first called with the scalar ``delta`` when all rows share it; otherwise with the array
        ``delta (n,)`` and must return ``(n, K)`` -- if it returns anything else it is called
        once per distinct ``delta`` value.
    K : int
    delta : ndarray (n,)

    Returns
    -------
    ndarray, shape (K,) or (n, K)
    """
    delta = np.asarray(delta, dtype=np.float64)
    n = delta.shape[0]
    # rows whose deltas agree to 12 significant digits (e.g. the same node computed from different
    # means, equal up to round-off) count as one delta, rounded so the choice is not row-order dependent
    single = n > 0 and bool(np.ptp(delta) <= 1e-12 * max(1.0, abs(float(delta[0]))))
    if single:
        delta = np.full(n, float(f"{float(np.median(delta)):.12g}"))
    if isinstance(spec, str):
        if spec in ("optimal", "interpolated"):
            if n == 0:
                return np.full(K, 1.0 / K)
            if single and spec == "optimal":
                return optimal_single(K, float(delta[0]))
            from ..optimize.rank_weights import optimal_weights_interpolator

            # on the simplex by construction (normalised convex combinations of simplex vectors)
            w = optimal_weights_interpolator(K)(delta)
            return w[0] if single else w
        if spec == "uniform":
            return np.full(K, 1.0 / K)
        raise ValueError(f"weights must be 'optimal', 'uniform', 'interpolated', an array of shape (K,) or a "
                         f"callable, got {spec!r}")
    if callable(spec):
        if n == 0:
            return np.full(K, 1.0 / K)
        if single:
            return check_weights(spec(K, float(delta[0])), K, name="weights(K, delta)", n=n)
        try:
            out = np.asarray(spec(K, delta), dtype=np.float64)
        except Exception:  # noqa: BLE001 - a scalar-only callable: fall back to one call per delta
            out = None
        if out is not None and out.shape == (n, K):
            return check_weights(out, K, name="weights(K, delta)", n=n)
        values, inverse = np.unique(delta, return_inverse=True)
        table = np.stack([check_weights(spec(K, float(v)), K, name="weights(K, delta)", n=n) for v in values])
        return table[inverse.reshape(-1)]
    return check_weights(spec, K, name="weights")


def resolve_row_weights(spec, K: int, delta: np.ndarray, degenerate: np.ndarray) -> np.ndarray:
    """:func:`resolve_weights` for the live rows of a batch; degenerate rows get uniform weights.

    Degenerate rows (which accept child 0 whatever the weights) do not take part in the
    "one delta per batch" decision.  Returns ``(K,)`` when the live rows share one vector.
    """
    delta = np.asarray(delta, dtype=np.float64)
    degenerate = np.asarray(degenerate, dtype=bool)
    if not degenerate.any():
        return resolve_weights(spec, K, delta)
    live = ~degenerate
    w = resolve_weights(spec, K, delta[live])
    if w.ndim == 1:
        return w
    out = np.full((delta.shape[0], K), 1.0 / K)
    out[live] = w
    return out


def batch_weights(spec, batch) -> object:
    """:func:`resolve_row_weights` for a node batch of either back end, as an array of its kind.

    Torch batches copy their deltas to the host once (a synchronisation on an accelerator).
    """
    nx = batch.nx
    if nx.name == "numpy":
        return resolve_row_weights(spec, batch.K, batch.delta, batch.degenerate)
    w = resolve_row_weights(spec, batch.K, batch.delta.detach().cpu().numpy(),
                            batch.degenerate.detach().cpu().numpy())
    return nx.constant(np.array(w), batch.s)


def describe_weights(spec) -> str:
    """Short text for ``repr``."""
    if isinstance(spec, str):
        return repr(spec)
    if callable(spec):
        return getattr(spec, "__name__", "callable")
    return np.array2string(np.asarray(spec), precision=4, separator=", ")


@functools.lru_cache(maxsize=64)
def interpolator_table(K: int):
    """``(grid (G,), weights (G, K))`` of ``optimal_weights_interpolator(K)`` as float64 host arrays."""
    from ..optimize.rank_weights import optimal_weights_interpolator

    interp = optimal_weights_interpolator(K)
    return np.array(interp.grid, dtype=np.float64), np.array(interp.weights, dtype=np.float64)


def interpolate_rows(grid, table, delta):
    """Piecewise-linear rows ``(n, m)`` from a table ``(G, m)`` on ``grid (G,)``, on the tensors' device.

    Below the first / beyond the last grid point the end rows are held; a convex combination of
    two simplex vectors is on the simplex.  Elementwise torch ops only (no host synchronisation).
    """
    import torch

    G = grid.shape[0]
    idx = torch.clamp(torch.searchsorted(grid, delta.contiguous(), right=True), 1, G - 1)
    lo, hi = grid[idx - 1], grid[idx]
    lam = torch.clamp((delta - lo) / (hi - lo), 0.0, 1.0)[:, None]
    return (1.0 - lam) * table[idx - 1] + lam * table[idx]


def device_interpolated(K: int, batch, cache: dict):
    """``"interpolated"`` weights ``(n, K)`` of a torch batch, interpolated on its device.

    ``cache`` holds the table per device (copied host -> device once, outside the hot path).
    """
    key = ("interpolated", K, str(batch.device))
    if key not in cache:
        cache[key] = tuple(batch.nx.constant(a, batch.s) for a in interpolator_table(K))
    grid, table = cache[key]
    return interpolate_rows(grid, table, batch.delta_safe)
