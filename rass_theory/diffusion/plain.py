"""Plain (non-speculative) sampling with the churned Euler schedule: the reference chain."""
from __future__ import annotations

import numpy as np

from .._validation import as_generator, check_positive_int
from .mixture import GaussianMixture
from .schedule import ChurnSchedule

__all__ = ["plain_sample", "check_target"]


def check_target(target) -> GaussianMixture:
    """The target must expose ``dim`` and ``velocity(x, s)`` (a :class:`GaussianMixture` does)."""
    if not (hasattr(target, "velocity") and hasattr(target, "dim")):
        raise TypeError(f"target must have .dim and .velocity(x, s) (e.g. a GaussianMixture), got {type(target).__name__}")
    return target


def plain_sample(target, n_samples: int, n_steps: int = 30, churn: float = 0.06, rng=None,
                 *, kind: str = "sde", chunk_size: int = 4096) -> np.ndarray:
    """Sample the target chain step by step: one target call per step.

    Parameters
    ----------
    target : GaussianMixture
    n_samples, n_steps : int
    churn : float
        Churn noise ``eps`` in ``(0, inf)`` (see :class:`ChurnSchedule`).
    rng : int, SeedSequence, Generator or None
    kind : {"sde", "ddim"}
        Form of the stochastic step (default ``"sde"``), passed to :class:`ChurnSchedule`:
        ``"sde"`` is the Euler--Maruyama step of the reverse SDE, ``"ddim"`` re-synthesises at
        ``s_{k+1}`` keeping part of the predicted noise.  Both are Gaussian kernels
        ``N(a_k x + b_k u, sigma_k^2 I)`` with the same ``sigma_k``; only ``a_k, b_k`` differ.
        Anything else raises ValueError.
    chunk_size : int
        Trajectories processed together (memory bound only; the law does not depend on it).

    Returns
    -------
    ndarray, shape (n_samples, dim)

    Notes
    -----
    ``x_0 ~ N(0, I_d)`` at ``s = 1``; for ``k < n_stochastic``
    ``x_{k+1} = a_k x_k + b_k u(x_k, s_k) + sigma_k z_k``; then the deterministic tail.
    Standard steps (the speedup numerator) are the ``n_stochastic`` stochastic steps only.
    ``a_k, b_k`` depend on ``kind`` (formulas in :class:`ChurnSchedule`, proof in
    ``proofs/P9-tree-exactness.md`` section 2).
    """
    target = check_target(target)
    n_samples = check_positive_int(n_samples, "n_samples")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    schedule = ChurnSchedule(n_steps, churn, kind=kind)
    rng = as_generator(rng)
    out = np.empty((n_samples, target.dim))
    for start in range(0, n_samples, chunk_size):
        stop = min(n_samples, start + chunk_size)
        x = rng.standard_normal((stop - start, target.dim))
        for k in range(schedule.n_stochastic):
            u = target.velocity(x, schedule.s[k])
            x = schedule.mean(k, x, u) + schedule.sigma[k] * rng.standard_normal(x.shape)
        out[start:stop] = schedule.apply_tail(target, x)
    return out
