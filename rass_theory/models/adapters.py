"""Velocity-model adapters: any network -> ``dim`` + ``velocity(x, s)`` on flattened torch states.

Every sampler of the toolkit works on flattened states ``x`` of shape ``(n, dim)`` and the
flow-matching velocity ``u(x, s) = E[xi - x0 | x_s = x]`` of the interpolant
``x_s = (1 - s) x0 + s xi`` (``s = 1`` noise, ``s = 0`` data).  The adapters here turn a plain
velocity callable, an EDM denoiser or a Gaussian mixture into a :class:`VelocityModel`, which
reshapes to the model's image shape, calls it, and validates what comes back.
"""
from __future__ import annotations

import math
import numbers

import torch

__all__ = ["VelocityModel", "ModelOutputError", "from_velocity", "from_edm_denoiser",
           "from_gaussian_mixture", "edm_to_flow"]


class ModelOutputError(ValueError):
    """A wrapped model returned something the sampler cannot use (shape, dtype, device, NaN/inf)."""


def _check_dim(dim) -> int:
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    return int(dim)


def _check_image_shape(image_shape, dim):
    if image_shape is None:
        return None
    try:
        shape = tuple(int(v) for v in image_shape)
    except TypeError as exc:
        raise TypeError(f"image_shape must be a sequence of positive integers, got {image_shape!r}") from exc
    if not shape or any(v < 1 for v in shape):
        raise ValueError(f"image_shape must be a non-empty sequence of positive integers, got {image_shape!r}")
    if math.prod(shape) != dim:
        raise ValueError(f"image_shape {shape} holds {math.prod(shape)} values but dim is {dim}")
    return shape


class VelocityModel:
    """A velocity field on flattened states, with output validation.

    Parameters
    ----------
    fn : callable
        ``fn(x, s) -> u``.  ``x`` has shape ``(n, *image_shape)`` (``(n, dim)`` without an image
        shape) and ``s`` is a tensor of shape ``(n,)`` in ``(0, 1]``, both with the state's dtype
        and device; ``u`` must have the shape, dtype and device of ``x``.
    dim : int
    image_shape : tuple of int, optional
        The model's per-sample tensor shape (e.g. ``(3, 32, 32)``); its product must be ``dim``.
    name : str
        Used in error messages.
    dtype, device : optional
        The model's native dtype and device (the samplers default to them); taken from
        ``module``'s first parameter when a module is given.
    module : torch.nn.Module, optional
        The wrapped network (kept for ``.to``-style inspection; not required).

    Notes
    -----
    Every call checks the output's shape, dtype and device against the input and raises
    :class:`ModelOutputError` naming the model and the call.  Finiteness needs the values: on
    the CPU it is checked at once; on an accelerator the check is folded into a device flag that
    the torch samplers read at their one synchronisation per round (:meth:`raise_pending`), so
    the hot path never waits for the device.
    """

    def __init__(self, fn, dim, image_shape=None, name=None, dtype=None, device=None, module=None):
        if not callable(fn):
            raise TypeError(f"fn must be callable (x, s) -> velocity, got {type(fn).__name__}")
        self.fn = fn
        self.dim = _check_dim(dim)
        self.image_shape = _check_image_shape(image_shape, self.dim)
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.module = module
        param = None
        if module is not None:
            param = next(iter(module.parameters()), None)
        self.dtype = dtype if dtype is not None else (param.dtype if param is not None else None)
        self.device = torch.device(device) if device is not None else (param.device if param is not None else None)
        self.n_calls = 0
        self._pending = None          # (flag tensor, first bad call) for accelerator devices

    def __repr__(self):
        return f"VelocityModel(name={self.name!r}, dim={self.dim}, image_shape={self.image_shape})"

    def velocity(self, x: torch.Tensor, s) -> torch.Tensor:
        """``u(x, s)`` for flattened states ``x`` (n, dim) and ``s`` scalar or (n,)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{self.name}: x must be a torch.Tensor of shape (n, {self.dim}), got {type(x).__name__}")
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"{self.name}: x must have shape (n, {self.dim}), got {tuple(x.shape)}")
        n = x.shape[0]
        s = torch.as_tensor(s, dtype=x.dtype, device=x.device)
        if s.ndim == 0:
            s = s.expand(n)
        if tuple(s.shape) != (n,):
            raise ValueError(f"{self.name}: s must be a scalar or have shape (n,) = {(n,)}, got {tuple(s.shape)}")
        xin = x if self.image_shape is None else x.reshape(n, *self.image_shape)
        self.n_calls += 1
        call = f"call {self.n_calls} (batch {n})"
        with torch.no_grad():
            out = self.fn(xin, s)
        out = getattr(out, "sample", out)            # diffusers-style output objects
        if isinstance(out, tuple):
            out = out[0]
        if not isinstance(out, torch.Tensor):
            raise ModelOutputError(f"model {self.name!r}, {call}: returned {type(out).__name__}, expected a torch.Tensor")
        if out.device != x.device:
            raise ModelOutputError(f"model {self.name!r}, {call}: output is on device {out.device} but the input "
                                   f"is on {x.device}; the model must run on the states' device")
        if out.dtype != x.dtype:
            raise ModelOutputError(f"model {self.name!r}, {call}: output dtype {out.dtype} differs from the input "
                                   f"dtype {x.dtype}; run the model in the sampler's dtype (or pass dtype=)")
        if tuple(out.shape) != tuple(xin.shape):
            raise ModelOutputError(f"model {self.name!r}, {call}: output shape {tuple(out.shape)} differs from "
                                   f"the input shape {tuple(xin.shape)}")
        out = out.reshape(n, self.dim)
        finite = torch.isfinite(out).all()
        if x.device.type == "cpu":
            if not bool(finite):
                raise ModelOutputError(f"model {self.name!r}, {call}: returned non-finite velocities (NaN or inf)")
        elif self._pending is None:
            self._pending = (~finite, call)
        else:
            self._pending = (self._pending[0] | ~finite, self._pending[1])
        return out

    def pop_pending(self):
        """``(flag, first_call)`` of the finiteness checks not yet read, or None; resets them.

        ``flag`` is a 0-d bool tensor on the device (True: some output was non-finite); a sampler
        can copy it to the host together with its own per-round data (one synchronisation).
        """
        pending, self._pending = self._pending, None
        return pending

    def nonfinite_error(self, first_call) -> ModelOutputError:
        return ModelOutputError(f"model {self.name!r}: returned non-finite velocities (NaN or inf) in a call "
                                f"at or after {first_call}")

    def raise_pending(self) -> None:
        """Raise if a call since the last check returned non-finite values (reads a device flag)."""
        pending = self.pop_pending()
        if pending is not None and bool(pending[0]):
            raise self.nonfinite_error(pending[1])


def from_velocity(fn, dim, image_shape=None, name=None, dtype=None, device=None) -> VelocityModel:
    """Wrap a velocity callable ``fn(x, s) -> u`` (see :class:`VelocityModel`).

    >>> import torch
    >>> m = from_velocity(lambda x, s: x, dim=4)
    >>> m.velocity(torch.ones(2, 4), 0.5).shape
    torch.Size([2, 4])
    """
    return VelocityModel(fn, dim, image_shape=image_shape, name=name, dtype=dtype, device=device,
                         module=fn if isinstance(fn, torch.nn.Module) else None)


def edm_to_flow(s: torch.Tensor, sigma_max: float = float("inf")):
    """EDM noise level and input scale for flow-matching time ``s``.

    Returns ``(t, scale)`` with ``t = min(s / (1 - s), sigma_max)`` and ``scale = 1 + t``, so that
    the EDM input is ``x_edm = scale * x_s``.  See :func:`from_edm_denoiser`.
    """
    t = s / (1.0 - s).clamp_min(torch.finfo(s.dtype).tiny)
    if math.isfinite(sigma_max):
        t = t.clamp(max=sigma_max)
    return t, 1.0 + t


def from_edm_denoiser(denoiser, dim, image_shape=None, sigma_max: float = 80.0, name=None,
                      dtype=None, device=None) -> VelocityModel:
    """Flow-matching velocity from an EDM denoiser ``D(x_edm, t) ~ E[x0 | x0 + t n = x_edm]``.

    Parameters
    ----------
    denoiser : callable
        ``denoiser(x_edm, t)`` with ``x_edm`` of shape ``(n, *image_shape)`` and ``t`` of shape
        ``(n,)`` (EDM's ``sigma``), returning the denoised estimate of ``x0`` (EDM's
        preconditioned ``D``: ``c_skip x + c_out F(c_in x, c_noise)`` inside the callable).
    dim, image_shape, name, dtype, device
        As in :class:`VelocityModel`.
    sigma_max : float
        The largest noise level the network was trained on (EDM: 80).

    Notes
    -----
    The interpolant ``x_s = (1 - s) x0 + s xi`` divided by ``1 - s`` is EDM's variance-exploding
    state ``x_edm = x0 + t xi`` with ``t = s / (1 - s)``, so
    ``E[x0 | x_s] = D(x_s / (1 - s), s / (1 - s))`` and, since ``xi - x0 = (x_s - x0) / s``,

        u(x_s, s) = (x_s - D((1 + t) x_s, t)) / s,      t = s / (1 - s),   1 + t = 1 / (1 - s).

    This is the conversion the D-GRS and RASS papers use to run EDM networks in their
    flow-matching samplers.  For ``s > sigma_max / (1 + sigma_max)`` (``s = 1`` included, where
    ``t`` is infinite) the network is evaluated at ``t = sigma_max`` with input
    ``(1 + sigma_max) x_s``: outside its training range the model has no better answer, and any
    velocity keeps speculative sampling exact (``proofs/P9-tree-exactness.md``).
    """
    if not callable(denoiser):
        raise TypeError(f"denoiser must be callable (x, t) -> x0_hat, got {type(denoiser).__name__}")
    sigma_max = float(sigma_max)
    if not sigma_max > 0:
        raise ValueError(f"sigma_max must be > 0, got {sigma_max}")
    label = name or getattr(denoiser, "__name__", type(denoiser).__name__)

    def velocity(x, s):
        t, scale = edm_to_flow(s, sigma_max)
        shape = (-1,) + (1,) * (x.ndim - 1)
        x0_hat = denoiser(x * scale.reshape(shape), t)
        x0_hat = getattr(x0_hat, "sample", x0_hat)
        if isinstance(x0_hat, torch.Tensor) and x0_hat.shape == x.shape:
            return (x - x0_hat) / s.reshape(shape)
        return x0_hat                       # let VelocityModel report the wrong output

    return VelocityModel(velocity, dim, image_shape=image_shape, name=label, dtype=dtype, device=device,
                         module=denoiser if isinstance(denoiser, torch.nn.Module) else None)


def from_gaussian_mixture(mixture, name: str = "gaussian_mixture") -> VelocityModel:
    """The analytic velocity of a NumPy :class:`~rass_theory.diffusion.GaussianMixture` on tensors.

    Evaluates in float64 on the host (each call copies the states off and back to their device),
    so it is a reference target for testing the torch samplers against the NumPy ones, not a
    fast one.
    """
    if not (hasattr(mixture, "velocity") and hasattr(mixture, "dim")):
        raise TypeError(f"mixture must have .dim and .velocity(x, s), got {type(mixture).__name__}")

    def velocity(x, s):
        u = mixture.velocity(x.detach().cpu().double().numpy(), s.detach().cpu().double().numpy())
        return torch.as_tensor(u, dtype=x.dtype, device=x.device)

    return VelocityModel(velocity, mixture.dim, name=name, dtype=torch.float64, device="cpu")
