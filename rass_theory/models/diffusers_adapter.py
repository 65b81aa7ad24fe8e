"""Adapter for diffusers networks: a flow-matching transformer/UNet or an EDM-preconditioned UNet.

diffusers is an optional dependency (``pip install rass_theory[diffusers]``); it is imported
only when a scheduler needs to be recognised, and a missing install names the extra.
"""
from __future__ import annotations

import math

import torch

from .adapters import VelocityModel, edm_to_flow

__all__ = ["from_diffusers"]

_EXTRA_HINT = "diffusers is not installed; install the optional extra with `pip install rass_theory[diffusers]`"


def _require_diffusers():
    try:
        import diffusers  # noqa: F401
    except ImportError as exc:
        raise ImportError(_EXTRA_HINT) from exc
    return diffusers


def _broadcast_kwargs(kwargs: dict, n: int) -> dict:
    """Repeat conditioning tensors with a leading batch of 1 to the call's batch ``n``."""
    out = {}
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == 1 and n != 1:
            value = value.expand(n, *value.shape[1:])
        out[key] = value
    return out


def _scheduler_kind(scheduler) -> str:
    diffusers = _require_diffusers()
    flow = (diffusers.FlowMatchEulerDiscreteScheduler,)
    edm = tuple(getattr(diffusers, n) for n in ("EDMEulerScheduler", "EDMDPMSolverMultistepScheduler")
                if hasattr(diffusers, n))
    if isinstance(scheduler, flow):
        return "flow"
    if isinstance(scheduler, edm):
        return "edm"
    raise TypeError(f"scheduler must be a diffusers FlowMatchEulerDiscreteScheduler or an EDM scheduler "
                    f"(EDMEulerScheduler, EDMDPMSolverMultistepScheduler), got {type(scheduler).__name__}")


def from_diffusers(model, scheduler, image_shape=None, model_kwargs=None, name=None) -> VelocityModel:
    """Wrap a diffusers model and its scheduler as a flow-matching velocity model.

    Parameters
    ----------
    model : torch.nn.Module
        A diffusers network called as ``model(sample, timestep=..., **model_kwargs,
        return_dict=False)`` returning a tuple whose first entry is the prediction
        (``UNet2DModel``, ``SD3Transformer2DModel``, ...).
    scheduler : diffusers scheduler
        ``FlowMatchEulerDiscreteScheduler``: the model predicts the flow-matching velocity
        ``noise - x0`` at ``sigma = s`` and is called with ``timestep = s * num_train_timesteps``
        (how diffusers' SD3 pipeline calls it).  ``EDMEulerScheduler`` /
        ``EDMDPMSolverMultistepScheduler``: the model is EDM-preconditioned; the denoiser
        ``D(x, t) = precondition_outputs(x, model(precondition_inputs(x, t), precondition_noise(t)), t)``
        is converted with :func:`~rass_theory.models.from_edm_denoiser`'s formula (``sigma_max``
        from the scheduler's config).  The scheduler's own time grid is not used: the toolkit's
        samplers bring their grid, and only the velocity field is taken from the model.
    image_shape : tuple of int, optional
        Per-sample tensor shape; default ``(in_channels, sample_size, sample_size)`` from the
        model's config.
    model_kwargs : dict, optional
        Extra keyword arguments for every call (e.g. ``encoder_hidden_states`` and
        ``pooled_projections`` for SD3).  Tensors with a leading batch dimension of 1 are
        broadcast to the call's batch.
    name : str, optional
        Default: the model's class name.

    Returns
    -------
    VelocityModel
        ``dtype`` and ``device`` are the model's; a float16/bfloat16 model gets float32 states
        (the samplers' kernels and verifiers need float32 or float64) and is called in its own
        dtype, its output cast back to float32.

    Notes
    -----
    Flow matching: ``u(x, s) = model(x, 1000 s)``.  EDM: with ``t = s / (1 - s)``,
    ``u(x, s) = (x - D(x / (1 - s), t)) / s`` (``t`` clamped at ``sigma_max``; see
    :func:`~rass_theory.models.from_edm_denoiser`).
    """
    kind = _scheduler_kind(scheduler)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a diffusers model), got {type(model).__name__}")
    cfg = getattr(model, "config", {})
    if image_shape is None:
        try:
            size = cfg["sample_size"]
            size = (size, size) if isinstance(size, int) else tuple(size)
            image_shape = (int(cfg["in_channels"]),) + tuple(int(v) for v in size)
        except (KeyError, TypeError) as exc:
            raise ValueError("image_shape could not be read from the model config "
                             "(in_channels, sample_size); pass image_shape=") from exc
    dim = math.prod(image_shape)
    extra = dict(model_kwargs or {})
    label = name or type(model).__name__
    n_train = float(scheduler.config.num_train_timesteps)

    if kind == "flow":
        def velocity(x, s):
            return model(x, timestep=s * n_train, **_broadcast_kwargs(extra, x.shape[0]), return_dict=False)[0]
    else:
        sigma_max = float(scheduler.config.sigma_max)

        def velocity(x, s):
            t, scale = edm_to_flow(s, sigma_max)
            shape = (-1,) + (1,) * (x.ndim - 1)
            x_edm = x * scale.reshape(shape)
            tt = t.reshape(shape)
            out = model(scheduler.precondition_inputs(x_edm, tt), timestep=scheduler.precondition_noise(t),
                        **_broadcast_kwargs(extra, x.shape[0]), return_dict=False)[0]
            if not (isinstance(out, torch.Tensor) and out.shape == x.shape):
                return out
            x0_hat = scheduler.precondition_outputs(x_edm, out, tt)
            return (x - x0_hat) / s.reshape(shape)

    param = next(iter(model.parameters()), None)
    model_dtype = param.dtype if param is not None else torch.float32
    if model_dtype in (torch.float32, torch.float64):
        return VelocityModel(velocity, dim, image_shape=image_shape, name=label, module=model)

    def half_velocity(x, s):          # half-precision network: float32 states, the call in its dtype
        return velocity(x.to(model_dtype), s.to(model_dtype)).to(x.dtype)

    return VelocityModel(half_velocity, dim, image_shape=image_shape, name=label, dtype=torch.float32,
                         device=param.device)
