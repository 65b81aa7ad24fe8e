"""Euler schedule with churn: the Gaussian reverse kernel shared by draft and target.

Every step is a Gaussian kernel ``x_{k+1} ~ N(a_k x_k + b_k u_k, sigma_k^2 I)`` whose mean is
linear in the velocity ``u_k`` used at step ``k``; the draft and the target differ only in the
velocity they plug in, so they share ``sigma_k`` as the rank-1 reduction requires
(``proofs/P1-rank1-reduction.md``).
See ``proofs/P9-tree-exactness.md`` section 2.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int

__all__ = ["ChurnSchedule", "check_churn", "check_protocol", "PROTOCOLS"]


def check_churn(churn) -> float:
    """Validate the churn noise level: a real number in ``(0, inf)``."""
    if isinstance(churn, bool) or not isinstance(churn, numbers.Real):
        raise TypeError(f"churn must be a real number, got {churn!r}")
    churn = float(churn)
    if not np.isfinite(churn) or churn <= 0:
        raise ValueError(f"churn must lie in (0, inf), got {churn}")
    return churn


PROTOCOLS = ("default", "paper")
_KINDS = ("sde", "ddim")


def check_protocol(protocol) -> str:
    """Validate a schedule protocol name (``"default"`` or ``"paper"``)."""
    if not isinstance(protocol, str) or protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
    return protocol


def _grid(n_steps: int, churn: float, protocol: str):
    """Time grid ``s`` (length ``n_steps + 1``) and per-step noise sd ``sigma`` (length ``n_steps``)."""
    if protocol == "paper":
        s = np.concatenate([np.linspace(1000.0, 1.0, n_steps) / 1000.0, [0.0]])
        h = s[:-1] - s[1:]
        s_now = s[:-1]
        sigma = np.zeros(n_steps)
        inner = np.arange(1, n_steps - 1)          # the first and last steps are deterministic
        sigma[inner] = churn * np.sqrt(2.0 * s_now[inner] / (1.0 - s_now[inner]) * h[inner])
        return s, sigma
    s = 1.0 - np.arange(n_steps + 1) / n_steps
    s[-1] = 0.0
    sigma = np.where(s[1:] >= churn, churn, 0.0)
    return s, sigma


@dataclass(frozen=True)
class ChurnSchedule:
    """Flow-matching time grid with a churned (stochastic) Euler step.

    Parameters
    ----------
    n_steps : int
        Number of steps ``T`` of the grid ``s_0 = 1 > s_1 > ... > s_T = 0``.
    churn : float
        Noise scale ``eps`` in ``(0, inf)``.  ``protocol="default"``: the standard deviation of the
        fresh noise of every stochastic step.  ``protocol="paper"``: the scale of the diffusion
        coefficient (see Notes).
    kind : {"sde", "ddim"}
        Form of the stochastic step (default ``"sde"``); see Notes.
    protocol : {"default", "paper"}
        Time grid and noise law (default ``"default"``); see Notes.

    Attributes
    ----------
    s : ndarray, shape (n_steps + 1,)
        Flow-matching times (noise levels of the interpolant ``x_s = (1 - s) x0 + s xi``).
    sigma, a, b : ndarray, shape (n_steps,)
        Per-step noise sd and kernel coefficients: ``x_{k+1} ~ N(a_k x_k + b_k u_k, sigma_k^2 I)``.
    first_stochastic : int
        Index of the first stochastic step: the chain starts there with ``x ~ N(0, I_d)``.
    n_stochastic : int
        Number of stochastic steps (``sigma_k > 0``, the contiguous range
        ``first_stochastic .. first_stochastic + n_stochastic - 1``): the standard steps that
        speculation replaces and that the speedup counts.

    Notes
    -----
    Two sigmas must not be confused: ``s_k`` is the *noise level of the interpolant* (the
    flow-matching time; the papers call it sigma), ``sigma_k`` the *standard deviation of the
    fresh noise* injected by step ``k``.  Write ``h_k = s_k - s_{k+1}``.

    ``protocol="default"``: ``s_k = 1 - k / T``; ``sigma_k = eps`` when ``s_{k+1} >= eps`` and 0
    otherwise (for ``T = 30, eps = 0.06`` the last two steps are deterministic).

    ``protocol="paper"`` (the authors' public Gaussian-mixture protocol): ``s_k`` is
    ``linspace(1000, 1, T) / 1000`` followed by ``s_T = 0``; the reverse SDE has diffusion
    coefficient ``g(s)^2 = eps^2 * 2 s / (1 - s)`` (``eps`` scales ``g``; it is not a per-step sd),
    so step ``k`` injects noise of variance ``sigma_k^2 = g(s_k)^2 h_k``.  ``g(1)`` is infinite,
    so the first step (``k = 0``, from ``s = 1``) is deterministic, and so is the last
    (``k = T - 1``, to ``s = 0``): ``T - 2`` stochastic steps (28 at ``T = 30``).

    Both protocols start the chain ``N(0, I_d)`` at the first stochastic step (index 0 by
    default, 1 under the paper protocol): deterministic steps before it are not applied.  The
    deterministic steps after the stochastic range (the tail) are applied with the target
    velocity, identically by plain and speculative sampling, and are not counted.

    ``kind="sde"`` (default): the Euler--Maruyama step of the reverse SDE with the interpolant's
    marginals.  With ``x0_hat = x - s u`` and ``xi_hat = x + (1 - s) u`` (so
    ``x = (1 - s) x0_hat + s xi_hat``), the score is ``grad log p_s(x) = -xi_hat / s``; the SDE
    ``dx = [u - (g^2/2) grad log p_s] ds + g dW`` run from ``s = 1`` down to 0 has the marginals
    ``p_s`` (its Fokker--Planck equation reduces to the continuity equation of ``u``).  One
    Euler--Maruyama step of length ``ds = -h_k`` with ``g^2 h_k = sigma_k^2``::

        x_{k+1} = x_k - h_k u - (sigma_k^2 / (2 s_k)) xi_hat + sigma_k z
        a_k = 1 - sigma_k^2 / (2 s_k),   b_k = -h_k - sigma_k^2 (1 - s_k) / (2 s_k).

    ``kind="ddim"``: re-synthesise at ``s_{k+1}`` keeping part of the predicted noise,
    ``x_{k+1} = (1 - s_{k+1}) x0_hat + r_k xi_hat + sigma_k z`` with
    ``r_k = sqrt(s_{k+1}^2 - sigma_k^2)``, i.e. ``a_k = 1 - s_{k+1} + r_k``,
    ``b_k = r_k (1 - s_k) - (1 - s_{k+1}) s_k``.

    Either way ``x_{k+1} ~ N(a_k x_k + b_k u, sigma_k^2 I)`` and ``sigma_k = 0`` gives exactly the
    Euler step ``x + (s_{k+1} - s_k) u``.  See ``proofs/P9-tree-exactness.md`` section 2.
    """

    n_steps: int
    churn: float
    kind: str = "sde"
    protocol: str = "default"

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {list(_KINDS)}, got {self.kind!r}")
        protocol = check_protocol(self.protocol)
        n_steps = check_positive_int(self.n_steps, "n_steps", minimum=3 if protocol == "paper" else 1)
        churn = check_churn(self.churn)
        object.__setattr__(self, "n_steps", n_steps)
        object.__setattr__(self, "churn", churn)
        s, sigma = _grid(n_steps, churn, protocol)
        s_now, s_next = s[:-1], s[1:]
        stoch = sigma > 0
        if self.kind == "ddim":
            r = np.sqrt(np.maximum(s_next ** 2 - sigma ** 2, 0.0))
            a = (1.0 - s_next) + r
            b = r * (1.0 - s_now) - (1.0 - s_next) * s_now
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                a = np.where(stoch, 1.0 - sigma ** 2 / (2.0 * s_now), 1.0)
                b = np.where(stoch, (s_next - s_now) - sigma ** 2 * (1.0 - s_now) / (2.0 * s_now), s_next - s_now)
        n_stoch = int(np.count_nonzero(stoch))
        if n_stoch == 0:
            raise ValueError(
                f"churn={churn} leaves no stochastic step on a {n_steps}-step grid "
                f"(default protocol: a step is stochastic when s_(k+1) >= churn); nothing to sample or speculate on")
        first = int(np.argmax(stoch))
        if not np.all(stoch[first:first + n_stoch]):    # pragma: no cover - both grids are contiguous
            raise ValueError("the stochastic steps must form a contiguous range")
        for name, arr in (("s", s), ("sigma", sigma), ("a", a), ("b", b)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "n_stochastic", n_stoch)
        object.__setattr__(self, "first_stochastic", first)

    @property
    def stop(self) -> int:
        """One past the last stochastic step."""
        return self.first_stochastic + self.n_stochastic

    def mean(self, k, x, u) -> np.ndarray:
        """Kernel mean ``a_k x + b_k u`` for per-row step indices ``k`` (int or ``(n,)``)."""
        k = np.asarray(k)
        a = self.a[k]
        b = self.b[k]
        if k.ndim == 0:
            return a * x + b * u
        return a[:, None] * x + b[:, None] * u

    def apply_tail(self, target, x) -> np.ndarray:
        """Apply the deterministic tail steps ``k = stop .. n_steps - 1`` with the target velocity."""
        for k in range(self.stop, self.n_steps):
            x = self.mean(k, x, target.velocity(x, self.s[k]))
        return x

    @property
    def n_deterministic(self) -> int:
        return self.n_steps - self.n_stochastic
