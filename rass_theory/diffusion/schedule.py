"""Euler schedule with churn: the Gaussian reverse kernel shared by draft and target.

Every step is a Gaussian kernel ``x_{k+1} ~ N(a_k x_k + b_k u_k, sigma_k^2 I)`` whose mean is
linear in the velocity ``u_k`` used at step ``k``; the draft and the target differ only in the
velocity they plug in, so they share ``sigma_k`` as DESIGN section 2 requires.
See ``proofs/P9-tree-exactness.md`` section 2.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int

__all__ = ["ChurnSchedule", "check_churn"]


def check_churn(churn) -> float:
    """Validate the churn noise level: a real number in ``(0, inf)``."""
    if isinstance(churn, bool) or not isinstance(churn, numbers.Real):
        raise TypeError(f"churn must be a real number, got {churn!r}")
    churn = float(churn)
    if not np.isfinite(churn) or churn <= 0:
        raise ValueError(f"churn must lie in (0, inf), got {churn}")
    return churn


@dataclass(frozen=True)
class ChurnSchedule:
    """Uniform flow-matching time grid with a churned (stochastic) Euler step.

    Parameters
    ----------
    n_steps : int
        Number of steps of the grid ``s_k = 1 - k / n_steps``, ``k = 0..n_steps``.
    churn : float
        Standard deviation ``eps`` of the fresh noise injected per stochastic step.

    Attributes
    ----------
    s : ndarray, shape (n_steps + 1,)
    sigma, a, b : ndarray, shape (n_steps,)
    n_stochastic : int
        Number of leading stochastic steps (``sigma_k > 0``); the remaining
        ``n_steps - n_stochastic`` steps are deterministic.

    kind : {"sde", "ddim"}
        Form of the stochastic step (default ``"sde"``); see Notes.

    Notes
    -----
    Write ``x0_hat = x - s_k u`` and ``xi_hat = x + (1 - s_k) u`` for the posterior means of data
    and noise (so ``x = (1 - s_k) x0_hat + s_k xi_hat``), ``h_k = s_k - s_{k+1}``, and
    ``sigma_k = eps`` when ``s_{k+1} >= eps``, ``sigma_k = 0`` otherwise.

    ``kind="sde"`` (default): the Euler--Maruyama step of the reverse SDE with the interpolant's
    marginals, ``dx = [-u + (g^2/2) grad log p_s] dt + g dW`` (``t = 1 - s``), with the score
    ``grad log p_s(x) = -xi_hat / s`` and per-step noise ``g^2 h_k = sigma_k^2``::

        x_{k+1} = x_k - h_k u - (sigma_k^2 / (2 s_k)) xi_hat + sigma_k z
        a_k = 1 - sigma_k^2 / (2 s_k),   b_k = -h_k - sigma_k^2 (1 - s_k) / (2 s_k).

    ``kind="ddim"``: re-synthesise at ``s_{k+1}`` keeping part of the predicted noise,
    ``x_{k+1} = (1 - s_{k+1}) x0_hat + r_k xi_hat + sigma_k z`` with
    ``r_k = sqrt(s_{k+1}^2 - sigma_k^2)``, i.e. ``a_k = 1 - s_{k+1} + r_k``,
    ``b_k = r_k (1 - s_k) - (1 - s_{k+1}) s_k``.

    Either way ``x_{k+1} ~ N(a_k x_k + b_k u, sigma_k^2 I)`` and ``sigma_k = 0`` gives exactly the
    Euler step ``x + (s_{k+1} - s_k) u``.  The stochastic steps are the leading ones (``s_{k+1}``
    decreases); the deterministic tail (two steps for ``n_steps = 30, eps = 0.06``: the remaining
    noise level ``s_{k+1}`` is below ``eps``) has nothing to speculate on, is excluded from
    speculation and from the step count, and is applied identically by plain and speculative
    sampling.  See ``proofs/P9-tree-exactness.md`` section 2.
    """

    n_steps: int
    churn: float
    kind: str = "sde"

    def __post_init__(self):
        if self.kind not in ("sde", "ddim"):
            raise ValueError(f"kind must be 'sde' or 'ddim', got {self.kind!r}")
        n_steps = check_positive_int(self.n_steps, "n_steps")
        churn = check_churn(self.churn)
        object.__setattr__(self, "n_steps", n_steps)
        object.__setattr__(self, "churn", churn)
        s = 1.0 - np.arange(n_steps + 1) / n_steps
        s[-1] = 0.0
        s_next = s[1:]
        sigma = np.where(s_next >= churn, churn, 0.0)
        s_now = s[:-1]
        if self.kind == "ddim":
            r = np.sqrt(np.maximum(s_next ** 2 - sigma ** 2, 0.0))
            a = (1.0 - s_next) + r
            b = r * (1.0 - s_now) - (1.0 - s_next) * s_now
        else:
            a = 1.0 - sigma ** 2 / (2.0 * s_now)
            b = (s_next - s_now) - sigma ** 2 * (1.0 - s_now) / (2.0 * s_now)
        n_stoch = int(np.count_nonzero(sigma > 0))
        if n_stoch == 0:
            raise ValueError(
                f"churn={churn} leaves no stochastic step on a {n_steps}-step grid "
                f"(a step is stochastic when s_(k+1) >= churn); nothing to sample or speculate on")
        for name, arr in (("s", s), ("sigma", sigma), ("a", a), ("b", b)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "n_stochastic", n_stoch)

    def mean(self, k, x, u) -> np.ndarray:
        """Kernel mean ``a_k x + b_k u`` for per-row step indices ``k`` (int or ``(n,)``)."""
        k = np.asarray(k)
        a = self.a[k]
        b = self.b[k]
        if k.ndim == 0:
            return a * x + b * u
        return a[:, None] * x + b[:, None] * u

    def apply_tail(self, target, x) -> np.ndarray:
        """Apply the deterministic tail steps ``k = n_stochastic .. n_steps - 1``."""
        for k in range(self.n_stochastic, self.n_steps):
            x = self.mean(k, x, target.velocity(x, self.s[k]))
        return x

    @property
    def n_deterministic(self) -> int:
        return self.n_steps - self.n_stochastic
