"""Plain (non-speculative) sampling with the churned Euler schedule: the reference chain."""
from __future__ import annotations

import numpy as np

from .._validation import as_generator, check_positive_int
from ._checks import check_backend, check_bool, check_target
from .kernel import plain_kernel
from .trajectories import PlainSampleResult, TrajectoryRecorder

__all__ = ["plain_sample"]

def plain_sample(target, n_samples: int, n_steps: int = 30, churn: float = 0.06, rng=None,
                 *, kind: str = "sde", protocol: str = "default", chunk_size: int = 4096,
                 backend: str = "numpy", device=None, dtype=None, return_trajectories: bool = False):
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
    protocol : {"default", "paper"}
        Time grid and noise law (:class:`ChurnSchedule`); ``"paper"`` is the authors' public
        Gaussian-mixture protocol.  Anything else raises ValueError listing the valid names.
    chunk_size : int
        Trajectories processed together (memory bound only; the law does not depend on it).

    backend : {"numpy", "torch"}
        ``"torch"`` returns ``rass_theory.diffusion.torch_sampler.plain_sample_torch(...)`` with
        ``device`` and ``dtype`` (imported only then); ``"numpy"`` (default) ignores them.
    return_trajectories : bool
        Return a :class:`~rass_theory.diffusion.trajectories.PlainSampleResult` with every
        committed state (``.trajectories``), the kernel mean of each step (``.draft_means``)
        and depth 0 (``.depths``) besides ``.samples``; off by default (it holds
        ``8 n S (2 dim + 1)`` bytes, ``S = n_stochastic + 1``).  Same random stream.

    Returns
    -------
    ndarray, shape (n_samples, dim), or PlainSampleResult with ``return_trajectories=True``

    Notes
    -----
    ``x ~ N(0, I_d)`` at the first stochastic step ``k0`` (``s = 1`` by default); for the
    stochastic steps ``k0 <= k < k0 + n_stochastic``
    ``x_{k+1} = a_k x_k + b_k u(x_k, s_k) + sigma_k z_k``; then the deterministic tail.
    Standard steps (the speedup numerator) are the ``n_stochastic`` stochastic steps only.
    ``a_k, b_k`` depend on ``kind`` (formulas in :class:`ChurnSchedule`, proof in
    ``proofs/P9-tree-exactness.md`` section 2).
    """
    if check_backend(backend) == "torch":
        from .torch_sampler import plain_sample_torch

        return plain_sample_torch(target, n_samples=n_samples, n_steps=n_steps, churn=churn, rng=rng, kind=kind,
                                  protocol=protocol, device=device, dtype=dtype,
                                  return_trajectories=return_trajectories)
    target = check_target(target)
    n_samples = check_positive_int(n_samples, "n_samples")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    record = check_bool(return_trajectories, "return_trajectories")
    kernel = plain_kernel(target, n_steps, churn, kind=kind, protocol=protocol)
    rng = as_generator(rng)
    out = np.empty((n_samples, target.dim))
    parts = []
    for start in range(0, n_samples, chunk_size):
        stop = min(n_samples, start + chunk_size)
        x = rng.standard_normal((stop - start, target.dim))
        rec = TrajectoryRecorder(kernel, x) if record else None
        for k in range(kernel.first_stochastic, kernel.stop):
            mean = kernel.mean(k, x)
            x = mean + kernel.std(k) * rng.standard_normal(x.shape)
            if rec is not None:
                rec.commit(slice(None), k + 1, x, mean, 0)
        out[start:stop] = kernel.tail(x)
        if rec is not None:
            parts.append(rec.arrays())
    if not record:
        return out
    traj, means, depths = (np.concatenate([p[i] for p in parts]) for i in range(3))
    return PlainSampleResult(out, traj, means, depths, target_calls=kernel.n_stochastic * len(parts))
