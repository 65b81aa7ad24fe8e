"""Torch velocity models for the samplers: adapters and a small learned model shipped as data.

* :func:`from_velocity` -- a plain velocity callable ``fn(x, s)``;
* :func:`from_edm_denoiser` -- an EDM denoiser ``D(x, t)`` converted to a flow-matching velocity;
* :func:`from_diffusers` -- a diffusers network with its ``FlowMatchEulerDiscreteScheduler`` or
  EDM scheduler (optional extra: ``pip install rass_theory[diffusers]``);
* :func:`from_gaussian_mixture` -- the analytic NumPy Gaussian mixture, on tensors;
* :func:`digits_flow` -- a flow-matching MLP trained on scikit-learn's 8x8 digits (``dim = 64``);
* :func:`mnist_unet` -- a small UNet trained on MNIST 28x28 (``dim = 784``, ``image_shape = (1, 28, 28)``;
  data from the ``images`` extra: ``pip install rass_theory[images]``).

All return a :class:`VelocityModel` (``dim``, ``image_shape``, ``velocity(x, s)`` on flattened
states, output validation).  Importing this package imports torch; ``import rass_theory`` does not.
"""
from __future__ import annotations

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=["adapters", "digits", "diffusers_adapter", "mnist_data", "mnist_model", "mnist_classifier",
                "mnist_quality"],
    submod_attrs={
        "adapters": ["VelocityModel", "ModelOutputError", "from_velocity", "from_edm_denoiser",
                     "from_gaussian_mixture", "edm_to_flow"],
        "diffusers_adapter": ["from_diffusers"],
        "digits": ["digits_flow"],
        "mnist_model": ["mnist_unet", "MnistUNet", "WeightsMismatchError"],
        "mnist_data": ["load_mnist_split"],
        "mnist_quality": ["mnist_quality", "MnistQuality"],
    },
)
