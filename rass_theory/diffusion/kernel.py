"""The plain churned Euler kernel of a target model, as one object shared by every sampler and check.

``kernel = plain_kernel(target, n_steps=30, churn=0.06, protocol="paper")`` bundles the target's
velocity with the schedule's coefficients: step ``k`` maps ``x`` to
``N(kernel.mean(k, x), kernel.std(k)^2 I)``.  The NumPy sampler, the torch sampler, plain
sampling and :func:`rass_theory.diffusion.check_trajectories` all read the kernel from here, so
there is one definition of the chain they are exact for (``proofs/P9-tree-exactness.md``
section 2).  States may be NumPy arrays or torch tensors; the result follows the input (array
type, device, dtype).
"""
from __future__ import annotations

import sys

import numpy as np

from ._checks import check_target
from .schedule import ChurnSchedule

__all__ = ["PlainKernel", "plain_kernel", "is_tensor"]


def is_tensor(x) -> bool:
    """True when ``x`` is a torch tensor (without importing torch when it is not loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_torch_model(target) -> bool:
    adapters = sys.modules.get("rass_theory.models.adapters")
    return adapters is not None and isinstance(target, adapters.VelocityModel)


class PlainKernel:
    """Gaussian transition ``x_{k+1} ~ N(a_k x_k + b_k u(x_k, s_k), sigma_k^2 I_d)`` of a target model.

    Build with :func:`plain_kernel`.

    Attributes
    ----------
    target : model
        Anything with ``dim`` and ``velocity(x, s)``: a :class:`GaussianMixture` (NumPy) or a
        torch velocity model of :mod:`rass_theory.models`.
    schedule : ChurnSchedule
        Time grid and coefficients ``s, a, b, sigma``.
    first_stochastic, stop : int
        The stochastic steps are ``first_stochastic <= k < stop``; a trajectory's committed
        states are indexed by ``first_stochastic .. stop`` (``stop - first_stochastic + 1``
        states, the first drawn ``N(0, I_d)``).
    dim : int
    backend : {"numpy", "torch"}
        The array type the target computes in natively.
    target_calls, target_evaluations : int
        Batched velocity calls made through this kernel and the rows they held (a check's own
        cost; never part of a sampler's speedup).

    Notes
    -----
    ``mean(k, x) = a_k x + b_k u(x, s_k)`` and ``std(k) = sigma_k`` with ``a_k, b_k, sigma_k``
    from :class:`ChurnSchedule` (formulas there; derivation in ``proofs/P9-tree-exactness.md``
    section 2).  A draft that plugs another velocity ``u_d`` has mean ``affine(k, x, u_d)`` and
    the same ``sigma_k``.  NumPy states given to a torch model are moved to the model's device
    and dtype and the velocity comes back as float64 NumPy; torch states given to a NumPy
    Gaussian mixture are evaluated in float64 on the host and returned on their device.
    """

    def __init__(self, target, schedule: ChurnSchedule):
        self.target = check_target(target)
        if not isinstance(schedule, ChurnSchedule):
            raise TypeError(f"schedule must be a ChurnSchedule, got {type(schedule).__name__}")
        self.schedule = schedule
        self.backend = "torch" if _is_torch_model(target) else "numpy"
        self.target_calls = 0
        self.target_evaluations = 0
        self._torch_target = None
        self._coef_cache = {}

    def __repr__(self):
        sch = self.schedule
        return (f"PlainKernel(target={getattr(self.target, 'name', type(self.target).__name__)}, dim={self.dim}, "
                f"n_steps={sch.n_steps}, churn={sch.churn}, protocol={sch.protocol!r}, kind={sch.kind!r})")

    # ------------------------------------------------------------------ schedule views
    @property
    def dim(self) -> int:
        return int(self.target.dim)

    @property
    def first_stochastic(self) -> int:
        return self.schedule.first_stochastic

    @property
    def stop(self) -> int:
        return self.schedule.stop

    @property
    def n_steps(self) -> int:
        return self.schedule.n_steps

    @property
    def n_stochastic(self) -> int:
        return self.schedule.n_stochastic

    @property
    def n_states(self) -> int:
        """Committed states per trajectory: ``stop - first_stochastic + 1``."""
        return self.stop - self.first_stochastic + 1

    @property
    def s(self) -> np.ndarray:
        return self.schedule.s

    def std(self, k):
        """Noise standard deviation ``sigma_k`` (float for an int ``k``, array for an index array)."""
        out = self.schedule.sigma[np.asarray(k)]
        return float(out) if np.ndim(out) == 0 else out

    def coefficients(self, dtype, device) -> dict:
        """The schedule's ``s, sigma, a, b`` as torch tensors (cached per dtype and device)."""
        import torch

        key = (dtype, str(device))
        if key not in self._coef_cache:
            self._coef_cache[key] = {name: torch.tensor(np.asarray(getattr(self.schedule, name)), dtype=dtype,
                                                        device=device) for name in ("s", "sigma", "a", "b")}
        return self._coef_cache[key]

    # ------------------------------------------------------------------ the kernel
    def _coef(self, name, k, x):
        """Coefficient ``name`` at steps ``k`` shaped to broadcast against ``x`` (rows first)."""
        if is_tensor(x):
            import torch

            table = self.coefficients(x.dtype, x.device)[name]
            kt = torch.as_tensor(k, device=x.device)
            c = table[kt]
            return c if c.ndim == 0 else c.reshape((-1,) + (1,) * (x.ndim - 1))
        c = getattr(self.schedule, name)[np.asarray(k)]
        return c if np.ndim(c) == 0 else c.reshape((-1,) + (1,) * (np.ndim(x) - 1))

    def affine(self, k, x, u):
        """``a_k x + b_k u`` for step ``k`` (int, or one index per row) and a velocity ``u``."""
        return self._coef("a", k, x) * x + self._coef("b", k, x) * u

    def velocity(self, k, x):
        """Target velocity ``u(x, s_k)`` (one batched call); ``k`` an int or one index per row."""
        n = x.shape[0]
        self.target_calls += 1
        self.target_evaluations += int(n)
        k = np.asarray(k.cpu().numpy() if is_tensor(k) else k)
        s = self.schedule.s[k]
        if is_tensor(x):
            import torch

            tgt = self._as_torch_target()
            return tgt.velocity(x, torch.as_tensor(np.broadcast_to(s, (n,)).copy(), dtype=x.dtype, device=x.device))
        if self.backend == "torch":
            import torch

            dev = self.target.device if self.target.device is not None else torch.device("cpu")
            dt = self.target.dtype if self.target.dtype is not None else torch.float32
            xt = torch.as_tensor(np.asarray(x), dtype=dt, device=dev)
            st = torch.as_tensor(np.broadcast_to(s, (n,)).copy(), dtype=dt, device=dev)
            return self.target.velocity(xt, st).detach().cpu().double().numpy()
        return self.target.velocity(x, s)

    def mean(self, k, x):
        """Plain-kernel mean ``a_k x + b_k u(x, s_k)`` (one target call)."""
        return self.affine(k, x, self.velocity(k, x))

    def tail(self, x):
        """Apply the deterministic steps ``stop .. n_steps - 1`` with the target velocity."""
        for k in range(self.stop, self.n_steps):
            x = self.mean(k, x)
        return x

    def _as_torch_target(self):
        if self.backend == "torch":
            return self.target
        if self._torch_target is None:
            from .torch_target import as_torch_target

            self._torch_target = as_torch_target(self.target)
        return self._torch_target


def plain_kernel(target, n_steps: int = 30, churn: float = 0.06, *, kind: str = "sde",
                 protocol: str = "default") -> PlainKernel:
    """The plain churned Euler kernel of ``target`` on a schedule.

    Parameters
    ----------
    target : GaussianMixture or torch velocity model
        Anything with ``dim`` and ``velocity(x, s)``; the models of :mod:`rass_theory.models`
        (for example ``models.digits_flow()``) work on NumPy and torch states alike.
    n_steps : int
    churn : float
        Noise scale in ``(0, inf)`` (meaning set by ``protocol``; :class:`ChurnSchedule`).
    kind : {"sde", "ddim"}
    protocol : {"default", "paper"}

    Returns
    -------
    PlainKernel
        ``.mean(k, x)``, ``.std(k)``, ``.first_stochastic``, ``.stop``, ``.dim``.

    Notes
    -----
    ``x_{k+1} ~ N(a_k x_k + b_k u(x_k, s_k), sigma_k^2 I)`` for ``first_stochastic <= k < stop``,
    the chain started ``N(0, I_d)`` at ``first_stochastic``; see :class:`ChurnSchedule` and
    ``proofs/P9-tree-exactness.md`` section 2.

    >>> from rass_theory import diffusion
    >>> tgt = diffusion.GaussianMixture.random(dim=4, n_components=2, seed=0)
    >>> kernel = diffusion.plain_kernel(tgt, n_steps=30, churn=0.06, protocol="paper")
    >>> kernel.first_stochastic, kernel.stop, kernel.dim
    (1, 29, 4)
    """
    return PlainKernel(target, ChurnSchedule(n_steps, churn, kind=kind, protocol=protocol))
