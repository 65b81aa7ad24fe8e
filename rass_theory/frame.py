"""The rank-1 frame of one speculative node (proof ``proofs/P1-rank1-reduction.md``).

Children ``X_1..X_K`` are iid ``N(mu_draft, sigma^2 I_d)`` and the target kernel is
``N(mu_target, sigma^2 I_d)``.  With

    e = (mu_target - mu_draft) / ||mu_target - mu_draft||,   delta = ||mu_target - mu_draft|| / sigma,
    z = (x - mu_draft) / sigma,   s = <e, z>,   z_perp = z - s e,

the draft gives ``s ~ N(0, 1)``, the target ``s ~ N(delta, 1)``, and ``z_perp`` has the same
law ``N(0, I - e e^T)`` under both, independent of ``s``.  A state is rebuilt as
``x = mu_draft + sigma (s e + z_perp)``.

The frame is computed in float64 whatever the inputs' dtype (float32 means are exact in
float64), so a node is *degenerate* when ``delta <= degenerate_tolerance() = sqrt(eps_float64)
~ 1.49e-8`` in every dtype: the two kernels then differ by ``TV = 2 Phi(delta/2) - 1 <= 5.9e-9``
and verifiers accept child 0 (proof ``proofs/P1-rank1-reduction.md``).  Before, float32 inputs
used ``sqrt(eps_float32) = 3.45e-4``, an error of up to ``1.38e-4`` in TV per node.  The direction of a
degenerate node is still a unit vector (the normalised difference when it is nonzero, the first
basis vector when it is exactly zero) so nothing ever divides by zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Rank1Frame", "check_finite", "degenerate_tolerance", "validate_node_inputs"]

_DEGENERATE_TOL = float(np.sqrt(np.finfo(np.float64).eps))


def degenerate_tolerance(dtype=np.float64) -> float:
    """Return ``sqrt(eps)`` of the frame's dtype (float64): at or below this ``delta`` a node is degenerate.

    ``dtype`` is accepted for compatibility and must be a real floating dtype; the frame and
    every accept/reject decision are computed in float64 for every input dtype, so the
    tolerance is ``sqrt(eps_float64)`` for all of them.
    """
    if np.dtype(dtype).kind != "f":
        raise TypeError(f"dtype must be a real floating dtype, got {dtype!r}")
    return _DEGENERATE_TOL


def validate_node_inputs(children, mu_draft, mu_target, sigma, *, finite_children: bool = True,
                         finite_means: bool = True):
    """Check the verifier contract's inputs and return them as float arrays.

    Returns ``children (n, K, d)``, ``mu_draft (n, d)``, ``mu_target (n, d)``, ``sigma (n,)``.
    Raises ``ValueError``/``TypeError`` naming the offending argument.  The finiteness test is
    one reduction per array (no boolean temporary the size of ``children``), so the verifiers'
    hot path can afford it.  ``finite_children=False`` leaves the finiteness of ``children`` to
    the caller (:func:`check_finite` of their projection: every entry enters it);
    ``finite_means=False`` that of the means (:meth:`Rank1Frame.from_means` checks them).
    """
    children = _check_real_array(children, "children", 3, finite=finite_children)
    mu_draft = _check_real_array(mu_draft, "mu_draft", 2, finite=finite_means)
    mu_target = _check_real_array(mu_target, "mu_target", 2, finite=finite_means)
    n, K, d = children.shape
    if K < 1:
        raise ValueError("children must hold at least one child per node (K >= 1)")
    if mu_draft.shape != (n, d):
        raise ValueError(f"mu_draft must have shape (n, d) = {(n, d)} to match children, got {mu_draft.shape}")
    if mu_target.shape != (n, d):
        raise ValueError(f"mu_target must have shape (n, d) = {(n, d)} to match children, got {mu_target.shape}")
    return children, mu_draft, mu_target, _as_sigma(sigma, n, np.float64)


def _check_real_array(value, name: str, ndim: int, finite: bool = True) -> np.ndarray:
    """Real array of ``ndim`` dimensions with finite entries (integers promoted to float64)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    if arr.dtype.kind != "f":
        return arr.astype(np.float64)
    if finite:
        check_finite(arr, name, arr)
    return arr


def check_finite(values, name: str, source=None) -> None:
    """Raise a ``ValueError`` naming ``name`` if ``source`` (default ``values``) holds a NaN or
    an infinity, where ``values`` is ``source`` or an array every entry of ``source`` enters
    linearly (a projection): a non-finite entry makes ``values`` non-finite.

    A NaN or infinity makes the sum of ``values`` non-finite; a finite sum proves every entry
    finite unless it overflowed, in which case the exact elementwise check of ``source`` decides.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(values, axis=None)
    if not np.isfinite(total) and not np.all(np.isfinite(values if source is None else source)):
        raise ValueError(f"{name} must be finite (found NaN or infinity)")


@dataclass(frozen=True)
class Rank1Frame:
    """Per-row rank-1 coordinates of a batch of nodes.

    Attributes
    ----------
    mu_draft : ndarray, shape (n, d), float64
    sigma : ndarray, shape (n,), float64
    direction : ndarray, shape (n, d), float64
        Unit vector ``e`` along ``mu_target - mu_draft``.
    delta : ndarray, shape (n,), float64
        ``||mu_target - mu_draft|| / sigma``.
    degenerate : ndarray of bool, shape (n,)
        ``delta <= degenerate_tolerance() = sqrt(eps_float64)``.
    """

    mu_draft: np.ndarray
    sigma: np.ndarray
    direction: np.ndarray
    delta: np.ndarray
    degenerate: np.ndarray

    @classmethod
    def from_means(cls, mu_draft, mu_target, sigma) -> "Rank1Frame":
        """Build the frame from the two kernel means and the shared scale ``sigma``.

        Parameters
        ----------
        mu_draft, mu_target : array_like, shape (n, d)
            Finite real means of the draft and target kernels.
        sigma : float or array_like, shape (n,)
            Finite, ``> 0``.

        Notes
        -----
        The norm of ``mu_target - mu_draft`` is computed after scaling each row by its largest
        absolute entry, so displacements as small as ``1e-300`` (or as large as ``1e300``) give
        an exact unit direction without underflow, overflow or warnings.  A zero displacement
        gives ``e = e_1`` (as in the torch backend).  All fields are float64 whatever the
        inputs' dtype.  See ``proofs/P1-rank1-reduction.md``.
        """
        mu_draft = _as_real_matrix(mu_draft, "mu_draft")
        mu_target = _as_real_matrix(mu_target, "mu_target", finite=False)   # checked through diff
        if mu_target.shape != mu_draft.shape:
            raise ValueError(f"mu_target must have the shape of mu_draft {mu_draft.shape}, got {mu_target.shape}")
        dtype = np.float64  # float32 means are exact in float64: one frame, one tolerance
        n, d = mu_draft.shape
        sig = _as_sigma(sigma, n, dtype)
        diff = np.subtract(mu_target, mu_draft, dtype=dtype)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            norm = np.sqrt(np.einsum("nd,nd->n", diff, diff))
        # a NaN or infinite entry of diff makes its row's norm so (as does an overflowing square,
        # which the exact check of those rows tells apart)
        finite = np.isfinite(np.add.reduce(norm)) or np.all(np.isfinite(diff[~np.isfinite(norm)]))
        if not finite:
            # mu_draft is finite: diff is not only where mu_target is not, or where it overflowed
            check_finite(mu_target, "mu_target")
            raise ValueError("mu_target - mu_draft overflows the dtype; rescale the means")
        direction = diff
        # rows whose squared norm under- or overflowed are rescaled by their largest entry
        rescale = ~((norm > np.sqrt(np.finfo(dtype).tiny)) & np.isfinite(norm))
        np.divide(diff, np.where(rescale, 1.0, norm)[:, None], out=direction)
        if rescale.any():
            rows = diff[rescale]
            scale = np.max(np.abs(rows), axis=1) if d > 0 else np.zeros(rows.shape[0], dtype=dtype)
            nonzero = scale > 0
            unit = np.zeros_like(rows)
            if d > 0:
                unit[:, 0] = 1.0  # zero displacement: e = e_1
            scaled = rows[nonzero] / scale[nonzero, None]  # largest entry +-1: no under/overflow
            scaled_norm = np.linalg.norm(scaled, axis=1)
            unit[nonzero] = scaled / scaled_norm[:, None]
            row_norm = np.zeros(rows.shape[0], dtype=dtype)
            row_norm[nonzero] = scale[nonzero] * scaled_norm
            direction[rescale] = unit
            norm[rescale] = row_norm
        with np.errstate(over="ignore", under="ignore"):
            delta = norm / sig
        degenerate = delta <= _DEGENERATE_TOL
        return cls(mu_draft.astype(dtype, copy=False), sig, direction, delta, degenerate)

    @property
    def n(self) -> int:
        """Number of nodes (rows)."""
        return self.mu_draft.shape[0]

    @property
    def dim(self) -> int:
        """Dimension ``d`` of the state."""
        return self.mu_draft.shape[1]

    def project(self, x):
        """Return ``(s, z_perp)`` for states ``x`` of shape ``(n, d)`` or ``(n, K, d)``.

        ``z = (x - mu_draft) / sigma``, ``s = <e, z>``, ``z_perp = z - s e``; ``s`` has shape
        ``(n,)`` or ``(n, K)`` and ``z_perp`` the shape of ``x``.
        """
        x = np.asarray(x)
        if x.dtype.kind not in "fiu":
            raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
        n, d = self.mu_draft.shape
        if x.ndim == 2 and x.shape == (n, d):
            z = (x - self.mu_draft) / self.sigma[:, None]
            s = np.einsum("nd,nd->n", z, self.direction)
            return s, z - s[:, None] * self.direction
        if x.ndim == 3 and x.shape[0] == n and x.shape[2] == d:
            z = (x - self.mu_draft[:, None, :]) / self.sigma[:, None, None]
            s = np.einsum("nkd,nd->nk", z, self.direction)
            return s, z - s[..., None] * self.direction[:, None, :]
        raise ValueError(f"x must have shape (n, d) = {(n, d)} or (n, K, d) = {(n, 'K', d)}, got {x.shape}")

    def reconstruct(self, s, z_perp):
        """Return ``mu_draft + sigma (s e + z_perp)`` for ``s (n,)``, ``z_perp (n, d)``.

        Also accepts ``s (n, K)`` with ``z_perp (n, K, d)`` (the inverse of :meth:`project`).
        """
        s = np.asarray(s)
        z_perp = np.asarray(z_perp)
        n, d = self.mu_draft.shape
        if s.shape == (n,) and z_perp.shape == (n, d):
            return self.mu_draft + self.sigma[:, None] * (s[:, None] * self.direction + z_perp)
        if s.ndim == 2 and s.shape[0] == n and z_perp.shape == s.shape + (d,):
            return self.mu_draft[:, None, :] + self.sigma[:, None, None] * (
                s[..., None] * self.direction[:, None, :] + z_perp)
        raise ValueError(
            f"s and z_perp must have shapes (n,) and (n, d) with (n, d) = {(n, d)} (or (n, K) and (n, K, d)), "
            f"got {s.shape} and {z_perp.shape}")


def _as_real_matrix(value, name: str, finite: bool = True) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (n, d), got shape {arr.shape}")
    return _check_real_array(arr, name, 2, finite=finite)


def _as_sigma(sigma, n: int, dtype) -> np.ndarray:
    try:
        sig = np.asarray(sigma, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"sigma must be a real number or an array of shape (n,), got {sigma!r}") from exc
    if sig.ndim == 0:
        sig = np.full(n, float(sig))
    if sig.shape != (n,):
        raise ValueError(f"sigma must be a scalar or have shape (n,) = {(n,)}, got {sig.shape}")
    if not np.all(np.isfinite(sig)) or np.any(sig <= 0):
        raise ValueError("sigma must be finite and > 0")
    return sig.astype(dtype)
