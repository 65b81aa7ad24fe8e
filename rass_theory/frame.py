"""The rank-1 frame of one speculative node (DESIGN section 2, proof ``P1-rank1``).

Children ``X_1..X_K`` are iid ``N(mu_draft, sigma^2 I_d)`` and the target kernel is
``N(mu_target, sigma^2 I_d)``.  With

    e = (mu_target - mu_draft) / ||mu_target - mu_draft||,   delta = ||mu_target - mu_draft|| / sigma,
    z = (x - mu_draft) / sigma,   s = <e, z>,   z_perp = z - s e,

the draft gives ``s ~ N(0, 1)``, the target ``s ~ N(delta, 1)``, and ``z_perp`` has the same
law ``N(0, I - e e^T)`` under both, independent of ``s``.  A state is rebuilt as
``x = mu_draft + sigma (s e + z_perp)``.

A node is *degenerate* when ``delta <= degenerate_tolerance(dtype)`` (``sqrt(eps)``): the two
kernels then coincide to working precision and verifiers accept child 0.  The direction of a
degenerate node is still a unit vector (the normalised difference when it is nonzero, the first
basis vector when it is exactly zero) so nothing ever divides by zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Rank1Frame", "degenerate_tolerance", "validate_node_inputs"]


def degenerate_tolerance(dtype=np.float64) -> float:
    """Return ``sqrt(eps)`` of ``dtype``: below this ``delta`` a node is degenerate."""
    return float(np.sqrt(np.finfo(dtype).eps))


def validate_node_inputs(children, mu_draft, mu_target, sigma):
    """Check the verifier contract's inputs and return them as float arrays.

    Returns ``children (n, K, d)``, ``mu_draft (n, d)``, ``mu_target (n, d)``, ``sigma (n,)``.
    Raises ``ValueError``/``TypeError`` naming the offending argument.
    """
    arrays = {}
    for name, value, ndim in (("children", children, 3), ("mu_draft", mu_draft, 2), ("mu_target", mu_target, 2)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
        if arr.ndim != ndim:
            raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite (found NaN or infinity)")
        arrays[name] = arr if arr.dtype.kind == "f" else arr.astype(np.float64)
    children, mu_draft, mu_target = arrays["children"], arrays["mu_draft"], arrays["mu_target"]
    n, K, d = children.shape
    if K < 1:
        raise ValueError("children must hold at least one child per node (K >= 1)")
    if mu_draft.shape != (n, d):
        raise ValueError(f"mu_draft must have shape (n, d) = {(n, d)} to match children, got {mu_draft.shape}")
    if mu_target.shape != (n, d):
        raise ValueError(f"mu_target must have shape (n, d) = {(n, d)} to match children, got {mu_target.shape}")
    sig = np.asarray(sigma, dtype=np.float64)
    if sig.ndim == 0:
        sig = np.full(n, float(sig))
    if sig.shape != (n,):
        raise ValueError(f"sigma must be a scalar or have shape (n,) = {(n,)}, got {sig.shape}")
    if not np.all(np.isfinite(sig)) or np.any(sig <= 0):
        raise ValueError("sigma must be finite and > 0")
    return children, mu_draft, mu_target, sig


@dataclass(frozen=True)
class Rank1Frame:
    """Per-row rank-1 coordinates of a batch of nodes.

    Attributes
    ----------
    mu_draft : ndarray, shape (n, d)
    sigma : ndarray, shape (n,)
    direction : ndarray, shape (n, d)
        Unit vector ``e`` along ``mu_target - mu_draft``.
    delta : ndarray, shape (n,)
        ``||mu_target - mu_draft|| / sigma``.
    degenerate : ndarray of bool, shape (n,)
        ``delta <= degenerate_tolerance(dtype)``.
    """

    mu_draft: np.ndarray
    sigma: np.ndarray
    direction: np.ndarray
    delta: np.ndarray
    degenerate: np.ndarray

    @classmethod
    def from_means(cls, mu_draft, mu_target, sigma) -> "Rank1Frame":
        """Build the frame from the two kernel means and the shared scale ``sigma``."""
        mu_draft = np.asarray(mu_draft)
        mu_target = np.asarray(mu_target)
        if mu_draft.ndim != 2 or mu_target.shape != mu_draft.shape:
            raise ValueError(
                f"mu_draft and mu_target must both have shape (n, d), got {mu_draft.shape} and {mu_target.shape}"
            )
        dtype = np.result_type(mu_draft.dtype, mu_target.dtype, np.float32)
        n, d = mu_draft.shape
        sig = np.broadcast_to(np.asarray(sigma, dtype=dtype), (n,)).copy()
        if not np.all(np.isfinite(sig)) or np.any(sig <= 0):
            raise ValueError("sigma must be finite and > 0")
        diff = (mu_target - mu_draft).astype(dtype, copy=False)
        norm = np.linalg.norm(diff, axis=1)
        direction = np.zeros((n, d), dtype=dtype)
        if d > 0:
            direction[:, 0] = 1.0
        nonzero = norm > 0
        direction[nonzero] = diff[nonzero] / norm[nonzero, None]
        delta = norm / sig
        degenerate = delta <= degenerate_tolerance(dtype)
        return cls(mu_draft.astype(dtype, copy=False), sig, direction, delta, degenerate)

    def project(self, x):
        """Return ``(s, z_perp)`` for states ``x`` of shape ``(n, d)`` or ``(n, K, d)``."""
        x = np.asarray(x)
        if x.ndim == 2:
            z = (x - self.mu_draft) / self.sigma[:, None]
            s = np.einsum("nd,nd->n", z, self.direction)
            return s, z - s[:, None] * self.direction
        if x.ndim == 3:
            z = (x - self.mu_draft[:, None, :]) / self.sigma[:, None, None]
            s = np.einsum("nkd,nd->nk", z, self.direction)
            return s, z - s[..., None] * self.direction[:, None, :]
        raise ValueError(f"x must have shape (n, d) or (n, K, d), got {x.shape}")

    def reconstruct(self, s, z_perp):
        """Return ``mu_draft + sigma (s e + z_perp)`` for ``s (n,)`` and ``z_perp (n, d)``."""
        s = np.asarray(s)
        return self.mu_draft + self.sigma[:, None] * (s[:, None] * self.direction + z_perp)
