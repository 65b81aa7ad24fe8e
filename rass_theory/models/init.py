"""Seeded parameter initialisation without touching torch's global random state.

``torch.nn`` layers draw their initial parameters from the global generator, so reproducing a
network usually means ``torch.manual_seed``, which changes the random state of every other user
in the process.  :func:`init_parameters_` redraws the parameters from an explicit
``torch.Generator`` instead, with the same laws as PyTorch's defaults.
"""
from __future__ import annotations

import math

import torch

__all__ = ["init_parameters_"]


@torch.no_grad()
def init_parameters_(module: torch.nn.Module, generator: torch.Generator) -> torch.nn.Module:
    """Redraw ``module``'s random parameters from ``generator``, in place; return ``module``.

    Parameters
    ----------
    module : torch.nn.Module
    generator : torch.Generator
        On the parameters' device.

    Notes
    -----
    Every submodule with a ``weight`` of two or more dimensions (``Linear``, ``ConvNd``, ...) gets
    ``weight, bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))``: the law of PyTorch's default
    ``kaiming_uniform_(a=sqrt(5))`` initialisation, whose bound is ``sqrt(2/(1+5)) sqrt(3/fan_in)``.
    ``Embedding`` weights get ``N(0, 1)``, also the default.  Other parameters (normalisation
    scales and shifts) have deterministic defaults and are left as they are.
    """
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    for sub in module.modules():
        weight = getattr(sub, "weight", None)
        if not isinstance(weight, torch.nn.Parameter):
            continue
        if isinstance(sub, torch.nn.Embedding):
            weight.normal_(generator=generator)
        elif weight.dim() >= 2:
            bound = 1.0 / math.sqrt(weight[0].numel())
            weight.uniform_(-bound, bound, generator=generator)
            bias = getattr(sub, "bias", None)
            if isinstance(bias, torch.nn.Parameter):
                bias.uniform_(-bound, bound, generator=generator)
    return module
