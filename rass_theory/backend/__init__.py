"""Array namespaces: one set of verifier kernels for NumPy arrays and torch tensors.

The POT pattern (``ot.backend``): a kernel asks the inputs for their namespace,
``nx = get_backend(children)``, and writes every array operation as ``nx.op(...)``.  The
namespace holds only the operations the kernels of :mod:`rass_theory.verifiers.kernels` need,
with one meaning on both back ends:

- float64 math: ``log``, ``exp``, ``expm1``, ``log1p``, ``sqrt``, ``abs``, ``logaddexp``,
  ``isfinite``, ``log_ndtr``, ``ndtr``, ``ndtri``, ``erfcx``, ``logsumexp``, ``where``,
  ``minimum``, ``maximum``, ``clip``, ``cumsum``, ``count_true``, ``sort``;
- one bracketed root finder, ``find_root(fun, a, b, args=...)``: NumPy by Chandrupatla's method
  (:func:`chandrupatla`, the iteration of :func:`scipy.optimize.elementwise.find_root` without its
  per-iteration framework; per-element convergence and status), torch with fixed
  iteration counts (bisection, then Illinois steps) and no host synchronisation;
- indexing: ``argsort`` (stable), ``take_along`` (``x[i, idx[i]]``), ``take_rows`` (copies of
  ``children[i, idx[i]]``, bit for bit), ``gather`` (``x[i, idx[i, j]]``), ``first_true``, ``row_slots``,
  ``count_below``, ``rows_where`` and ``unique_rows`` (the indices of a mask / the distinct rows,
  or ``None`` on an accelerator, where reading them would synchronise the device with the
  host), ``add_rows``, ``copy``, ``cast``, ``is_float32``, ``concat``, ``stack``;
- creation: ``zeros_index``, ``index_constant``, ``arange``, ``constant``, ``full``, ``linspace``;
- projection: ``project`` (``<children[i, k], e[i]>`` in float64), ``rowdot``;
- randomness: ``normal``, ``uniform`` (NumPy: ``Generator.random``, in ``[0, 1)``; torch:
  ``1 - rand``, in ``(0, 1]``; both are exact uniforms for every decision the kernels make).

``import rass_theory.backend`` does not import torch: the torch namespace is built the first
time a tensor is seen.
"""
from __future__ import annotations

import sys

from ._numpy import NUMPY, NumpyBackend, RootResult, chandrupatla

__all__ = ["get_backend", "NumpyBackend", "NUMPY", "NAMES", "chandrupatla", "RootResult"]

#: The array back ends, by name: the one list that verifiers, mutants, the samplers and the Dask
#: runner's ``inner`` check names against.
NAMES = ("numpy", "torch")

_TORCH = None


def _torch_backend():
    global _TORCH
    if _TORCH is None:
        from ._torch import TorchBackend

        _TORCH = TorchBackend()
    return _TORCH


def get_backend(*arrays):
    """The namespace of ``arrays``: :data:`NUMPY` for NumPy arrays, the torch one for tensors.

    Parameters
    ----------
    *arrays
        Arrays of one kind (``None`` entries are skipped).

    Raises
    ------
    TypeError
        When NumPy arrays and torch tensors are mixed.
    """
    torch = sys.modules.get("torch")
    kinds = set()
    for a in arrays:
        if a is None:
            continue
        kinds.add("torch" if torch is not None and isinstance(a, torch.Tensor) else "numpy")
    if len(kinds) > 1:
        raise TypeError("arrays mix NumPy arrays and torch tensors; pass one kind")
    return _torch_backend() if kinds == {"torch"} else NUMPY
