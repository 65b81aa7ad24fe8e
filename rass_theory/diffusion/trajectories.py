"""Recording committed states: the trajectories, draft means and depths a whole-run check reads.

Layout (shared by every sampler of the toolkit and by :func:`check_trajectories`), for a kernel
with stochastic steps ``k0 = first_stochastic <= k < stop`` and ``S = stop - k0 + 1``:

* ``trajectories[i, t]`` -- the committed state at step ``k0 + t`` (``t = 0`` is the
  ``N(0, I_d)`` start);
* ``draft_means[i, t]`` -- for ``t >= 1``, the draft mean in force when the state at step
  ``k0 + t`` was committed (the mean its drafted children were drawn around); ``t = 0`` holds
  the start's mean, 0;
* ``depths[i, t]`` -- for ``t >= 1``, the depth in its round's tree of the node whose children
  produced that state (0 = the round's root); ``t = 0`` holds -1 (not committed by a tree).

Memory: ``8 * n * S * (2 d + 1)`` bytes in float64 (238 MB = 227 MiB for ``n = 1000``, ``S = 29``,
``d = 512``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TrajectoryRecorder", "PlainSampleResult", "trajectory_bytes"]


def trajectory_bytes(n: int, n_states: int, dim: int) -> int:
    """Bytes held by recorded trajectories, draft means (float64) and depths (int64)."""
    return 8 * int(n) * int(n_states) * (2 * int(dim) + 1)


class TrajectoryRecorder:
    """Host (NumPy, float64) buffers for the committed states of ``n`` trajectories.

    Parameters
    ----------
    kernel : PlainKernel
    x0 : ndarray, shape (n, dim)
        The start states (at step ``kernel.first_stochastic``).
    """

    def __init__(self, kernel, x0):
        x0 = np.asarray(x0, dtype=np.float64)
        n, d = x0.shape
        S = kernel.n_states
        self.k0 = kernel.first_stochastic
        self.trajectories = np.full((n, S, d), np.nan)
        self.trajectories[:, 0] = x0
        self.draft_means = np.full((n, S, d), np.nan)
        self.draft_means[:, 0] = 0.0
        self.depths = np.full((n, S), -1, dtype=np.int64)

    def commit(self, rows, steps, states, mu_d, depth) -> None:
        """Record, for trajectories ``rows``, the states committed at ``steps`` (one per row)."""
        t = np.asarray(steps) - self.k0
        self.trajectories[rows, t] = states
        self.draft_means[rows, t] = mu_d
        self.depths[rows, t] = depth

    def arrays(self):
        """``(trajectories, draft_means, depths)``; every state must have been committed."""
        if np.isnan(self.trajectories).any():    # pragma: no cover - a sampler bug, not user input
            raise RuntimeError("internal error: a committed state was not recorded")
        return self.trajectories, self.draft_means, self.depths


@dataclass(frozen=True)
class PlainSampleResult:
    """Outcome of ``plain_sample(..., return_trajectories=True)``.

    Attributes
    ----------
    samples : ndarray, shape (n_samples, dim)
        Final states (after the deterministic tail), as ``plain_sample`` returns by default.
    trajectories, draft_means : ndarray, shape (n_samples, S, dim)
        Committed states and their means (layout in :mod:`rass_theory.diffusion.trajectories`);
        plain sampling has no draft, so ``draft_means`` holds the plain kernel's own mean.
    depths : ndarray of int, shape (n_samples, S)
        0 for every committed step (-1 at the start).
    target_calls : int
        Batched target calls over the stochastic steps (one per step and chunk).
    """

    samples: np.ndarray
    trajectories: np.ndarray
    draft_means: np.ndarray
    depths: np.ndarray
    target_calls: int
