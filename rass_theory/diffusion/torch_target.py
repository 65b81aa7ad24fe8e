"""A target as a torch velocity model (the torch sampler's and the kernel's view of a target)."""
from __future__ import annotations

from ._checks import check_target
from .mixture import GaussianMixture

__all__ = ["as_torch_target"]


def as_torch_target(target):
    """The target as a torch velocity model; a NumPy Gaussian mixture is wrapped (float64, host).

    Anything with ``dim`` and ``velocity(x, s)`` on tensors is returned unchanged.  Importing
    this module does not import torch; wrapping a mixture does.
    """
    if isinstance(target, GaussianMixture):
        from ..models.adapters import from_gaussian_mixture

        return from_gaussian_mixture(target)
    return check_target(target)
