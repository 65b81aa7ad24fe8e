"""Isotropic Gaussian-mixture target with its analytic flow-matching denoiser and velocity.

Interpolant (``proofs/P9-tree-exactness.md``): ``x_s = (1 - s) x0 + s xi`` with ``x0`` from the mixture and
``xi ~ N(0, I_d)``; ``s = 1`` is pure noise and ``s = 0`` is data.  Everything the sampler
needs (posterior responsibilities, ``E[x0 | x_s]``, the velocity ``E[xi - x0 | x_s]``) is
closed form for isotropic components; see ``proofs/P9-tree-exactness.md`` (section 1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_generator, check_positive_int

__all__ = ["GaussianMixture"]


def _as_s(s, n: int) -> np.ndarray:
    arr = np.asarray(s, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"s must be a scalar or have shape (n,) = {(n,)}, got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError("s must lie in [0, 1]")
    return arr


@dataclass(frozen=True, eq=False)
class GaussianMixture:
    """Mixture ``sum_c w_c N(m_c, tau_c^2 I_d)`` with isotropic components.

    Parameters
    ----------
    means : ndarray, shape (C, d)
    sds : ndarray, shape (C,)
        Component standard deviations ``tau_c > 0``.
    weights : ndarray, shape (C,), optional
        Mixture weights on the simplex (equal weights by default).

    Notes
    -----
    Given component ``c``, ``x_s | c ~ N((1 - s) m_c, v_c(s) I)`` with
    ``v_c(s) = (1 - s)^2 tau_c^2 + s^2``.  The posterior responsibilities are
    ``r_c(x, s) ∝ w_c N(x; (1 - s) m_c, v_c I)`` (computed in log space), and

        E[x0 | x_s = x, c] = m_c + gamma_c (x - (1 - s) m_c),   gamma_c = (1 - s) tau_c^2 / v_c,
        E[x0 | x_s = x]    = sum_c r_c E[x0 | x, c],
        u(x, s) = E[xi - x0 | x_s = x] = (x - E[x0 | x_s = x]) / s      (s > 0),

    because ``xi - x0 = (x_s - x0) / s``.  ``u`` is the velocity ``dx_s/ds`` of the
    probability-flow ODE.  Proof: ``proofs/P9-tree-exactness.md`` section 1.
    """

    means: np.ndarray
    sds: np.ndarray
    weights: np.ndarray | None = None

    def __post_init__(self):
        means = np.asarray(self.means, dtype=np.float64)
        if means.ndim != 2 or means.shape[0] < 1 or means.shape[1] < 1:
            raise ValueError(f"means must have shape (n_components, dim) with both >= 1, got {means.shape}")
        if not np.all(np.isfinite(means)):
            raise ValueError("means must be finite")
        sds = np.asarray(self.sds, dtype=np.float64)
        if sds.shape != (means.shape[0],):
            raise ValueError(f"sds must have shape (n_components,) = {(means.shape[0],)}, got {sds.shape}")
        if not np.all(np.isfinite(sds)) or np.any(sds <= 0):
            raise ValueError("sds must be finite and > 0")
        if self.weights is None:
            weights = np.full(means.shape[0], 1.0 / means.shape[0])
        else:
            weights = np.asarray(self.weights, dtype=np.float64)
            if weights.shape != (means.shape[0],):
                raise ValueError(f"weights must have shape (n_components,) = {(means.shape[0],)}, got {weights.shape}")
            if not np.all(np.isfinite(weights)) or np.any(weights < 0) or abs(weights.sum() - 1) > 1e-9:
                raise ValueError("weights must be non-negative, finite and sum to 1")
        for name, arr in (("means", means), ("sds", sds), ("weights", weights)):
            arr = arr.copy()
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        sq = np.einsum("cd,cd->c", self.means, self.means)
        sq.setflags(write=False)
        object.__setattr__(self, "_mean_sq", sq)

    # ------------------------------------------------------------------ construction
    @classmethod
    def random(cls, dim: int = 512, n_components: int = 5, seed=0, *, weights=None,
               mean_range=(-2.0, 2.0), sd_range=(0.10, 0.25)) -> "GaussianMixture":
        """The RASS/D-GRS benchmark mixture: means ``U(-2, 2)^d``, sds ``U(0.10, 0.25)``.

        The draws come from ``numpy.random.default_rng(seed)`` in this order: all means (shape
        ``(n_components, dim)``), then the sds.  ``random(dim=512, n_components=5,
        seed=20260714)`` is the papers' mixture, on which ``bench/gm_speedup_table.py``
        reproduces the published speedups.

        Parameters
        ----------
        dim, n_components : int
        seed : int, SeedSequence or Generator
        weights : array_like, optional
            Mixture weights (equal by default).
        mean_range, sd_range : (float, float)
            Bounds of the uniform laws of the mean coordinates and of the component sds.
        """
        dim = check_positive_int(dim, "dim")
        n_components = check_positive_int(n_components, "n_components")
        lo, hi = (float(v) for v in sd_range)
        if not 0 < lo <= hi:
            raise ValueError(f"sd_range must satisfy 0 < low <= high, got {sd_range}")
        rng = as_generator(seed)
        means = rng.uniform(mean_range[0], mean_range[1], size=(n_components, dim))
        sds = rng.uniform(lo, hi, size=n_components)
        return cls(means, sds, weights)

    def perturbed(self, scale: float = 0.05, seed=0) -> "GaussianMixture":
        """An independent cheap draft model: means, sds and weights jittered by ``scale``.

        Means move by ``scale * N(0, 1)`` per coordinate, sds and weights are multiplied by
        ``exp(scale * N(0, 1))`` (weights renormalised).
        """
        scale = float(scale)
        if not np.isfinite(scale) or scale < 0:
            raise ValueError(f"scale must be finite and >= 0, got {scale}")
        rng = as_generator(seed)
        means = self.means + scale * rng.standard_normal(self.means.shape)
        sds = self.sds * np.exp(scale * rng.standard_normal(self.sds.shape))
        w = self.weights * np.exp(scale * rng.standard_normal(self.weights.shape))
        return GaussianMixture(means, sds, w / w.sum())

    # ------------------------------------------------------------------ properties
    @property
    def dim(self) -> int:
        return self.means.shape[1]

    @property
    def n_components(self) -> int:
        return self.means.shape[0]

    def sample(self, n_samples: int, rng=None) -> np.ndarray:
        """Exact draws from the mixture itself (the ``s = 0`` law), shape ``(n_samples, dim)``."""
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = as_generator(rng)
        comp = rng.choice(self.n_components, size=n_samples, p=self.weights)
        return self.means[comp] + self.sds[comp, None] * rng.standard_normal((n_samples, self.dim))

    # ------------------------------------------------------------------ posterior
    def _check_x(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x must have shape (n, dim) with dim = {self.dim}, got {x.shape}")
        return x

    def log_responsibilities(self, x, s) -> np.ndarray:
        """``log r_c(x, s)``, shape ``(n, C)`` (rows normalised in log space)."""
        x = self._check_x(x)
        s = _as_s(s, x.shape[0])
        return self._log_resp(x, s)[0]

    def _log_resp(self, x, s):
        one_minus = 1.0 - s                                          # (n,)
        var = one_minus[:, None] ** 2 * self.sds[None, :] ** 2 + s[:, None] ** 2   # (n, C)
        xx = np.einsum("nd,nd->n", x, x)
        xm = x @ self.means.T                                        # (n, C)
        sq = xx[:, None] - 2.0 * one_minus[:, None] * xm + one_minus[:, None] ** 2 * self._mean_sq[None, :]
        sq = np.maximum(sq, 0.0)
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights)[None, :]
        logp = logw - 0.5 * self.dim * np.log(var) - 0.5 * sq / var
        logp -= logp.max(axis=1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
        return logp, var

    def denoise(self, x, s) -> np.ndarray:
        """Posterior mean ``E[x0 | x_s = x]``, shape ``(n, d)``; ``s`` scalar or ``(n,)``."""
        x = self._check_x(x)
        s = _as_s(s, x.shape[0])
        return self._denoise(x, s)

    def _posterior_weights(self, x, s):
        """``(g, coef)`` with ``E[x0 | x_s = x] = g x + coef @ means``, shapes ``(n,)`` and ``(n, C)``."""
        logr, var = self._log_resp(x, s)
        r = np.exp(logr)
        one_minus = 1.0 - s
        gamma = one_minus[:, None] * self.sds[None, :] ** 2 / var     # (n, C)
        g = np.einsum("nc,nc->n", r, gamma)
        coef = r * (1.0 - one_minus[:, None] * gamma)                  # weight of m_c
        return g, coef

    def _denoise(self, x, s):
        g, coef = self._posterior_weights(x, s)
        return g[:, None] * x + coef @ self.means

    def velocity(self, x, s) -> np.ndarray:
        """Flow-matching velocity ``u(x, s) = (x - E[x0 | x_s = x]) / s`` for ``s > 0``.

        Computed as ``((1 - g) / s) x - (coef / s) @ means`` (``E[x0 | x] = g x + coef @ means``):
        three passes over the ``(n, d)`` states instead of five, the cost that dominates a full
        tree expansion's batched call.
        """
        x = self._check_x(x)
        s = _as_s(s, x.shape[0])
        if np.any(s <= 0):
            raise ValueError("s must be > 0 for the velocity (it is singular at s = 0)")
        g, coef = self._posterior_weights(x, s)
        u = x * ((1.0 - g) / s)[:, None]
        u -= (coef / s[:, None]) @ self.means
        return u

    def nearest_component(self, x) -> np.ndarray:
        """Index of the nearest component mean for each row of ``x`` (occupancy tests)."""
        x = self._check_x(x)
        d2 = np.einsum("nd,nd->n", x, x)[:, None] - 2 * x @ self.means.T + self._mean_sq[None, :]
        return np.argmin(d2, axis=1)
