"""Torch chunk runner of the exactness harness (``check_exactness(..., backend="torch")``).

``run_chunk_torch(verifier, node, spec, device)`` is the torch twin of
:func:`rass_theory.stats.chunks.run_chunk_numpy`: the chunk's nodes and children are the NumPy
runner's (:func:`rass_theory.stats.chunks.draw_chunk`, so both backends verify the same inputs),
moved to ``device`` in the pass's dtype (``float64``, ``float32`` or ``bfloat16``).  The verifier is
called on the same batches; its inputs are compared with copies after every call (torch has no
read-only tensors), so a verifier that writes into them fails with ``mutated_input``.  The
outputs come back to the host once per call, are checked by the one contract checker
(:func:`rass_theory.verifiers._contract.contract_check`, through the harness's
:class:`~rass_theory.stats.call_check.CallChecker`) and counted by the NumPy code
(:func:`rass_theory.stats.rowstats.counts_from_rows`), so the statistics are the same functions
of the states on both backends.

The verifier's generator is ``torch.Generator(device).manual_seed(seed_of(sub_seed(spec.seed, 1)))``,
where ``seed_of`` takes the first 64-bit word of ``SeedSequence.generate_state``.  The same spec on
the same device and torch version gives bit-identical counts (Dask workers rely on this).
"""
from __future__ import annotations

import numpy as np
import torch

from ..stats.call_check import CallChecker, failure_regimes, sequence_probe
from ..stats.chunks import PROBE_ROWS, call_batches, draw_chunk, fallback_directions, probe_children, probe_sums
from ..stats.node import sub_seed
from ..stats.rowstats import counts_from_rows
from ..stats.streaming import ExactnessCounts
from ..verifiers._contract import as_host_array

__all__ = ["run_chunk_torch", "torch_chunk_stream", "resolve_device", "torch_seed", "TORCH_DTYPES"]

TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}


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


def run_chunk_torch(verifier, node, spec, device=None) -> ExactnessCounts:
    """Run one harness chunk with torch on ``device``.

    Parameters
    ----------
    verifier : callable
        A torch verifier ``(children, mu_draft, mu_target, sigma, generator) -> result`` with
        tensor fields (e.g. :mod:`rass_theory.torch.verifiers`).
    node : rass_theory.stats.node.SyntheticNode
    spec : rass_theory.stats.node.ChunkSpec
        ``spec.dtype`` picks the tensors' dtype.
    device : str or torch.device, optional
        ``None``: CUDA when available, else the CPU.  A CUDA device that does not exist is a
        ``ValueError``.

    Returns
    -------
    ExactnessCounts
        Counts of the chunk's rows, mergeable with the NumPy runner's.

    Notes
    -----
    ``sigma`` is an ``(m,)`` tensor on the main batch and a Python float on the small batches.
    Exceptions raised by the verifier are recorded as violations naming the batch size and dtype.
    """
    dev = resolve_device(device)
    if spec.dtype not in TORCH_DTYPES:
        raise ValueError(f"dtype must be one of {tuple(TORCH_DTYPES)}, got {spec.dtype!r}")
    tdt = TORCH_DTYPES[spec.dtype]
    rows, children64 = draw_chunk(node, spec)
    children = torch.as_tensor(children64, device=dev).to(tdt)
    md = torch.as_tensor(rows.mu_draft, device=dev).to(tdt)
    mt = torch.as_tensor(rows.mu_target, device=dev).to(tdt)
    sig = torch.as_tensor(rows.sigma, device=dev).to(tdt)
    host = {k: as_host_array(v) for k, v in (("children", children), ("md", md), ("mt", mt), ("sig", sig))}
    gen = _generator(sub_seed(spec.seed, 1), dev)
    checker = CallChecker(spec.n, node.dim, spec.dtype)
    calls = call_batches(spec)
    for j, (a, b) in enumerate(calls):
        inputs = [children[a:b].clone(), md[a:b].clone(), mt[a:b].clone()]
        sigma = sig[a:b].clone() if j == len(calls) - 1 else float(sig[a])
        try:
            result = verifier(*inputs, sigma, gen)
        except Exception as exc:  # noqa: BLE001 - the verifier's failure is a verdict, not a crash
            where = ""
            if j == len(calls) - 1 and b - a > 1:
                delta = np.asarray(node.deltas)[rows.group[a:b]]
                rho = np.linalg.norm(rows.mu_draft[a:b], axis=1) / rows.sigma[a:b]

                def retry(i, a=a, b=b):
                    idx = torch.as_tensor(i, device=dev)
                    g = _generator(sub_seed(spec.seed, 9), dev)
                    return verifier(children[a:b][idx].clone(), md[a:b][idx].clone(), mt[a:b][idx].clone(),
                                    sig[a:b][idx].clone(), g)

                where = failure_regimes(retry, delta, rho, node.dim)
            checker.raised(a, b, exc, where=where)
            continue
        originals = (children[a:b], md[a:b], mt[a:b]) + ((sig[a:b],) if j == len(calls) - 1 else ())
        passed = tuple(inputs) + ((sigma,) if j == len(calls) - 1 else ())
        if not all(torch.equal(x, y) for x, y in zip(passed, originals)):
            checker.raised(a, b, RuntimeError("an input tensor differs from its copy after the call"),
                           kind="mutated_input")
            continue
        states_dtype = getattr(getattr(result, "states", None), "dtype", None)
        if isinstance(states_dtype, torch.dtype) and states_dtype != tdt:
            checker.returned = True
            checker._note("states_dtype", b - a, f"[states_dtype] result.states has dtype {states_dtype} for {tdt} "
                                                 f"inputs: states must keep the inputs' dtype (batch of {b - a} row(s))")
            continue
        checker.record(a, b, result, host["children"][a:b])
    m = min(PROBE_ROWS, spec.n) if checker.returned else 0   # no probe of a verifier that always raises
    probe = [torch.as_tensor(probe_children(node, rows, spec, m, j), device=dev).to(tdt) for j in range(2)]
    states = None if m == 0 else sequence_probe(lambda j: verifier(probe[j].clone(), md[:m].clone(), mt[:m].clone(), sig[:m].clone(), gen),
                            checker, m, lambda: gen.get_state().numpy().tobytes(), _snapshot, _unchanged,
                            lambda r: _probe_states(r, m, node.dim))
    frame = node.frame(host["md"], host["mt"], host["sig"], fallback_directions(rows, node))
    return counts_from_rows(node, frame, checker.states, checker.valid, checker.accepted, rows.group,
                            checker.violations, checker.messages, spec.keep, calls[-1:],
                            probe_sums(node, frame, states))


def _snapshot(result):
    out = {}
    for k in ("states", "accepted", "child_index"):
        v = getattr(result, k, None)
        if v is not None:
            out[k] = v.detach().clone() if isinstance(v, torch.Tensor) else np.array(v, copy=True)
    return out


def _unchanged(result, snap) -> bool:
    for k, v in snap.items():
        now = getattr(result, k)
        if isinstance(v, torch.Tensor):
            if not isinstance(now, torch.Tensor) or now.shape != v.shape or now.dtype != v.dtype:
                return False
            now = now.detach()
            same = torch.equal(now, v) or (now.is_floating_point() and torch.equal(now.isnan(), v.isnan())
                                           and torch.equal(torch.nan_to_num(now), torch.nan_to_num(v)))
            if not same:
                return False
        elif not np.array_equal(np.asarray(now), v, equal_nan=True):
            return False
    return True


def _probe_states(result, m, dim):
    try:
        st = np.asarray(as_host_array(result.states), dtype=np.float64)
    except Exception:  # noqa: BLE001
        return None
    return st if st.shape == (m, dim) else None


def torch_chunk_stream(verifier, node, specs, cfg):
    """The torch chunk stream of the harness: :func:`run_chunk_torch` on ``cfg.device`` for every
    spec, in order (what ``rt.check_exactness(..., backend="torch")`` runs; picked by
    :mod:`rass_theory.scale.check`, the stream protocol is
    :func:`rass_theory.stats.chunks.numpy_chunk_stream`'s)."""
    for spec in specs:
        yield run_chunk_torch(verifier, node, spec, cfg.device)
