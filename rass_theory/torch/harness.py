"""Torch chunk runner of the exactness harness (``check_exactness(..., backend="torch")``).

``run_chunk_torch(verifier, node, spec, device)`` is the torch twin of
:func:`rass_theory.stats.harness.run_chunk_numpy`: it draws the chunk's children with
``torch.randn`` on ``device``, calls a torch verifier, checks the contract and computes the same
probability-integral-transform bin counts *on the device*, and brings back only the integer
counts (plus the few two-sample rows of the chunk).  Memory is ``O(chunk_size * K * dim)`` on the
device whatever ``n_samples`` is.

Random streams (all from the chunk's ``SeedSequence``, see docs/ARCHITECTURE.md "stats/"):
children from ``torch.Generator(device).manual_seed(seed_of(sub_seed(spec.seed, 0)))``, the
verifier's generator from ``sub_seed(spec.seed, 1)``, where ``seed_of`` takes the first 64-bit
word of ``SeedSequence.generate_state``.  The same spec on the same device and torch version
gives bit-identical counts (Dask workers rely on this); numpy and torch runs with the same
seed are different samples of the same law.
"""
from __future__ import annotations

import weakref

import numpy as np
import torch

from ..stats.node import sub_seed
from ..stats.streaming import MAX_MESSAGES, VIOLATION_KINDS, ExactnessCounts

__all__ = ["run_chunk_torch", "resolve_device", "torch_seed", "counts_from_torch_result"]

_KIND = {k: i for i, k in enumerate(VIOLATION_KINDS)}
# node -> {(device, dtype): tensors}; kept outside the node so that pickling a node (Dask) never
# carries device tensors along
_NODE_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def resolve_device(device=None) -> torch.device:
    """Normalise ``device`` (None, str or ``torch.device``) and check that it exists.

    ``None`` gives ``"cuda"`` when CUDA is available, else ``"cpu"``.  A CUDA (or MPS) device
    that this machine or torch build does not have is a ``ValueError`` saying so.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda:0', got {device!r}") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={str(device)!r} requested but CUDA is not available "
                             f"(torch {torch.__version__}, torch.cuda.is_available() is False)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device={str(device)!r} requested but only {torch.cuda.device_count()} "
                             f"CUDA device(s) exist")
    elif dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ValueError(f"device={str(device)!r} requested but MPS is not available")
    elif dev.type != "cpu":
        raise ValueError(f"device must be 'cpu', 'cuda[:i]' or 'mps', got {device!r}")
    return dev


def torch_seed(seed: np.random.SeedSequence) -> int:
    """A 64-bit ``torch.Generator`` seed from a ``SeedSequence`` (its first state word)."""
    return int(seed.generate_state(1, np.uint64)[0])


def _generator(seed: np.random.SeedSequence, device: torch.device) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(torch_seed(seed))
    return gen


def _node_tensors(node, device, dtype):
    """The node's vectors and bin edges as tensors on ``device`` (cached per device and dtype)."""
    try:
        cache = _NODE_CACHE.setdefault(node, {})
    except TypeError:                      # a node type without weak references: no caching
        cache = {}
    key = (str(device), dtype)
    if key not in cache:
        as_t = lambda a, dt=dtype: torch.as_tensor(np.array(a), dtype=dt, device=device)  # noqa: E731
        cache[key] = {
            "mu_draft": as_t(node.mu_draft), "mu_target": as_t(node.mu_target),
            "mu_draft64": as_t(node.mu_draft, torch.float64), "e64": as_t(node.direction, torch.float64),
            "dirs64": as_t(node.directions, torch.float64).reshape(node.n_directions, node.dim),
            "z_edges": as_t(node.z_edges, torch.float64), "r_edges": as_t(node.r_edges, torch.float64),
        }
    return cache[key]


def _whole_chunk_failure(node, n, kind, message, keep):
    violations = np.zeros(len(VIOLATION_KINDS), np.int64)
    violations[_KIND[kind]] = n
    return ExactnessCounts.from_chunk(node, np.zeros((n, node.dim)), np.zeros(n, bool), np.zeros(n, bool),
                                      violations, (f"[{kind}] {message}",), keep)


def _as_tensor(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return torch.as_tensor(np.asarray(value), device=device)


def _masked_bincount(bins: torch.Tensor, valid: torch.Tensor, n_bins: int) -> torch.Tensor:
    """``bincount(bins[valid], minlength=n_bins)`` without boolean indexing (invalid -> bin n_bins)."""
    idx = torch.where(valid, bins, torch.full_like(bins, n_bins))
    return torch.bincount(idx, minlength=n_bins + 1)[:n_bins]


def counts_from_torch_result(node, result, children: torch.Tensor, keep: int = 0) -> ExactnessCounts:
    """Check a torch verifier's output against the contract and bin its valid rows on device.

    Mirrors :func:`rass_theory.stats.harness.counts_from_result`: whole-array problems (missing
    field, not convertible, wrong shape or dtype) invalidate the chunk; row problems (non-finite
    state, index out of range, ``accepted`` inconsistent with ``child_index``, a claimed child that
    is not a bit-for-bit copy) are counted by kind and the rows excluded from every statistic.
    PIT bins use ``torch.bucketize(values, edges, right=True)``, the same index as
    ``numpy.searchsorted(edges, values, side="right")`` of the NumPy runner.
    """
    n, K, d = children.shape
    device = children.device
    fields = {}
    for name in ("states", "accepted", "child_index"):
        if not hasattr(result, name):
            return _whole_chunk_failure(node, n, "missing_field",
                                        f"result of type {type(result).__name__} has no attribute {name!r}", keep)
        try:
            fields[name] = _as_tensor(getattr(result, name), device)
        except Exception as exc:  # noqa: BLE001 - any failure to convert is the verifier's bug
            return _whole_chunk_failure(node, n, "not_an_array", f"result.{name} cannot be converted to a tensor: {exc}",
                                        keep)
    states, accepted, index = fields["states"], fields["accepted"], fields["child_index"]
    for name, t, shape in (("states", states, (n, d)), ("accepted", accepted, (n,)), ("child_index", index, (n,))):
        if tuple(t.shape) != shape:
            return _whole_chunk_failure(node, n, "shape", f"result.{name} must have shape {shape}, got {tuple(t.shape)}",
                                        keep)
    if not states.dtype.is_floating_point:
        return _whole_chunk_failure(node, n, "dtype", f"result.states must have a floating dtype, got {states.dtype}", keep)
    if accepted.dtype != torch.bool:
        return _whole_chunk_failure(node, n, "dtype", f"result.accepted must have dtype bool, got {accepted.dtype}", keep)
    if index.dtype.is_floating_point or index.dtype == torch.bool or index.dtype.is_complex:
        return _whole_chunk_failure(node, n, "dtype", f"result.child_index must have an integer dtype, got {index.dtype}",
                                    keep)
    index = index.to(torch.int64)

    # row-wise checks, all on the device
    finite = torch.isfinite(states).all(dim=1)
    in_range = (index >= -1) & (index < K)
    consistent = accepted == (index != -1)
    safe = torch.clamp(index, 0, K - 1)
    claimed = children.reshape(n * K, d).index_select(0, torch.arange(n, device=device) * K + safe)
    is_copy = (states == claimed.to(states.dtype)).all(dim=1) | ~(accepted & in_range & (index >= 0))
    valid = finite & in_range & consistent & is_copy
    row_flags = torch.stack([~finite, ~in_range, ~consistent, ~is_copy])

    t = _node_tensors(node, device, children.dtype)
    z = (states.to(torch.float64) - t["mu_draft64"]) / node.sigma
    z = torch.where(valid[:, None], z, torch.zeros_like(z))
    s = z @ t["e64"]
    B, J = node.n_bins, node.n_joint_bins
    s_bin = torch.bucketize(s - node.delta, t["z_edges"], right=True)
    s_counts = _masked_bincount(s_bin, valid, B)
    if node.dim > 1:
        r = torch.clamp((z * z).sum(dim=1) - s * s, min=0.0)
        r_bin = torch.bucketize(r, t["r_edges"], right=True)
        r_counts = _masked_bincount(r_bin, valid, B)
        joint = _masked_bincount((s_bin * J // B) * J + (r_bin * J // B), valid, J * J).reshape(J, J)
    else:
        r_counts = torch.zeros(B, dtype=torch.int64, device=device)
        joint = torch.zeros((J, J), dtype=torch.int64, device=device)
    if node.n_directions:
        proj = z @ t["dirs64"].T                                                   # (n, n_directions)
        dir_bins = torch.bucketize(proj.T.contiguous(), t["z_edges"], right=True)  # (n_dir, n)
        dir_counts = torch.stack([_masked_bincount(dir_bins[j], valid, B) for j in range(node.n_directions)])
    else:
        dir_counts = torch.zeros((0, B), dtype=torch.int64, device=device)
    n_accepted = (accepted & valid).sum()
    keep = int(min(max(keep, 0), n))

    # one transfer of everything the merge needs
    flags = row_flags.sum(dim=1).cpu().numpy()
    head_valid = valid[:keep].cpu().numpy()
    subsample = z[:keep].cpu().numpy()[head_valid].reshape(-1, node.dim)
    violations = np.zeros(len(VIOLATION_KINDS), np.int64)
    messages = []
    texts = ("result.states holds NaN or infinity", f"result.child_index must lie in [-1, K-1] = [-1, {K - 1}]",
             "result.accepted must be True exactly where result.child_index != -1",
             "result.states[i] claims to be children[i, child_index[i]] but differs from it")
    for kind, count, text in zip(("non_finite", "index_range", "accepted_index_mismatch", "not_a_copy"), flags, texts):
        if count:
            violations[_KIND[kind]] = int(count)
            if len(messages) < MAX_MESSAGES:
                messages.append(f"[{kind}] {text} ({int(count)} row(s))")
    return ExactnessCounts(
        n, int(valid.sum().item()), int(n_accepted.item()),
        s_counts.cpu().numpy().astype(np.int64), r_counts.cpu().numpy().astype(np.int64),
        dir_counts.cpu().numpy().astype(np.int64).reshape(node.n_directions, B),
        joint.cpu().numpy().astype(np.int64), violations, np.ascontiguousarray(subsample, dtype=np.float64),
        tuple(messages))


def run_chunk_torch(verifier, node, spec, device=None, *, dtype=torch.float64) -> ExactnessCounts:
    """Run one harness chunk with torch on ``device``.

    Parameters
    ----------
    verifier : callable
        A torch verifier ``(children, mu_draft, mu_target, sigma, generator) -> result`` with
        tensor fields (e.g. :mod:`rass_theory.torch.verifiers`).
    node : rass_theory.stats.node.SyntheticNode
    spec : rass_theory.stats.node.ChunkSpec
    device : str or torch.device, optional
        ``None``: CUDA when available, else the CPU.  A CUDA device that does not exist is a
        ``ValueError``.
    dtype : torch.dtype
        Children dtype (``torch.float64``, the reference, or ``torch.float32``).

    Returns
    -------
    ExactnessCounts
        Counts of the chunk's rows, mergeable with the NumPy runner's.

    Notes
    -----
    ``children = mu_draft + sigma * randn(n, K, dim)`` on the device; ``mu_draft``/``mu_target``
    are passed as ``(n, dim)`` expanded views and ``sigma`` as a Python float.  The only
    device-to-host transfers are the final counts, the flags' totals and the chunk's
    two-sample rows.  Exceptions raised by the verifier propagate.
    """
    dev = resolve_device(device)
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    n, K, d = spec.n, node.K, node.dim
    t = _node_tensors(node, dev, dtype)
    children = torch.randn(n, K, d, generator=_generator(sub_seed(spec.seed, 0), dev), dtype=dtype, device=dev)
    children = children * node.sigma + t["mu_draft"]
    mu_draft = t["mu_draft"].expand(n, d)
    mu_target = t["mu_target"].expand(n, d)
    gen = _generator(sub_seed(spec.seed, 1), dev)
    result = verifier(children, mu_draft, mu_target, float(node.sigma), gen)
    return counts_from_torch_result(node, result, children, spec.keep)
