"""The torch namespace of :mod:`rass_theory.backend` (device follows the inputs)."""
from __future__ import annotations

import numpy as np
import torch

from ._numpy import NumpyBackend


class TorchBackend:
    """Array operations of the verifier kernels on torch tensors (float64 math).

    Nothing here reads a value on the host except :meth:`rows_where` on the CPU device, where
    indexing costs no synchronisation; on an accelerator it returns ``None`` and the kernels
    compute every row and merge with ``where`` instead.
    """

    name = "torch"
    inputs = "torch"
    float64 = torch.float64

    exp = staticmethod(torch.exp)
    expm1 = staticmethod(torch.expm1)
    log1p = staticmethod(torch.log1p)
    sqrt = staticmethod(torch.sqrt)
    abs = staticmethod(torch.abs)
    logaddexp = staticmethod(torch.logaddexp)
    isfinite = staticmethod(torch.isfinite)
    log_ndtr = staticmethod(torch.special.log_ndtr)

    @staticmethod
    def log(x):
        """``log x``; float64 CPU tensors through NumPy's vectorised ``log`` on a shared view (torch's
        CPU ``log`` is several times slower, ``bench/torch_cpu_ops.py``), without NumPy's warnings."""
        if x.device.type == "cpu" and x.dtype == torch.float64 and not x.requires_grad:
            with np.errstate(divide="ignore", invalid="ignore"):
                return torch.from_numpy(np.log(x.numpy()))
        return torch.log(x)

    @staticmethod
    def ndtr(x):
        """``Phi(x) = erfc(-x / sqrt 2) / 2``: relative accuracy in the lower tail, where
        ``torch.special.ndtr`` cancels (relative error 4e-11 at -5, total at -12)."""
        return 0.5 * torch.special.erfc(x * -0.7071067811865476)

    ndtri = staticmethod(torch.special.ndtri)
    erfcx = staticmethod(torch.special.erfcx)

    @staticmethod
    def maximum(a, b):
        return torch.clamp(a, min=b) if not isinstance(b, torch.Tensor) else torch.maximum(a, b)

    erf = staticmethod(torch.special.erf)
    erfc = staticmethod(torch.special.erfc)

    @staticmethod
    def maybe_any(mask) -> bool:
        """``mask.any()`` read on the CPU; True on an accelerator (reading it would synchronise)."""
        return bool(mask.any()) if mask.device.type == "cpu" else True

    @staticmethod
    def zeros_like(x):
        """Float64 zeros of ``x``'s shape, placed like ``x``."""
        return torch.zeros_like(x, dtype=torch.float64)

    @staticmethod
    def host_max(x):
        """``max(x)`` as a Python float on the CPU; ``None`` on an accelerator (a sync)."""
        return float(x.max()) if x.device.type == "cpu" else None

    @staticmethod
    def next_below(x):
        """The largest float64 below ``x``, elementwise."""
        return torch.nextafter(x, torch.full_like(x, -float("inf")))

    @staticmethod
    def clip(x, lo=None, hi=None):
        return torch.clamp(x, min=lo, max=hi)

    @staticmethod
    def minimum(a, b):
        return torch.clamp(a, max=b) if not isinstance(b, torch.Tensor) else torch.minimum(a, b)

    @staticmethod
    def where(cond, a, b):
        return torch.where(cond, a, b)

    @staticmethod
    def logsumexp(x, axis: int):
        return torch.logsumexp(x, dim=axis)

    @staticmethod
    def cumsum(x, axis: int = -1):
        return torch.cumsum(x, dim=axis)

    @staticmethod
    def count_true(mask, axis: int):
        return mask.sum(dim=axis)

    @staticmethod
    def argsort(x, axis: int = 1):
        return torch.argsort(x, dim=axis, stable=True)

    @staticmethod
    def take_along(x, idx):
        return x.gather(1, idx[:, None])[:, 0]

    @staticmethod
    def take_rows(children, idx):
        n, K, d = children.shape
        flat = torch.arange(n, device=children.device) * K + idx
        return children.reshape(n * K, d).index_select(0, flat)

    @staticmethod
    def rows_where(mask):
        """Row indices of ``mask`` on the CPU device; ``None`` on an accelerator (no sync)."""
        if mask.device.type != "cpu":
            return None
        if mask.ndim == 1:                    # NumPy's flatnonzero on a shared view: several times faster
            return torch.from_numpy(np.flatnonzero(mask.numpy()))
        return torch.nonzero(mask)[:, 0]

    @staticmethod
    def add_rows(states, rows, shift):
        states.index_add_(0, rows, shift.to(states.dtype))
        return states

    @staticmethod
    def copy(x):
        return x.clone()

    @staticmethod
    def gather(x, idx):
        return x.gather(1, idx)

    @staticmethod
    def first_true(mask, count: int):
        """Column indices of up to ``count`` True entries per row (no host sync); rows with fewer
        are padded with indices of False entries (check the mask at the returned indices)."""
        count = min(int(count), mask.shape[1])
        m = mask.shape[1]
        col = torch.arange(m, device=mask.device)
        # True columns keep their index, False ones are pushed past m; the smallest `count` win
        key = torch.where(mask, col, col + m)
        idx = torch.topk(key, count, dim=1, largest=False, sorted=True).indices
        return torch.sort(idx, dim=1).values

    @staticmethod
    def row_slots(rows, cols, n: int, count: int, flags=None):
        """The first ``count`` columns of each row from ``(row, col)`` pairs sorted by row, then
        col: ``(cell, valid, flag)`` as in the NumPy back end (called where indexing is free)."""
        counts = torch.bincount(rows, minlength=n)
        rank = torch.arange(rows.shape[0], device=rows.device) - torch.repeat_interleave(
            torch.cumsum(counts, 0) - counts, counts)
        keep = rank < count
        r, k = rows[keep], rank[keep]
        cell = torch.zeros((n, count), dtype=torch.int64, device=rows.device)
        cell[r, k] = cols[keep]
        valid = torch.zeros((n, count), dtype=torch.bool, device=rows.device)
        valid[r, k] = True
        flag = None
        if flags is not None:
            flag = torch.zeros((n, count), dtype=torch.bool, device=rows.device)
            flag[r, k] = flags[keep]
        return cell, valid, flag

    @staticmethod
    def count_below(sorted_rows, values):
        return (sorted_rows < values[:, None]).sum(dim=1)

    @staticmethod
    def sort(x, axis: int = -1):
        return torch.sort(x, dim=axis).values

    @staticmethod
    def concat(arrays, axis: int = 0):
        return torch.cat(arrays, dim=axis)

    @staticmethod
    def stack(arrays, axis: int = 0):
        return torch.stack(arrays, dim=axis)

    @staticmethod
    def unique_rows(keys):
        """``(first, inverse)`` per distinct row on the CPU; ``None`` on an accelerator (a sync)."""
        if keys.device.type != "cpu":
            return None
        _, inverse = torch.unique(keys, dim=0, return_inverse=True)
        n_groups = int(inverse.max()) + 1 if inverse.numel() else 0
        first = torch.full((n_groups,), keys.shape[0], dtype=torch.int64)
        first.scatter_reduce_(0, inverse, torch.arange(keys.shape[0]), reduce="amin")
        return first, inverse

    @staticmethod
    def linspace(lo: float, hi: float, m: int, like):
        return torch.linspace(lo, hi, m, dtype=torch.float64, device=like.device)

    @staticmethod
    def full(shape, value, like):
        return torch.full(shape, value, dtype=torch.float64, device=like.device)

    @staticmethod
    def find_root(fun, a, b, *, args=(), xrtol=None, xatol=None, maxiter=None,
                  bisections: int = 8, steps: int = 24, values=None):
        """Roots of ``fun`` in brackets ``[a, b]`` with fixed iteration counts (no host sync).

        ``bisections`` bisection steps, then ``steps`` Illinois (modified regula falsi) steps,
        each kept strictly inside the current bracket (a step that leaves it, or lands on a
        non-finite value, is replaced by bisection).  Values are clipped as on NumPy
        (:meth:`rass_theory.backend.NumpyBackend.find_root`); ``xrtol``, ``xatol`` and
        ``maxiter`` are accepted for a common signature (the iteration counts are fixed);
        ``values = (fun(a), fun(b))`` saves the two end evaluations.
        Returns the iterate with the smaller ``|fun|`` of the final bracket; where the bracket
        is invalid (one sign, or ``a == b``) the end with the smaller ``|fun|``.

        On the CPU (where reading values costs no device synchronisation) the roots come from
        the NumPy root finder (:func:`rass_theory.backend.chandrupatla`: per-element convergence
        to ``xrtol``, ``xatol``, converged elements dropped), ``fun`` still evaluated on tensors
        (sharing the arrays' memory): the same roots as NumPy, in about a third of the
        evaluations of the fixed counts.
        """
        if a.device.type == "cpu":
            return _host_find_root(fun, a, b, args, xrtol, xatol, maxiter, values)
        return fixed_find_root(fun, a, b, args=args, bisections=bisections, steps=steps, values=values)

    @staticmethod
    def cast(x, dtype):
        return x.to(dtype)

    @staticmethod
    def arange(n: int, like):
        return torch.arange(n, device=like.device)

    @staticmethod
    def is_float32(x) -> bool:
        return x.dtype == torch.float32

    @staticmethod
    def zeros_index(n: int, like):
        return torch.zeros(n, dtype=torch.int64, device=like.device)

    @staticmethod
    def constant(values, like):
        return torch.as_tensor(values, dtype=torch.float64, device=like.device)

    @staticmethod
    def index_constant(value: int, n: int, like):
        return torch.full((n,), value, dtype=torch.int64, device=like.device)

    @staticmethod
    def project(children, direction):
        return torch.bmm(children.to(torch.float64), direction[:, :, None])[:, :, 0]

    @staticmethod
    def rowdot(a, b):
        return torch.bmm(a.to(torch.float64)[:, None, :], b[:, :, None])[:, 0, 0]

    @staticmethod
    def uniform(rng, shape, like):
        """Uniforms in ``(0, 1]`` (``1 - torch.rand``), float64 on ``like``'s device."""
        return 1.0 - torch.rand(*shape, generator=rng, dtype=torch.float64, device=like.device)

    @staticmethod
    def normal(rng, shape, like):
        return torch.randn(*shape, generator=rng, dtype=torch.float64, device=like.device)


class TorchHostBackend(NumpyBackend):
    """The NumPy namespace for CPU tensors, with the randomness of a ``torch.Generator``.

    On the CPU device a torch verifier runs the one law engine on NumPy views of its tensors
    (``Tensor.numpy()`` shares their memory; the torch namespace on the CPU, its kernels and its
    per-operation dispatch, costs 0.93-1.56x NumPy's, ``bench/torch_cpu_engine.py``), drawing its uniforms and
    normals as :class:`TorchBackend` does, ``1 - torch.rand`` and ``torch.randn`` from the
    caller's generator: the same stream positions, so the same decisions, as the torch namespace.
    ``name`` is ``"numpy"`` (the arrays are NumPy's); ``inputs`` says the caller passed tensors.
    """

    inputs = "torch"

    @staticmethod
    def uniform(rng, shape, like=None):
        """Uniforms in ``(0, 1]`` from a CPU ``torch.Generator`` (``1 - torch.rand``), as NumPy float64."""
        return torch.rand(*shape, generator=rng, dtype=torch.float64).neg_().add_(1.0).numpy()   # = 1 - rand

    @staticmethod
    def normal(rng, shape, like=None):
        """Standard normals from a CPU ``torch.Generator`` (``torch.randn``), as NumPy float64."""
        return torch.randn(*shape, generator=rng, dtype=torch.float64).numpy()


#: The host namespace of CPU tensors.
TORCH_HOST = TorchHostBackend()


def fixed_find_root(fun, a, b, *, args=(), bisections: int = 8, steps: int = 24, values=None):
    """:meth:`TorchBackend.find_root` off the CPU: fixed iteration counts, no host sync.

    ``bisections`` bisection steps, then ``steps`` Illinois steps (each kept inside the bracket);
    the iterate with the smaller ``|fun|`` of the final bracket, or the better end of an invalid
    bracket.  (The tests run it on CPU tensors; there ``find_root`` takes the NumPy path.)
    """

    def f(x):
        v = fun(x, *args)
        return torch.clamp(torch.nan_to_num(v, nan=0.0), -1e3, 1e3)

    a = a.to(torch.float64)
    b = torch.maximum(b.to(torch.float64), a)
    if values is None:
        fa, fb = f(a), f(b)
    else:
        fa, fb = (torch.clamp(torch.nan_to_num(v.to(torch.float64), nan=0.0), -1e3, 1e3) for v in values)
    # an invalid bracket (one sign, or a == b): the end with the smaller |fun|, as on NumPy
    fallback = torch.where(torch.abs(fa) <= torch.abs(fb), a, b)
    valid = ((fa > 0) != (fb > 0)) | (fa == 0) | (fb == 0)
    # an exact zero at an end: collapse the bracket onto it
    b, fb = torch.where(fa == 0, a, b), torch.where(fa == 0, fa, fb)
    a, fa = torch.where(fb == 0, b, a), torch.where(fb == 0, fb, fa)
    for _ in range(bisections):
        mid = 0.5 * (a + b)
        fm = f(mid)
        left = (fm > 0) == (fa > 0)               # same sign as at a: the root is right of mid
        a, fa = torch.where(left, mid, a), torch.where(left, fm, fa)
        b, fb = torch.where(left, b, mid), torch.where(left, fb, fm)
    for _ in range(steps):
        denom = fb - fa
        x = b - fb * (b - a) / torch.where(denom == 0, torch.ones_like(denom), denom)
        lo, hi = torch.minimum(a, b), torch.maximum(a, b)
        inside = torch.isfinite(x) & (x > lo) & (x < hi) & (denom != 0)
        x = torch.where(inside, x, 0.5 * (a + b))
        x = torch.where(fb == 0, b, x)
        fx = f(x)
        flip = (fx > 0) != (fb > 0)
        a, fa = torch.where(flip, b, a), torch.where(flip, fb, 0.5 * fa)
        b, fb = x, fx
    return torch.where(valid, torch.where(torch.abs(fa) < torch.abs(fb), a, b), fallback)


def _host_find_root(fun, a, b, args, xrtol, xatol, maxiter, values):
    """:meth:`TorchBackend.find_root` on CPU tensors through the NumPy root finder."""
    from ._numpy import NUMPY, _EPS

    def host(t):
        return t.detach().to(torch.float64).numpy() if t.is_floating_point() else t.detach().numpy()

    def host_fun(x, *extra):
        v = fun(torch.from_numpy(x), *(torch.from_numpy(e) for e in extra))
        return v.detach().numpy()

    vals = None if values is None else tuple(host(v) for v in values)
    x = NUMPY.find_root(host_fun, host(a), host(b), args=tuple(host(e) for e in args),
                        xrtol=4 * _EPS if xrtol is None else xrtol, xatol=xatol,
                        maxiter=200 if maxiter is None else maxiter, values=vals)
    return torch.from_numpy(np.ascontiguousarray(x))
