"""Chunk running of the exactness harness: draw a chunk, call the verifier, count, merge.

:func:`run_chunk_numpy` runs one chunk on the CPU (the torch and Dask runners,
:mod:`rass_theory.torch.harness` and :mod:`rass_theory.scale.dask_backend`, share
:func:`draw_chunk`, :func:`call_batches` and the probe helpers); :func:`collect_counts` runs (or
resumes from a checkpoint) every chunk of every dtype pass of one :class:`~.config.HarnessConfig`.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .call_check import CallChecker, failure_regimes, raised_kind, sequence_probe
from ._workspace import work_array
from .checkpoint import load_checkpoint, save_checkpoint
from .config import HarnessConfig, build_node
from .node import ChunkSpec, SyntheticNode, chunk_plan, n_chunks_of, sub_seed
from .rowstats import counts_from_rows, sequence_sums
from .streaming import INDEP_STATS, ExactnessCounts

__all__ = ["run_chunk_numpy", "numpy_chunk_stream", "resolve_chunk_stream", "collect_counts", "run_plan",
           "call_batches", "draw_chunk", "probe_children", "probe_sums", "fallback_directions", "PROBE_ROWS"]


def _numpy_dtype(name):
    if name == "float64":
        return np.float64
    if name == "float32":
        return np.float32
    raise ValueError(f"dtype {name!r} needs backend='torch' (NumPy has no bfloat16)")


def call_batches(spec):
    """``[(start, stop), ...]``: the chunk's verifier calls (small batches first, then the rest)."""
    bounds, a = [], 0
    for m in spec.small_batches:
        bounds.append((a, a + m))
        a += m
    bounds.append((a, spec.n))
    return [(a, b) for a, b in bounds if b > a]


#: Children are drawn and scaled in blocks of about this many values (256 KiB of float64).
CHILD_BLOCK_VALUES = 1 << 15


def draw_chunk(node, spec, out=None, node_out=None):
    """The chunk's nodes and children (float64): ``(RowNodes, children (n, K, dim))``.

    Nodes from stream ``sub_seed(spec.seed, 2)``, children ``mu_draft + sigma N(0, I)`` from
    ``sub_seed(spec.seed, 0)``.  Rows of each small batch share one ``sigma`` (it is passed to the
    verifier as a Python float there, exercising the scalar form of the contract).  ``out``: an
    ``(n, K, dim)`` float64 array to draw the children into, ``node_out`` the node draw's buffers
    (:meth:`SyntheticNode.draw`'s ``out``; a chunk runner's reused arrays).
    """
    rows = node.draw(np.random.default_rng(sub_seed(spec.seed, 2)), spec.n, spec.dtype, node_out)
    for a, b in call_batches(spec)[:-1]:
        ratio = rows.sigma[a] / rows.sigma[a:b]
        rows.sigma[a:b] = rows.sigma[a]
        rows.mu_target[a:b] = rows.mu_draft[a:b] + ratio[:, None] * (rows.mu_target[a:b] - rows.mu_draft[a:b])
    children = np.empty((spec.n, node.K, node.dim)) if out is None else out
    g = np.random.default_rng(sub_seed(spec.seed, 0))
    step = max(1, CHILD_BLOCK_VALUES // (node.K * node.dim))
    for a in range(0, spec.n, step):   # drawn and scaled block by block, in cache; the same stream as one draw
        block = children[a:a + step]
        g.standard_normal(out=block)
        block *= rows.sigma[a:a + step, None, None]
        block += rows.mu_draft[a:a + step, None, :]
    return rows, children


def fallback_directions(rows, node):
    """The drawn unit directions of the rows selected by a mask (only computed for rows whose cast
    means coincide: ``mask -> (k, d)``)."""

    def directions(mask):
        diff = rows.mu_target[mask] - rows.mu_draft[mask]
        norm = np.linalg.norm(diff, axis=1)
        e = np.zeros_like(diff)
        e[:, 0] = 1.0
        nz = norm > 0
        e[nz] = diff[nz] / norm[nz, None]
        return e

    return directions


#: Rows of each of the two calls of the calls-in-sequence probe (per chunk).
PROBE_ROWS = 1000


def probe_children(node, rows, spec, m, j):
    """Fresh float64 children of the chunk's first ``m`` nodes for probe call ``j`` (stream ``sub_seed(seed, 3 + j)``)."""
    noise = np.random.default_rng(sub_seed(spec.seed, 3 + j)).standard_normal((m, node.K, node.dim))
    noise *= rows.sigma[:m, None, None]
    noise += rows.mu_draft[:m, None, :]
    return noise


def _numpy_rng_state(rng):
    bg = getattr(rng, "bit_generator", None)
    if bg is None:
        return None
    seq = getattr(bg, "seed_seq", None)
    return (repr(bg.state), getattr(seq, "n_children_spawned", None))


def _snapshot(result):
    return {k: np.array(getattr(result, k), copy=True) for k in ("states", "accepted", "child_index")
            if hasattr(result, k)}


def _unchanged(result, snap) -> bool:
    return all(np.array_equal(np.asarray(getattr(result, k)), v, equal_nan=True) for k, v in snap.items())


def _probe_states(result, m, dim):
    try:
        st = np.asarray(result.states, dtype=np.float64)
    except Exception:  # noqa: BLE001
        return None
    return st if st.shape == (m, dim) else None


def probe_sums(node, frame, probe_states):
    """:func:`~rass_theory.stats.rowstats.sequence_sums` of the probe's two calls (``(0, zeros)`` if unusable)."""
    if probe_states is None or any(s is None for s in probe_states):
        return 0, np.zeros(len(INDEP_STATS))
    a, b = probe_states
    ok = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    return sequence_sums(node, frame.take(slice(0, a.shape[0])), a, b, ok)


def _scratch(reuse, name, shape, dtype=np.float64):
    """This thread's work array ``name`` (:func:`~rass_theory.stats._workspace.work_array`) where
    ``reuse``, else ``None`` (the caller allocates).  The children and means are handed to the
    verifier read-only, and nothing of a chunk is read after the chunk's counts are made."""
    return work_array("chunk." + name, shape, dtype) if reuse else None


def run_chunk_numpy(verifier, node: SyntheticNode, spec: ChunkSpec, reuse: bool = False) -> ExactnessCounts:
    """Run one chunk on the CPU with NumPy.

    Draws the chunk (:func:`draw_chunk`), casts children and means to ``spec.dtype``, makes them
    read-only, and calls ``verifier(children, mu_draft, mu_target, sigma, rng)`` on each batch of
    :func:`call_batches` with one ``rng = default_rng(sub_seed(spec.seed, 1))``; ``sigma`` is an
    ``(m,)`` array on the main batch and a Python float on the small ones.  Exceptions raised by the
    verifier are recorded as violations naming the batch size and dtype (``KeyboardInterrupt``
    propagates).  Returns the chunk's :func:`~rass_theory.stats.rowstats.counts_from_rows`.
    ``reuse``: draw the chunk's arrays (children, node directions and draft means, recorded
    states, frame directions) into this thread's work arrays, kept for the next chunk
    (:func:`numpy_chunk_stream`; fresh multi-megabyte arrays cost a page fault per 4 KiB every
    chunk); else fresh arrays.
    """
    dt = _numpy_dtype(spec.dtype)
    shape = (spec.n, node.K, node.dim)
    node_out = (work_array("chunk.directions", (spec.n + 1, node.dim)),
                work_array("chunk.mu_draft", (spec.n, node.dim))) if reuse else None
    rows, children64 = draw_chunk(node, spec, _scratch(reuse, "children", shape), node_out)
    children = children64 if dt == np.float64 else _scratch(reuse, "children_cast", shape, dt)
    if children is None:
        children = children64.astype(dt)
    elif children is not children64:
        np.copyto(children, children64)   # the cast to the pass's dtype
    md, mt, sig = (a.astype(dt, copy=False) for a in (rows.mu_draft, rows.mu_target, rows.sigma))  # float64: no copy
    for arr in (children, md, mt, sig):
        arr.setflags(write=False)
    rng = np.random.default_rng(sub_seed(spec.seed, 1))
    checker = CallChecker(spec.n, node.dim, spec.dtype, _scratch(reuse, "states", (spec.n, node.dim)))
    calls = call_batches(spec)
    for j, (a, b) in enumerate(calls):
        sigma = sig[a:b] if j == len(calls) - 1 else float(sig[a])
        try:
            result = verifier(children[a:b], md[a:b], mt[a:b], sigma, rng)
        except Exception as exc:  # noqa: BLE001 - the verifier's failure is a verdict, not a crash
            where = ""
            if j == len(calls) - 1 and raised_kind(exc) == "raised" and b - a > 1:
                delta = np.asarray(node.deltas)[rows.group[a:b]]
                rho = np.sqrt(np.einsum("nd,nd->n", rows.mu_draft[a:b], rows.mu_draft[a:b])) / rows.sigma[a:b]
                where = failure_regimes(lambda i: verifier(children[a:b][i], md[a:b][i], mt[a:b][i], sig[a:b][i],
                                                           np.random.default_rng(0)), delta, rho, node.dim)
            checker.raised(a, b, exc, where=where)
            continue
        checker.record(a, b, result, children[a:b], dt)
    m = min(PROBE_ROWS, spec.n) if checker.returned else 0   # no probe of a verifier that always raises
    probe = [probe_children(node, rows, spec, m, j).astype(dt) for j in range(2)]
    for arr in probe:
        arr.setflags(write=False)
    states = None if m == 0 else sequence_probe(lambda j: verifier(probe[j], md[:m], mt[:m], sig[:m], rng), checker, m,
                            lambda: _numpy_rng_state(rng), _snapshot, _unchanged,
                            lambda r: _probe_states(r, m, node.dim))
    frame = node.frame(md, mt, sig, fallback_directions(rows, node), _scratch(reuse, "e", (spec.n, node.dim)))
    return counts_from_rows(node, frame, checker.states, checker.valid, checker.accepted, rows.group,
                            checker.violations, checker.messages, spec.keep, calls[-1:],
                            probe_sums(node, frame, states))


def numpy_chunk_stream(verifier, node, specs, cfg: HarnessConfig):
    """The NumPy chunk stream: :func:`run_chunk_numpy` on every spec, in order.

    A chunk stream is ``(verifier, node, specs, cfg) -> iterator of ExactnessCounts``, one per
    spec in spec order.  The torch and Dask streams live above this package
    (:func:`rass_theory.torch.harness.torch_chunk_stream`,
    :func:`rass_theory.scale.dask_backend.dask_chunk_stream`) and are picked by backend name in
    :mod:`rass_theory.scale.check` (``rt.check_exactness``), which hands them down here.
    """
    for spec in specs:
        yield run_chunk_numpy(verifier, node, spec, reuse=True)


def resolve_chunk_stream(cfg: HarnessConfig, chunk_stream=None):
    """``chunk_stream`` if given, else the NumPy stream; a ``"torch"``/``"dask"`` config needs its
    stream from :mod:`rass_theory.scale.check` (this package does not import those backends)."""
    if chunk_stream is not None:
        if not callable(chunk_stream):
            raise TypeError(f"chunk_stream must be callable (verifier, node, specs, cfg), "
                            f"got {type(chunk_stream).__name__}")
        return chunk_stream
    if cfg.backend != "numpy":
        raise ValueError(f"backend={cfg.backend!r} runs through rass_theory.check_exactness / rass_theory.certify "
                         f"(rass_theory.scale.check), which supplies its chunk runner; rass_theory.stats runs "
                         f"backend='numpy' only")
    return numpy_chunk_stream


def run_plan(cfg: HarnessConfig, start: int = 0) -> list:
    """Every chunk of every dtype pass, in run order, from global position ``start`` on."""
    specs = []
    for p, dt in enumerate(cfg.dtypes):
        specs += chunk_plan(cfg.n_samples, cfg.chunk_size, cfg.seed, cfg.two_sample_size if p == 0 else 0,
                            dtype=dt, pass_index=p)
    return specs[start:]


def collect_counts(verifier, cfg: HarnessConfig, node: SyntheticNode | None = None, chunk_stream=None, look=None):
    """Run (or resume) every chunk of every pass; return ``(counts per pass, first position run here)``.

    ``chunk_stream`` runs the chunks (:func:`resolve_chunk_stream`; default: NumPy).

    ``look``, when given, is called as ``look(counts, position)`` after every chunk before the
    last (and once on resume, at the resumed position); when it returns true the run stops there
    (:class:`~rass_theory.stats.looks.SequentialLooks`, which records why).  A run stopped by a
    look is checkpointed as not complete, so a resume evaluates the same look on the same counts
    and stops again.

    With ``cfg.checkpoint`` set, the merged counts are saved atomically every
    ``cfg.checkpoint_every`` chunks, at the end, and when the loop is interrupted by any exception
    (``KeyboardInterrupt`` included), which is then re-raised.
    """
    chunk_stream = resolve_chunk_stream(cfg, chunk_stream)
    node = node or build_node(cfg)
    total = len(cfg.dtypes) * n_chunks_of(cfg.n_samples, cfg.chunk_size)
    fingerprint = cfg.fingerprint()
    counts, start = [ExactnessCounts.empty(node) for _ in cfg.dtypes], 0
    if cfg.checkpoint is not None:
        loaded = load_checkpoint(cfg.checkpoint, fingerprint, node, len(cfg.dtypes))
        if loaded is not None:
            counts, start, complete = loaded
            if complete or start >= total:
                return counts, total
            if look is not None and start > 0 and look(counts, start):
                return counts, start
    specs = run_plan(cfg, start)
    position, since_save, stopped = start, 0, False
    stream = chunk_stream(verifier, node, specs, cfg)
    t0 = time.perf_counter()
    try:
        for spec, part in zip(specs, stream):
            if part.n_rows != spec.n:
                raise RuntimeError(f"chunk runner returned {part.n_rows} rows for chunk {spec.index} of {spec.n}")
            counts[spec.pass_index] = counts[spec.pass_index].merge(part)
            position += 1
            since_save += 1
            stopped = look is not None and position < total and bool(look(counts, position))
            if cfg.checkpoint is not None and position < total and (stopped or since_save >= cfg.checkpoint_every):
                save_checkpoint(cfg.checkpoint, counts, position, fingerprint)
                since_save = 0
            if cfg.progress:
                rate = sum(c.n_rows for c in counts) / max(time.perf_counter() - t0, 1e-9)
                print(f"\rchunk {position}/{total}  {rate:,.0f} samples/s", end="", file=sys.stderr)
            if stopped:
                break
    except BaseException:
        if cfg.checkpoint is not None and position > start:
            save_checkpoint(cfg.checkpoint, counts, position, fingerprint)
        raise
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        if cfg.progress:
            print(file=sys.stderr)
    if stopped:
        return counts, start
    if position != total:
        raise RuntimeError(f"chunk runner stopped after chunk {position} of {total}")
    if cfg.checkpoint is not None:
        save_checkpoint(cfg.checkpoint, counts, total, fingerprint, complete=True)
    return counts, start
