"""Torch twin of the speculative tree sampler: full tree expansion, one batched model call per round.

Same semantics, call count and result types as :func:`rass_theory.diffusion.speculative_sample`
with ``expansion="full"`` (``proofs/P9-tree-exactness.md``); everything runs on the target's
device and dtype.  Per round and per depth all active trajectories are processed together with
masks (``torch.where`` / ``gather``), so the only host synchronisation in a round is reading the
committed step counts back at its end (the per-node trace is copied to the host once, after the
run).  Reached through ``diffusion.speculative_sample(..., backend="torch")`` and
``diffusion.plain_sample(..., backend="torch")``; importing this module imports torch.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from .._validation import as_generator, check_positive_int
from ._contract import THRESHOLD_GRID, check_result, resolve_verifier, verifier_name
from .kernel import plain_kernel
from ._checks import check_bool, check_prefetch, unfinished_rows
from .results import NodeRecord, RoundRecord, SpeculativeResult, speedup_estimate
from .torch_target import as_torch_target
from .trajectories import PlainSampleResult
from .trees import TreeShape

__all__ = ["speculative_sample_torch", "plain_sample_torch", "resolve_torch_verifier", "as_torch_target"]

#: drift-source codes used on the device (``results.DRIFT_SOURCES`` keys)
_SOURCES = ("initial", "root", "leaf", "nearest", "parent")
_INITIAL, _ROOT, _LEAF, _NEAREST, _PARENT = range(5)


# ---------------------------------------------------------------------------------------------
# targets, generators, verifiers
# ---------------------------------------------------------------------------------------------

def _device_dtype(target, device, dtype):
    dev = torch.device(device) if device is not None else getattr(target, "device", None)
    dev = torch.device("cpu") if dev is None else torch.device(dev)
    dt = dtype if dtype is not None else getattr(target, "dtype", None)
    dt = torch.float32 if dt is None else dt
    # a name or a NumPy dtype, as the NumPy backend takes them ("float32", np.float64)
    named = {"float32": torch.float32, "float64": torch.float64}
    if isinstance(dt, str):
        dt = named.get(dt, dt)
    elif not isinstance(dt, torch.dtype):
        try:
            dt = named.get(np.dtype(dt).name, dt)
        except TypeError:
            pass
    if dt not in (torch.float32, torch.float64):
        raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dt}")
    return dev, dt


def _torch_generator(rng, device: torch.device) -> torch.Generator:
    """``rng`` (None, int, NumPy Generator/SeedSequence or torch.Generator) -> a generator on ``device``."""
    if isinstance(rng, torch.Generator):
        if torch.device(rng.device).type != device.type:
            raise ValueError(f"rng is a torch.Generator on {rng.device} but the sampler runs on {device}")
        return rng
    gen = torch.Generator(device=device)
    if rng is None:
        gen.seed()
    else:
        gen.manual_seed(int(as_generator(rng).integers(0, 2 ** 63 - 1)))
    return gen


class _SnappedThreshold:
    """Torch threshold policy with per-row parameters snapped to ``THRESHOLD_GRID`` (as NumPy does).

    Rows are grouped by grid cell and each group goes through
    :func:`rass_theory.torch.verifiers.threshold` with that cell's optimal ``(t, weights)``: exact
    for any parameters (proof P2), and the same policy as ``diffusion._contract``'s NumPy one.
    Grouping reads the cells on the host: one extra synchronisation per verified depth on an
    accelerator (none on the CPU).
    """

    name = "threshold"
    backend = "torch"

    def __init__(self, grid=None):
        self.grid = np.asarray(THRESHOLD_GRID if grid is None else grid, dtype=float)
        self._verifiers = {}

    def _cell(self, delta: float) -> int:
        return max(0, int(np.searchsorted(self.grid, delta, side="right")) - 1)

    def _policy(self, K: int, cell: int):
        """The optimal threshold policy of grid cell ``cell`` (the NumPy sampler's, memoised there)."""
        from ._contract import _threshold_policy

        return _threshold_policy(int(K), float(self.grid[cell]))

    def _acceptance(self, K: int, cell: int, delta: float) -> float:
        """Exact acceptance at ``delta`` of grid cell ``cell``'s policy."""
        from ..optimize.policies import threshold_acceptance

        pol = self._policy(K, cell)
        return float(threshold_acceptance(int(K), float(delta), pol.t, pol.weights))

    def expected_acceptance(self, K: int, delta: float) -> float:
        """Exact acceptance of the snapped policy at ``delta`` (parameters of its grid cell)."""
        return self._acceptance(K, self._cell(float(delta)), delta)

    def acceptance_array(self, K: int, delta) -> np.ndarray:
        """Vectorised acceptance at many deltas: each grid cell's policy tabulated at 11 points from
        the cell's left edge to its right edge and interpolated linearly inside the cell (the
        policy changes, and the acceptance jumps, only at grid points; error ``< 1e-3``)."""
        delta = np.asarray(delta, dtype=float)
        cells = np.clip(np.searchsorted(self.grid, delta, side="right") - 1, 0, self.grid.size - 1)
        out = np.empty(delta.shape)
        for c in np.unique(cells):
            m = cells == c
            out[m] = np.interp(delta[m], *self._cell_table(int(K), int(c)))
        return out

    def _cell_table(self, K: int, c: int):
        key = ("table", K, c)
        if key not in self._verifiers:                     # built on first use, one grid cell at a time
            edges = np.r_[self.grid, max(self.grid[-1] * 1.5, self.grid[-1] + 2.0)]
            xs = np.linspace(edges[c], edges[c + 1], 11)
            self._verifiers[key] = (xs, np.array([self._acceptance(K, c, x) for x in xs]))
        return self._verifiers[key]

    def _verifier(self, K, cell):
        key = (K, cell)
        if key not in self._verifiers:
            from ..torch import verifiers as tv

            pol = self._policy(K, cell)
            self._verifiers[key] = tv.threshold(t=float(pol.t), weights=np.asarray(pol.weights, dtype=float))
        return self._verifiers[key]

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        from ..verifiers._tensors import TorchVerifierResult

        n, K, d = children.shape
        sig = sigma if isinstance(sigma, torch.Tensor) else torch.full((n,), float(sigma), dtype=children.dtype,
                                                                         device=children.device)
        delta = torch.linalg.vector_norm(mu_target - mu_draft, dim=1) / sig
        g = torch.as_tensor(self.grid, dtype=delta.dtype, device=delta.device)
        cell = (torch.searchsorted(g, delta, right=True) - 1).clamp(min=0)
        cells = cell.cpu().numpy()
        states = torch.empty_like(mu_draft)
        accepted = torch.empty(n, dtype=torch.bool, device=children.device)
        index = torch.empty(n, dtype=torch.int64, device=children.device)
        for c in np.unique(cells):
            rows = torch.as_tensor(np.flatnonzero(cells == c), device=children.device)
            res = self._verifier(K, int(c))(children[rows], mu_draft[rows], mu_target[rows], sig[rows], rng)
            states[rows], accepted[rows], index[rows] = res.states, res.accepted, res.child_index
        return TorchVerifierResult(states, accepted, index)


def resolve_torch_verifier(spec, K: int):
    """A torch verifier for ``K`` children: ``"threshold"`` is :class:`_SnappedThreshold`; every
    other rule name and any callable resolve as for the NumPy sampler
    (:func:`._contract.resolve_verifier`: one class per rule serves both back ends)."""
    from ..verifiers import rule_key

    if isinstance(spec, str) and rule_key(spec) == "threshold":
        return _SnappedThreshold()
    return resolve_verifier(spec, K)


def _check_verifier_output(res, children: torch.Tensor, like: torch.Tensor, name: str):
    """The contract's whole-array clauses (:func:`._contract.check_result`, metadata only: no host
    synchronisation), then the sampler's own: tensors on the chain's device, states in its dtype."""
    states, accepted, index = check_result(res, children, values=False)
    for label, t in (("states", states), ("accepted", accepted), ("child_index", index)):
        if not isinstance(t, torch.Tensor) or t.device != like.device:
            raise ValueError(f"verifier {name!r} broke the contract: {label} must be a tensor on {like.device}")
    if states.dtype != like.dtype:
        raise ValueError(f"verifier {name!r} broke the contract: states must have dtype {like.dtype}, "
                         f"got {states.dtype}")
    return states, accepted, index


def _velocity(target, x, s):
    """Call the target; metadata checks only (no synchronisation)."""
    v = target.velocity(x, s)
    if not isinstance(v, torch.Tensor) or v.shape != x.shape or v.dtype != x.dtype or v.device != x.device:
        got = (f"{type(v).__name__}" if not isinstance(v, torch.Tensor)
               else f"shape {tuple(v.shape)}, {v.dtype} on {v.device}")
        raise ValueError(f"target {getattr(target, 'name', type(target).__name__)!r}: velocity(x, s) must return a "
                         f"tensor of shape {tuple(x.shape)}, {x.dtype} on {x.device}; got {got}")
    return v


def _batched_velocity(target, x, s, max_batch):
    if max_batch is None or x.shape[0] <= max_batch:
        return _velocity(target, x, s)
    return torch.cat([_velocity(target, x[i:i + max_batch], s[i:i + max_batch])
                      for i in range(0, x.shape[0], max_batch)])


def _upload(arr: np.ndarray, device: torch.device):
    """Host int64 rows -> device tensors without a synchronisation (pinned, non-blocking on CUDA)."""
    t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.int64))
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device) if device.type != "cpu" else t.clone()


def _apply_tail(target, kernel, sch_t, x):
    for k in range(kernel.stop, kernel.n_steps):
        s = sch_t["s"][k].expand(x.shape[0])
        x = kernel.affine(k, x, _velocity(target, x, s))
    return x


class _DeviceRecorder:
    """Committed states, draft means and depths on the device (layout: ``diffusion.trajectories``).

    One scratch column past the last state receives the writes of rows that have already ended
    their round, so recording needs no mask indexing (no host synchronisation).
    """

    def __init__(self, kernel, x0):
        n, d = x0.shape
        self.k0, self.S = kernel.first_stochastic, kernel.n_states
        self.traj = torch.zeros((n, self.S + 1, d), dtype=x0.dtype, device=x0.device)
        self.traj[:, 0] = x0
        self.dm = torch.zeros_like(self.traj)
        self.depths = torch.full((n, self.S + 1), -1, dtype=torch.int64, device=x0.device)

    def commit(self, rows, steps, alive, states, mu_d, depth):
        col = torch.where(alive, steps - self.k0, torch.full_like(steps, self.S))
        self.traj[rows, col] = states
        self.dm[rows, col] = mu_d
        self.depths[rows, col] = depth

    def arrays(self):
        def host(t):
            return t[:, :self.S].detach().cpu().double().numpy()
        return host(self.traj), host(self.dm), self.depths[:, :self.S].cpu().numpy()


def _raise_pending(target):
    check = getattr(target, "raise_pending", None)
    if check is not None:
        check()


# ---------------------------------------------------------------------------------------------
# plain sampling
# ---------------------------------------------------------------------------------------------

def plain_sample_torch(target, n_samples: int, n_steps: int = 30, churn: float = 0.06, rng=None, *,
                       kind: str = "sde", protocol: str = "default", device=None, dtype=None,
                       chunk_size: int | None = None, return_tensor: bool = False,
                       return_trajectories: bool = False):
    """Plain churned Euler chain on torch: one target call per stochastic step.

    Parameters
    ----------
    target : model with ``dim`` and ``velocity(x, s)`` on tensors, or a ``GaussianMixture``
    n_samples, n_steps, churn, kind, protocol
        As in :func:`rass_theory.diffusion.plain_sample`.
    rng : None, int, NumPy Generator/SeedSequence or torch.Generator
    device, dtype : optional
        Default: the target's (``target.device`` / ``target.dtype``), else CPU float32.
    chunk_size : int, optional
        Trajectories per batch (memory bound only).
    return_tensor : bool
        Return the torch tensor instead of a float64 NumPy array.
    return_trajectories : bool
        Return a :class:`~rass_theory.diffusion.trajectories.PlainSampleResult` (float64 NumPy
        trajectories, kernel means and depths, as the NumPy ``plain_sample``); its ``samples``
        follow ``return_tensor``.  Off by default (``8 n S (2 dim + 1)`` bytes on the host, the
        same in the sampler's dtype on the device while sampling).

    Returns
    -------
    ndarray (n_samples, dim), float64 (or the tensor with ``return_tensor=True``), or
    PlainSampleResult with ``return_trajectories=True``

    Notes
    -----
    ``x ~ N(0, I)`` at the first stochastic step ``k0``; ``x_{k+1} = a_k x + b_k u(x, s_k) + sigma_k z``
    for ``k0 <= k < stop``; then the deterministic tail (``ChurnSchedule``).
    """
    target = as_torch_target(target)
    n_samples = check_positive_int(n_samples, "n_samples")
    kernel = plain_kernel(target, n_steps, churn, kind=kind, protocol=protocol)
    record = check_bool(return_trajectories, "return_trajectories")
    dev, dt = _device_dtype(target, device, dtype)
    gen = _torch_generator(rng, dev)
    chunk = n_samples if chunk_size is None else check_positive_int(chunk_size, "chunk_size")
    sch = kernel.coefficients(dt, dev)
    parts, recorded = [], []
    for lo in range(0, n_samples, chunk):
        m = min(chunk, n_samples - lo)
        x = torch.randn((m, target.dim), generator=gen, dtype=dt, device=dev)
        rec = _DeviceRecorder(kernel, x) if record else None
        every = torch.ones(m, dtype=torch.bool, device=dev)
        all_rows = torch.arange(m, device=dev)
        for k in range(kernel.first_stochastic, kernel.stop):
            mean = kernel.affine(k, x, _velocity(target, x, sch["s"][k].expand(m)))
            x = mean + sch["sigma"][k] * torch.randn(x.shape, generator=gen, dtype=dt, device=dev)
            if rec is not None:
                rec.commit(all_rows, torch.full((m,), k + 1, device=dev), every, x, mean, 0)
        x = _apply_tail(target, kernel, sch, x)
        _raise_pending(target)
        parts.append(x)
        if rec is not None:
            recorded.append(rec.arrays())
    out = torch.cat(parts)
    samples = out if return_tensor else out.detach().cpu().double().numpy()
    if not record:
        return samples
    traj, means, depths = (np.concatenate([r[i] for r in recorded]) for i in range(3))
    return PlainSampleResult(samples, traj, means, depths, target_calls=kernel.n_stochastic * len(recorded))


# ---------------------------------------------------------------------------------------------
# speculative sampling
# ---------------------------------------------------------------------------------------------

def speculative_sample_torch(target, verifier, K=4, L=3, n_samples: int = 1000, n_steps: int = 30,
                             churn: float = 0.06, rng=None, *, kind: str = "sde", prefetch: str = "nearest",
                             protocol: str = "default", evaluate_leaves: bool = False, device=None, dtype=None,
                             record_trace: bool = True, max_batch: int | None = None,
                             return_trajectories: bool = False) -> SpeculativeResult:
    """Speculative tree sampling on torch, full expansion, one batched target call per round.

    Parameters
    ----------
    target : model with ``dim`` and ``velocity(x, s)`` on tensors, or a ``GaussianMixture``
        ``velocity`` receives flattened states ``(m, dim)`` and ``s`` of shape ``(m,)`` (see
        :mod:`rass_theory.models` for adapters); a NumPy mixture is wrapped in float64.
    verifier : str or callable
        ``"rmc"``, ``"dgrs"``, ``"rass"``, ``"threshold"``, ``"optimal_list"``, ``"resample"``
        (resolved by :func:`resolve_torch_verifier` to the :mod:`rass_theory.torch.verifiers` rules) or a torch
        verifier callable ``(children, mu_draft, mu_target, sigma, generator) -> result``.
    K, L, n_samples, n_steps, churn, kind, prefetch, protocol, evaluate_leaves
        As in :func:`rass_theory.diffusion.speculative_sample` (frozen draft, full expansion).
    rng : None, int, NumPy Generator/SeedSequence or torch.Generator
    device, dtype : optional
        Default: the target's (``target.device`` / ``target.dtype``), else CPU float32.
    record_trace : bool
        Keep the per-node trace (``nodes``).
    max_batch : int, optional
        Split the round's batched model call into forward passes of at most this many nodes
        (memory only; still one target call per round in the count).
    return_trajectories : bool
        Record every committed state, its draft mean and depth (on the device while sampling,
        ``(n_samples, S + 1, dim)`` twice in the sampler's dtype with a scratch column; copied to
        float64 NumPy ``run.trajectories``, ``run.draft_means``, ``run.depths`` at the end, as in
        the NumPy sampler).  Off by default; same law, random stream and target calls.

    Returns
    -------
    SpeculativeResult
        ``samples`` float64 NumPy; the tensor in ``extra["samples_torch"]``; ``expansion="full"``.

    Notes
    -----
    Round from ``x`` at step ``k`` with frozen velocity ``u_f``: every node ``y`` at depth ``j`` is
    drafted from ``N(a_{k+j} y + b_{k+j} u_f, sigma_{k+j}^2 I)``; the internal nodes (and the leaves
    with ``evaluate_leaves``) of all trajectories go through the target in one batched call; the
    walk verifies, from the root, the children of the current node with target mean
    ``a y + b u(y, s_{k+j})`` until a correction or a leaf.  Target calls per trajectory: the
    initial evaluation, one per round that needs the batch (``depth >= 2``, a root not yet
    evaluated, or leaves evaluated), one more per round under ``prefetch="none"`` -- the NumPy
    sampler's count.  The next round's frozen velocity follows ``prefetch`` exactly as in the
    NumPy sampler (nearest drafted sibling of a correction, last verified node, a committed
    evaluated leaf).  Exactness: ``proofs/P9-tree-exactness.md``.
    """
    t0 = time.perf_counter()
    target = as_torch_target(target)
    shape = TreeShape.from_spec(K, L)
    n_samples = check_positive_int(n_samples, "n_samples")
    kernel = plain_kernel(target, n_steps, churn, kind=kind, protocol=protocol)
    schedule = kernel.schedule
    return_trajectories = check_bool(return_trajectories, "return_trajectories")
    prefetch = check_prefetch(prefetch)
    evaluate_leaves = check_bool(evaluate_leaves, "evaluate_leaves")
    if max_batch is not None:
        max_batch = check_positive_int(max_batch, "max_batch")
    dev, dt = _device_dtype(target, device, dtype)
    gen = _torch_generator(rng, dev)
    verifiers = {k: resolve_torch_verifier(verifier, k) for k in sorted(set(shape.widths))}
    name = verifier_name(verifier)

    d = target.dim
    k0, stop, n_std = schedule.first_stochastic, schedule.stop, schedule.n_stochastic
    sch = kernel.coefficients(dt, dev)
    x = torch.randn((n_samples, d), generator=gen, dtype=dt, device=dev)
    recorder = _DeviceRecorder(kernel, x) if return_trajectories else None
    v_frozen = _velocity(target, x, sch["s"][k0].expand(n_samples))      # initial evaluation (counted)
    step = np.full(n_samples, k0, dtype=np.int64)
    calls = np.ones(n_samples, dtype=np.int64)
    root_exact = np.ones(n_samples, dtype=bool)
    source = np.full(n_samples, _INITIAL, dtype=np.int64)
    walk = _TreeWalk(target, kernel, shape, sch, verifiers, gen, stop=stop, prefetch=prefetch,
                     evaluate_leaves=bool(evaluate_leaves), max_batch=max_batch, name=name, recorder=recorder)

    round_rows, trace = [], []
    round_counter = 0
    for active in unfinished_rows(step, stop):
        root_call = np.zeros(active.size, dtype=bool)
        if prefetch == "none":
            root_call = ~root_exact[active]
        depth_eff = np.minimum(shape.depth, stop - step[active])
        # one asynchronous upload of the round's host data (pinned memory on an accelerator)
        act, k_t, de_t, rex_t = _upload(np.stack([active, step[active], depth_eff, root_exact[active] | root_call]),
                                        dev)
        rows = active[root_call]
        if rows.size:                                            # prefetch="none": evaluate the roots first
            rt, rk = _upload(np.stack([rows, step[rows]]), dev)
            v_frozen[rt] = _velocity(target, x[rt], sch["s"][rk])
            root_exact[rows] = True
            source[rows] = _ROOT
            calls[rows] += 1
        called = (depth_eff >= 2) | ~root_exact[active] | bool(evaluate_leaves)
        calls[active] += called
        out = walk.round(x[act], k_t, v_frozen[act], rex_t, de_t, int(depth_eff.max()), bool(called.any()), act)
        y, committed_t, v_new, exact_new, src_new, records = out
        x[act] = y
        v_frozen[act] = v_new
        pending = target.pop_pending() if hasattr(target, "pop_pending") else None
        parts = [committed_t, exact_new.long(), src_new]
        if pending is not None:
            parts.append(pending[0].long().expand(committed_t.shape[0]))
        host = torch.stack(parts).cpu().numpy()            # the round's one synchronisation
        if pending is not None and host[3, 0]:
            raise target.nonfinite_error(pending[1])
        committed = host[0]
        round_ids = round_counter + np.arange(active.size)
        round_counter += active.size
        round_rows.append((active, step[active].copy(), depth_eff, committed, called, source[active].copy(),
                           root_call))
        if record_trace:
            trace.append((round_ids, step[active].copy(), source[active].copy(), records))
        step[active] += committed
        root_exact[active] = host[1].astype(bool)
        source[active] = host[2]

    samples_t = _apply_tail(target, kernel, sch, x)
    _raise_pending(target)
    traj = recorder.arrays() if recorder is not None else (None, None, None)
    speedup, se = speedup_estimate(n_std, calls)
    src_names = np.asarray(_SOURCES)
    rounds = RoundRecord(*(np.concatenate([r[i] for r in round_rows]) for i in range(5)),
                         drift_source=src_names[np.concatenate([r[5] for r in round_rows])],
                         root_call=np.concatenate([r[6] for r in round_rows]))
    nodes = _node_record(trace, shape, src_names)
    return SpeculativeResult(
        samples=samples_t.detach().cpu().double().numpy(), target_calls=calls, n_standard_steps=n_std,
        speedup=speedup, speedup_se=se, verifier=name, shape=shape, draft="frozen", rounds=rounds, nodes=nodes,
        wall_time_s=time.perf_counter() - t0, expansion="full", n_steps=schedule.n_steps, churn=schedule.churn,
        extra={"samples_torch": samples_t, "backend": "torch", "device": str(dev), "dtype": str(dt)},
        prefetch=prefetch, protocol=protocol, kind=kind, evaluate_leaves=bool(evaluate_leaves), first_step=k0,
        trajectories=traj[0], draft_means=traj[1], depths=traj[2],
    )


def _node_record(trace, shape, src_names) -> NodeRecord:
    """Host copy of the per-node trace (one transfer): keep the rows alive (verified) at each depth."""
    if not trace:
        e = np.zeros(0, dtype=np.int64)
        return NodeRecord(e, e, e, np.zeros(0), np.zeros(0, bool), e, np.zeros(0, dtype=str))
    recs = [r for _, _, _, records in trace for r in records]
    delta = torch.cat([r[0].double() for r in recs]).cpu().numpy()
    sigma = torch.cat([r[3].double() for r in recs]).cpu().numpy()
    mu_ratio = torch.cat([r[4].double() for r in recs]).cpu().numpy()
    flags = torch.cat([torch.stack([r[1], r[2]]) for r in recs], dim=1).cpu().numpy()
    cols = {k: [] for k in ("round_id", "depth", "step", "K", "source")}
    for round_ids, steps, sources, records in trace:
        for j in range(len(records)):
            cols["round_id"].append(round_ids)
            cols["depth"].append(np.full(round_ids.size, j, dtype=np.int64))
            cols["step"].append(steps + j)
            cols["K"].append(np.full(round_ids.size, shape.widths[j], dtype=np.int64))
            cols["source"].append(src_names[sources])
    c = {k: np.concatenate(v) for k, v in cols.items()}
    alive = flags[1].astype(bool)
    return NodeRecord(c["round_id"][alive], c["depth"][alive], c["step"][alive], delta[alive],
                      flags[0][alive].astype(bool), c["K"][alive], source=c["source"][alive],
                      sigma=sigma[alive], mu_ratio=mu_ratio[alive])


class _TreeWalk:
    """One round for a batch of trajectories: draft the trees, one batched call, masked walk."""

    def __init__(self, target, kernel, shape, sch, verifiers, gen, *, stop, prefetch, evaluate_leaves, max_batch,
                 name, recorder=None):
        self.target, self.shape, self.sch, self.verifiers, self.gen = target, shape, sch, verifiers, gen
        self.kernel = kernel
        self.stop, self.prefetch, self.evaluate_leaves, self.max_batch = stop, prefetch, evaluate_leaves, max_batch
        self.name = name
        self.recorder = recorder

    def _draft(self, x, k, v_frozen):
        """Every node of every tree, level by level: ``levels[j]`` has shape (m, N_j, d)."""
        sch, m, d = self.sch, x.shape[0], x.shape[1]
        levels = [x[:, None, :]]
        for j, Kj in enumerate(self.shape.widths):
            kk = (k + j).clamp(max=self.stop - 1)                 # nodes past the schedule are never used
            par = levels[j]
            mu = self.kernel.affine(kk, par, v_frozen[:, None, :])
            noise = torch.randn((m, par.shape[1], Kj, d), generator=self.gen, dtype=x.dtype, device=x.device)
            kids = mu[:, :, None, :] + sch["sigma"][kk][:, None, None, None] * noise
            levels.append(kids.reshape(m, -1, d))
        return levels

    def round(self, x, k, v_frozen, root_exact, depth_eff, max_depth, any_called, rows=None):
        """One round for ``m`` trajectories; ``k``, ``root_exact``, ``depth_eff`` are device tensors (m,).

        ``rows`` (the trajectories' indices, a device tensor) is needed only to record them."""
        sch, shape = self.sch, self.shape
        m, d = x.shape
        dev = x.device
        root_exact = root_exact.bool()
        L = shape.depth
        levels = self._draft(x, k, v_frozen)
        n_lev = L + 1 if self.evaluate_leaves else L
        sizes = [levels[j].shape[1] for j in range(n_lev)]
        offsets = np.cumsum([0] + sizes)
        T = int(offsets[-1])
        if any_called:
            nodes = torch.cat(levels[:n_lev], dim=1).reshape(m * T, d)
            s_idx = torch.cat([(k + j).clamp(max=self.stop)[:, None].expand(m, sizes[j]) for j in range(n_lev)], 1)
            V = _batched_velocity(self.target, nodes, sch["s"][s_idx.reshape(-1)], self.max_batch).reshape(m, T, d)
            V[:, 0] = torch.where(root_exact[:, None], v_frozen, V[:, 0])     # root already evaluated: reuse
        else:        # every root exact and L = 1 without leaves: nothing to evaluate
            V = v_frozen[:, None, :]
        ar = torch.arange(m, device=dev)
        y = x.clone()
        committed = torch.zeros(m, dtype=torch.int64, device=dev)
        alive = torch.ones(m, dtype=torch.bool, device=dev)
        pos = torch.zeros(m, dtype=torch.int64, device=dev)
        v_out = v_frozen.clone()
        exact_out = torch.zeros(m, dtype=torch.bool, device=dev)
        src_out = torch.full((m,), _PARENT, dtype=torch.int64, device=dev)
        records = []
        for j in range(max_depth):
            Kj = shape.widths[j]
            kk = (k + j).clamp(max=self.stop - 1)
            sig = sch["sigma"][kk]
            v_node = V[ar, offsets[j] + pos]
            mu_t = self.kernel.affine(kk, y, v_node)
            mu_d = self.kernel.affine(kk, y, v_frozen)
            child_ids = pos[:, None] * Kj + torch.arange(Kj, device=dev)[None, :]
            children = levels[j + 1][ar[:, None], child_ids]
            res = self.verifiers[Kj](children, mu_d, mu_t, sig, self.gen)
            states, accepted, cidx = _check_verifier_output(res, children, y, self.name)
            sig_rows = torch.as_tensor(sig, dtype=mu_d.dtype, device=mu_d.device).expand(mu_d.shape[0])
            records.append((torch.linalg.vector_norm(mu_t - mu_d, dim=1) / sig_rows, accepted, alive,
                            sig_rows, torch.linalg.vector_norm(mu_d, dim=1) / sig_rows))
            if self.recorder is not None:
                self.recorder.commit(rows, k + j + 1, alive, states, mu_d, j)
            y = torch.where(alive[:, None], states, y)
            committed = committed + alive.long()
            cont = alive & accepted & (j + 1 < depth_eff)
            ends = alive & ~cont
            # the next round's frozen velocity (results.DRIFT_SOURCES)
            v_out = torch.where(ends[:, None], v_node, v_out)
            src_out = torch.where(ends, torch.full_like(src_out, _PARENT), src_out)
            chosen = child_ids[ar, cidx.clamp(min=0)]
            if any_called and j + 1 < n_lev:                       # children are in the batch
                leaf_level = (j + 1) == depth_eff
                known = ~leaf_level | self.evaluate_leaves
                if self.evaluate_leaves:
                    leaf = ends & accepted & leaf_level
                    v_out = torch.where(leaf[:, None], V[ar, offsets[j + 1] + chosen], v_out)
                    exact_out = exact_out | leaf
                    src_out = torch.where(leaf, torch.full_like(src_out, _LEAF), src_out)
                if self.prefetch == "nearest":
                    near = ends & ~accepted & known
                    nearest = ((children - y[:, None, :]) ** 2).sum(dim=2).argmin(dim=1)   # ties: lowest index
                    v_near = V[ar, offsets[j + 1] + child_ids[ar, nearest]]
                    v_out = torch.where(near[:, None], v_near, v_out)
                    src_out = torch.where(near, torch.full_like(src_out, _NEAREST), src_out)
            pos = torch.where(cont, chosen, pos)
            alive = cont
        return y, committed, v_out, exact_out, src_out, records
