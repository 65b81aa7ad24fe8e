"""Torch inputs of the verifiers: metadata-only checks, the rank-1 frame, the result type.

The node batch, the projection and the rebuild are the shared ones of
:mod:`rass_theory.verifiers._core` (``nx`` = the torch namespace); this module holds what is
torch's own: validation *from metadata only* (shapes, dtypes, devices -- reading values would
synchronise an accelerator with the host), generators, :class:`TorchVerifierResult`, and the
choice of engine for CPU tensors (:func:`cpu_engine`: by default the kernel verifiers decide them
on NumPy views, :func:`rass_theory.verifiers._batch.prepare_arrays`).  Proof ``P1-rank1-reduction``.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch

from ..backend import get_backend
from ..frame import degenerate_tolerance
from ._batch import NodeBatch, finish, prepare_arrays, project_children
from ._result import VerifierResult

__all__ = ["TorchVerifierResult", "prepare", "finish", "as_torch_generator", "cpu_engine", "CPU_ENGINES",
           "SUPPORTED_DTYPES", "COMPUTE_DTYPE"]

SUPPORTED_DTYPES = (torch.float32, torch.float64)


#: the frame and every decision are computed in this dtype for float32 and float64 inputs alike
COMPUTE_DTYPE = torch.float64


@dataclass(frozen=True)
class TorchVerifierResult(VerifierResult):
    """Output of one torch verification call (the verifier contract of ``docs/ARCHITECTURE.md`` on tensors).

    The NumPy :class:`rass_theory.verifiers.VerifierResult` with tensor fields; ``n_accepted`` and
    ``acceptance_rate`` synchronise with the device.

    Attributes
    ----------
    states : Tensor (n, d)
        Committed states, dtype and device of the children.
    accepted : Tensor (n,) of bool
    child_index : Tensor (n,) of int64
        Committed child (drafting order), ``-1`` where not accepted.

    Notes
    -----
    Where ``accepted[i]``, ``states[i]`` is bit-for-bit ``children[i, child_index[i]]``.
    """

    states: torch.Tensor
    accepted: torch.Tensor
    child_index: torch.Tensor

    def numpy(self) -> VerifierResult:
        """The same result as NumPy arrays (a :class:`rass_theory.verifiers.VerifierResult`)."""
        return VerifierResult(self.states.detach().cpu().numpy(), self.accepted.detach().cpu().numpy(),
                              self.child_index.detach().cpu().numpy())


def _same_device(a: torch.device, b: torch.device) -> bool:
    if a.type != b.type:
        return False
    ia = a.index if a.index is not None else (torch.cuda.current_device() if a.type == "cuda" else 0)
    ib = b.index if b.index is not None else (torch.cuda.current_device() if b.type == "cuda" else 0)
    return ia == ib


def as_torch_generator(rng, device: torch.device) -> torch.Generator:
    """Normalise ``rng`` (None, int or ``torch.Generator``) to a generator on ``device``.

    ``None`` gives a fresh generator seeded from the OS entropy (``Generator.seed()``), an int
    a generator seeded with it; a generator on another device is a ``ValueError``.
    """
    if isinstance(rng, torch.Generator):
        if not _same_device(rng.device, device):
            raise ValueError(f"rng is a torch.Generator on device {rng.device}, but the inputs are on {device}; "
                             f"create it with torch.Generator(device={str(device)!r})")
        return rng
    if rng is None:
        gen = torch.Generator(device=device)
        gen.seed()
        return gen
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        gen = torch.Generator(device=device)
        gen.manual_seed(int(rng) % (2 ** 64))
        return gen
    raise TypeError(f"rng must be None, an int or a torch.Generator, got {type(rng).__name__}")


def _check_tensor(value, name: str, ndim: int) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__} "
                        f"(use rass_theory.verifiers for NumPy arrays)")
    if value.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} must have dtype torch.float32 or torch.float64, got {value.dtype}")
    if value.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(value.shape)}")
    return value


#: Where a kernel verifier decides CPU tensors: ``"numpy"`` (the law engine on NumPy views of
#: the tensors, :class:`rass_theory.backend._torch.TorchHostBackend`) or ``"torch"`` (the torch
#: namespace, as on an accelerator).  Set it with :func:`cpu_engine` (per thread and task: a
#: context variable).
CPU_ENGINES = ("numpy", "torch")
_cpu_engine: contextvars.ContextVar = contextvars.ContextVar("rass_theory_cpu_engine", default="numpy")


@contextlib.contextmanager
def cpu_engine(name: str):
    """Decide CPU tensors with the engine ``name`` (``"numpy"``, the default, or ``"torch"``) inside the block.

    Both draw the same uniforms from the caller's generator and make the same decisions; the
    states agree to rounding (the parity tests run both).  ``"torch"`` runs the kernels'
    accelerator code on the CPU, which is how the test suite covers it on a machine without a GPU.
    The setting is a context variable: other threads (which start from the default) keep theirs.
    """
    if name not in CPU_ENGINES:
        raise ValueError(f"name must be one of {CPU_ENGINES}, got {name!r}")
    token = _cpu_engine.set(name)
    try:
        yield
    finally:
        _cpu_engine.reset(token)


def _tensor_result(states, accepted, child_index) -> "TorchVerifierResult":
    """A :class:`TorchVerifierResult` of the NumPy arrays of the host path (sharing their memory)."""
    return TorchVerifierResult(torch.from_numpy(states), torch.from_numpy(accepted),
                               torch.from_numpy(child_index.astype(np.int64, copy=False)))


def prepare(children, mu_draft, mu_target, sigma, rng, *, K: int | None = None, host: bool = False) -> NodeBatch:
    """Validate the contract's inputs (metadata only) and project the children.

    Raises ``TypeError``/``ValueError`` naming the argument: non-tensors, unsupported dtypes,
    a dtype or device that differs from ``children``'s, wrong shapes, a non-positive scalar
    ``sigma``, a generator on another device, or a ``K`` the rule does not support.

    ``host``: on the CPU device, with the ``"numpy"`` :func:`cpu_engine`, the batch holds NumPy
    views of the tensors (:func:`rass_theory.verifiers._batch.prepare_arrays`, which also checks
    their values: NaN or infinite inputs raise ``ValueError`` as on NumPy), its namespace draws
    from ``rng`` as the torch one does, and its result is a :class:`TorchVerifierResult`.
    """
    children = _check_tensor(children, "children", 3)
    mu_draft = _check_tensor(mu_draft, "mu_draft", 2)
    mu_target = _check_tensor(mu_target, "mu_target", 2)
    n, k, d = children.shape
    dtype, device = children.dtype, children.device
    for name, t in (("mu_draft", mu_draft), ("mu_target", mu_target)):
        if t.dtype != dtype:
            raise ValueError(f"{name} has dtype {t.dtype} but children has {dtype}; all tensors must share one dtype")
        if not _same_device(t.device, device):
            raise ValueError(f"{name} is on device {t.device} but children is on {device}")
        if tuple(t.shape) != (n, d):
            raise ValueError(f"{name} must have shape (n, d) = {(n, d)} to match children, got {tuple(t.shape)}")
    if k < 1:
        raise ValueError("children must hold at least one child per node (K >= 1)")
    if K is not None and k != K:
        raise ValueError(f"children must have K = {K} children per node for this rule, got K = {k}")
    if isinstance(sigma, torch.Tensor):
        if sigma.dtype != dtype:
            raise ValueError(f"sigma has dtype {sigma.dtype} but children has {dtype}")
        if not _same_device(sigma.device, device):
            raise ValueError(f"sigma is on device {sigma.device} but children is on {device}")
        if sigma.ndim == 0:
            sig = sigma.expand(n)
        elif tuple(sigma.shape) == (n,):
            sig = sigma
        else:
            raise ValueError(f"sigma must be a scalar or have shape (n,) = {(n,)}, got {tuple(sigma.shape)}")
    elif isinstance(sigma, numbers.Real) and not isinstance(sigma, bool):
        if not (math.isfinite(float(sigma)) and float(sigma) > 0):
            raise ValueError(f"sigma must be finite and > 0, got {sigma}")
        sig = torch.full((n,), float(sigma), dtype=dtype, device=device)
    else:
        raise TypeError(f"sigma must be a real number or a torch.Tensor, got {type(sigma).__name__}")
    gen = as_torch_generator(rng, device)
    if host and device.type == "cpu" and _cpu_engine.get() == "numpy":
        from ..backend._torch import TORCH_HOST

        views = [t.detach().numpy() for t in (children, mu_draft, mu_target)]
        return prepare_arrays(*views, sig.detach().to(COMPUTE_DTYPE).numpy(), gen, K=K, nx=TORCH_HOST,
                              result=_tensor_result)
    nx = get_backend(children)

    # the frame, the projection and every decision in float64 (float32 inputs are exact there)
    f64 = COMPUTE_DTYPE
    md = mu_draft.to(f64)
    sig = sig.to(f64)
    direction = torch.sub(mu_target.to(f64), md)            # a fresh tensor: normalised in place
    norm = torch.linalg.vector_norm(direction, dim=1)
    # rows whose norm under- or overflowed are rescaled by their largest entry, as in NumPy
    # (rass_theory.frame): a displacement of (1e300, -1e300) keeps a unit direction and a finite delta
    rescale = ~((norm > math.sqrt(torch.finfo(f64).tiny)) & torch.isfinite(norm))
    if d > 0 and nx.maybe_any(rescale):      # read on the CPU only; an accelerator always rescales
        scale = torch.where(rescale, direction.abs().amax(dim=1), torch.ones_like(norm))
        scale = torch.where(scale > 0, scale, torch.ones_like(norm))
        direction.div_(scale[:, None])
        scaled_norm = torch.linalg.vector_norm(direction, dim=1)
        norm = torch.where(rescale, scale * scaled_norm, norm)
    else:
        scaled_norm = norm
    zero = norm == 0
    direction.div_(torch.where(zero, torch.ones_like(norm), torch.where(rescale, scaled_norm, norm))[:, None])
    if d > 0:  # zero displacement: e = e_1, as in NumPy (rass_theory.frame); O(n), no host sync
        direction[:, 0] += zero.to(f64)
    delta = norm / sig
    degenerate = delta <= degenerate_tolerance()     # sqrt(eps_float64) for every input dtype, as in NumPy
    s = project_children(nx, children, md, direction, sig)
    return NodeBatch(nx, children, md, sig, direction, delta, degenerate, s, gen, TorchVerifierResult)
