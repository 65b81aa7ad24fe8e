"""The torch namespace of :mod:`rass_theory.backend` (device follows the inputs)."""
from __future__ import annotations

import torch


class TorchBackend:
    """Array operations of the verifier kernels on torch tensors (float64 math).

    Nothing here reads a value on the host except :meth:`rows_where` on the CPU device, where
    indexing costs no synchronisation; on an accelerator it returns ``None`` and the kernels
    compute every row and merge with ``where`` instead.
    """

    name = "torch"
    float64 = torch.float64

    log = staticmethod(torch.log)
    log_ndtr = staticmethod(torch.special.log_ndtr)
    ndtri = staticmethod(torch.special.ndtri)

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
        return torch.nonzero(mask)[:, 0]

    @staticmethod
    def add_rows(states, rows, shift):
        states.index_add_(0, rows, shift.to(states.dtype))
        return states

    @staticmethod
    def copy(x):
        return x.clone()

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
