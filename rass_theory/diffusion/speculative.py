"""Speculative sampling of the churned Euler chain with draft trees.

One *round* per trajectory: draft a tree from the current state, make ONE batched target call on
the tree's internal nodes (root included), then walk down from the root verifying each node's
children until a correction (rejection) or a leaf.  Every committed state is an exact draw of the
target kernel given the previous committed state (``proofs/P9-tree-exactness.md``), so the
committed chain has the plain chain's law.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._validation import as_generator, check_positive_int
from ._contract import check_result, resolve_verifier, verifier_name
from .plain import check_target
from .schedule import ChurnSchedule
from .trees import TreeShape

__all__ = ["speculative_sample", "SpeculativeResult", "RoundRecord", "NodeRecord"]

_DRAFT_MODES = ("frozen",)
_EXPANSIONS = ("lazy", "full")


@dataclass(frozen=True)
class NodeRecord:
    """One row per verified node (every node whose children went through the verifier).

    Attributes
    ----------
    round_id, depth, step : ndarray of int
        Round (global id), depth in the tree (0 = root) and schedule step ``k`` of the node.
    delta : ndarray of float
        ``||mu_target - mu_draft|| / sigma`` at the node.
    accepted : ndarray of bool
        Whether the verifier committed one of the node's drafted children.
    K : ndarray of int
        Number of children of the node.
    """

    round_id: np.ndarray
    depth: np.ndarray
    step: np.ndarray
    delta: np.ndarray
    accepted: np.ndarray
    K: np.ndarray


@dataclass(frozen=True)
class RoundRecord:
    """One row per round.

    Attributes
    ----------
    trajectory : ndarray of int
    start_step : ndarray of int
        Schedule step of the round's root.
    depth : ndarray of int
        Effective tree depth ``min(L, n_stochastic - start_step)``.
    committed : ndarray of int
        Steps committed by the round (accepted children plus the final correction or leaf).
    called : ndarray of bool
        Whether the round made a target call (False only when every internal node was
        already evaluated: the first round of a frozen-draft run with ``L = 1``).
    """

    trajectory: np.ndarray
    start_step: np.ndarray
    depth: np.ndarray
    committed: np.ndarray
    called: np.ndarray


@dataclass(frozen=True)
class SpeculativeResult:
    """Outcome of :func:`speculative_sample`.

    Attributes
    ----------
    samples : ndarray, shape (n_samples, dim)
        Final states (after the deterministic tail).
    target_calls : ndarray of int, shape (n_samples,)
        Target calls per trajectory over the stochastic part (the initial evaluation that
        the frozen draft needs included; the deterministic tail excluded, as in plain sampling).
    n_standard_steps : int
        Stochastic steps of the schedule: the plain chain's target calls on the same part.
    speedup, speedup_se : float
        ``n_standard_steps / mean(target_calls)`` and its delta-method standard error
        ``n_standard_steps * sd(target_calls) / (sqrt(n) mean^2)``.
    verifier : str
    shape : TreeShape
    draft : str
    rounds : RoundRecord
    nodes : NodeRecord
    wall_time_s : float
    expansion : str
        ``"lazy"`` (only the walked path is materialised) or ``"full"`` (every node drafted and
        every internal node target-evaluated, as on an accelerator).  Same law.
    """

    samples: np.ndarray
    target_calls: np.ndarray
    n_standard_steps: int
    speedup: float
    speedup_se: float
    verifier: str
    shape: TreeShape
    draft: str
    rounds: RoundRecord
    nodes: NodeRecord
    wall_time_s: float
    expansion: str
    n_steps: int = 0
    churn: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def target_nodes_per_round(self) -> int:
        """Target-evaluated nodes of one full round (see :class:`TreeShape`)."""
        return self.shape.target_nodes

    @property
    def drafted_nodes_per_round(self) -> int:
        return self.shape.drafted_nodes

    @property
    def mean_committed_per_round(self) -> float:
        return float(self.rounds.committed.mean())

    def deltas_by_depth(self) -> list:
        """Deltas met at each depth: a list of arrays, entry ``j`` for depth ``j``."""
        return [self.nodes.delta[self.nodes.depth == j] for j in range(self.shape.depth)]

    def acceptance_by_depth(self) -> np.ndarray:
        """Measured acceptance rate at each depth (``nan`` where no node was met)."""
        out = np.full(self.shape.depth, np.nan)
        for j in range(self.shape.depth):
            m = self.nodes.depth == j
            if m.any():
                out[j] = self.nodes.accepted[m].mean()
        return out


def _speedup(n_std: int, calls: np.ndarray):
    mean = calls.mean()
    sd = calls.std(ddof=1) if calls.size > 1 else 0.0
    return n_std / mean, n_std * sd / (np.sqrt(calls.size) * mean ** 2)


def speculative_sample(target, verifier, K=4, L=3, n_samples: int = 1000, n_steps: int = 30,
                       churn: float = 0.06, rng=None, *, kind: str = "sde", draft="frozen",
                       expansion: str = "lazy",
                       max_floats_in_memory: int = 2 ** 24) -> SpeculativeResult:
    """Sample the churned Euler chain speculatively with draft trees.

    Parameters
    ----------
    target : GaussianMixture
        The target model (anything with ``dim`` and ``velocity(x, s)``).
    verifier : str or callable
        ``"rmc"``, ``"dgrs"``, ``"rass"``, ``"threshold"`` or a callable obeying the verifier
        contract (DESIGN 4).  Names are resolved once per distinct width; ``"threshold"`` is
        the optimal threshold policy with parameters chosen on a grid of deltas (exact for any
        parameters; see ``diffusion._contract.snapped_threshold_verifier``).
    K : int or sequence of int
        Children per node; a sequence gives per-depth widths ``(K_0, ..., K_{L-1})``.
    L : int or None
        Tree depth (must match ``len(K)`` when ``K`` is a sequence; may then be None).
    n_samples, n_steps : int
    churn : float
        Churn noise level in ``(0, inf)``.
    rng : int, SeedSequence, Generator or None
    kind : {"sde", "ddim"}
        Form of the stochastic step (default ``"sde"``), passed to :class:`ChurnSchedule`; use
        the same ``kind`` in :func:`plain_sample` for the matching reference chain.  Draft and
        target share the kernel (only the velocity differs), so exactness holds for either.
        Anything else raises ValueError.
    draft : "frozen" or GaussianMixture
        ``"frozen"``: the draft mean of every node of a round uses the target velocity of the
        last verified (target-evaluated) state, frozen for the whole round -- no extra target
        call.  A :class:`GaussianMixture`: an independent cheap draft model evaluated at every
        node (its calls are not counted).
    expansion : {"lazy", "full"}
        ``"full"`` drafts every node and target-evaluates every internal node in one batched
        array call, as an accelerator would; ``"lazy"`` materialises only the walked path.
        Both have the same law and the same target-call count (P9 section 4).
    max_floats_in_memory : int
        ``"full"`` expansion processes trajectories in chunks whose trees hold at most this many
        floats (nodes x dim; default 2**24, 128 MiB of states, peak about three times that).

    Returns
    -------
    SpeculativeResult

    Notes
    -----
    Round from state ``x`` at step ``k`` with frozen velocity ``u_f``: a node ``y`` at depth ``j``
    (step ``k + j``) has draft mean ``a_{k+j} y + b_{k+j} u_f`` and target mean
    ``a_{k+j} y + b_{k+j} u(y, s_{k+j})``; children are ``N(draft mean, sigma_{k+j}^2 I)``.  The
    walk verifies the current node's children; on acceptance it moves to the accepted child
    (whose drafted subtree is a fresh draft tree from it), on rejection it commits the
    verifier's correction and ends the round; reaching a leaf commits it.  The next round's
    frozen velocity is that of the last verified node.  Target calls: one per round (the batched
    call on internal nodes), plus one initial evaluation at ``x_0`` for the frozen draft (which
    makes the first round's root exact: ``delta = 0``).  Trees are cut at the end of the
    stochastic schedule.  Proof of exactness: ``proofs/P9-tree-exactness.md``.
    """
    t0 = time.perf_counter()
    target = check_target(target)
    shape = TreeShape.from_spec(K, L)
    n_samples = check_positive_int(n_samples, "n_samples")
    schedule = ChurnSchedule(n_steps, churn, kind=kind)
    rng = as_generator(rng)
    if expansion not in _EXPANSIONS:
        raise ValueError(f"expansion must be one of {_EXPANSIONS}, got {expansion!r}")
    max_floats_in_memory = check_positive_int(max_floats_in_memory, "max_floats_in_memory")
    if isinstance(draft, str):
        if draft not in _DRAFT_MODES:
            raise ValueError(f"draft must be 'frozen' or a GaussianMixture draft model, got {draft!r}")
        draft_model = None
        draft_name = "frozen"
    else:
        if not (hasattr(draft, "velocity") and hasattr(draft, "dim")):
            raise TypeError(f"draft must be 'frozen' or a model with .dim and .velocity, got {type(draft).__name__}")
        if draft.dim != target.dim:
            raise ValueError(f"draft model dim {draft.dim} does not match target dim {target.dim}")
        draft_model = draft
        draft_name = "model"
    verifiers = {k: resolve_verifier(verifier, k) for k in sorted(set(shape.widths))}

    d = target.dim
    n_std = schedule.n_stochastic
    x = rng.standard_normal((n_samples, d))
    step = np.zeros(n_samples, dtype=np.int64)
    calls = np.zeros(n_samples, dtype=np.int64)
    if draft_model is None:
        v_last = target.velocity(x, schedule.s[0])   # initial evaluation (counted)
        calls += 1
        root_eval = np.ones(n_samples, dtype=bool)
    else:
        v_last = np.zeros((n_samples, d))
        root_eval = np.zeros(n_samples, dtype=bool)

    ctx = _Context(target, draft_model, schedule, shape, verifiers, rng)
    round_rows: list = []
    node_rows: list = []
    round_counter = 0
    while True:
        active = np.flatnonzero(step < n_std)
        if active.size == 0:
            break
        depth_eff = np.minimum(shape.depth, n_std - step[active])
        called = (depth_eff >= 2) | ~root_eval[active]
        calls[active] += called
        round_ids = round_counter + np.arange(active.size)
        round_counter += active.size
        if expansion == "lazy":
            y, committed, v_new = ctx.walk_lazy(x[active], step[active], v_last[active], root_eval[active],
                                                depth_eff, round_ids, node_rows)
        else:
            per_row = sum(shape.nodes_at_depth(j) for j in range(shape.depth + 1))
            chunk = max(1, max_floats_in_memory // (per_row * target.dim))
            parts = []
            for lo in range(0, active.size, chunk):
                sl = slice(lo, lo + chunk)
                rows = active[sl]
                parts.append(ctx.walk_full(x[rows], step[rows], v_last[rows], root_eval[rows],
                                           depth_eff[sl], round_ids[sl], node_rows))
            y = np.concatenate([p[0] for p in parts])
            committed = np.concatenate([p[1] for p in parts])
            v_new = np.concatenate([p[2] for p in parts])
        round_rows.append((active, step[active].copy(), depth_eff, committed, called))
        x[active] = y
        step[active] += committed
        v_last[active] = v_new
        root_eval[active] = False

    samples = schedule.apply_tail(target, x)
    speedup, se = _speedup(n_std, calls.astype(np.float64))
    rounds = RoundRecord(*(np.concatenate([r[i] for r in round_rows]) for i in range(5)))
    nodes = NodeRecord(*(np.concatenate([r[i] for r in node_rows]) if node_rows else np.array([])
                         for i in range(6)))
    return SpeculativeResult(
        samples=samples, target_calls=calls, n_standard_steps=n_std, speedup=float(speedup),
        speedup_se=float(se), verifier=verifier_name(verifier), shape=shape, draft=draft_name,
        rounds=rounds, nodes=nodes, wall_time_s=time.perf_counter() - t0, expansion=expansion,
        n_steps=schedule.n_steps, churn=schedule.churn,
    )


class _Context:
    """Everything a round needs; the two walks share the per-depth verification."""

    def __init__(self, target, draft_model, schedule, shape, verifiers, rng):
        self.target = target
        self.draft_model = draft_model
        self.schedule = schedule
        self.shape = shape
        self.verifiers = verifiers
        self.rng = rng

    def draft_velocity(self, y, kk, v_frozen):
        if self.draft_model is None:
            return v_frozen
        return self.draft_model.velocity(y, self.schedule.s[kk])

    def verify(self, j, y, kk, u_target, u_draft, children_fn, round_ids, node_rows):
        """Verify the children of nodes ``y`` (rows at depth ``j``, steps ``kk``)."""
        sch = self.schedule
        Kj = self.shape.widths[j]
        mu_t = sch.mean(kk, y, u_target)
        mu_d = sch.mean(kk, y, u_draft)
        sig = sch.sigma[kk]
        children = children_fn(mu_d, sig)
        delta = np.linalg.norm(mu_t - mu_d, axis=1) / sig
        res = self.verifiers[Kj](children, mu_d, mu_t, sig, self.rng)
        states, accepted, idx = check_result(res, children)
        node_rows.append((round_ids, np.full(y.shape[0], j), kk, delta, accepted, np.full(y.shape[0], Kj)))
        return states, accepted, idx

    def walk_lazy(self, x, k, v_last, root_eval, depth_eff, round_ids, node_rows):
        sch, tgt, rng = self.schedule, self.target, self.rng
        n, d = x.shape
        y = x.copy()
        committed = np.zeros(n, dtype=np.int64)
        v_node = v_last.copy()
        need = ~root_eval
        if need.any():
            v_node[need] = tgt.velocity(y[need], sch.s[k[need]])
        v_out = np.empty_like(v_last)
        w = np.arange(n)
        j = 0
        while w.size:
            kk = k[w] + j
            Kj = self.shape.widths[j]
            u_d = self.draft_velocity(y[w], kk, v_last[w])

            def children_fn(mu_d, sig, Kj=Kj):
                return mu_d[:, None, :] + sig[:, None, None] * rng.standard_normal((mu_d.shape[0], Kj, d))

            states, accepted, _ = self.verify(j, y[w], kk, v_node[w], u_d, children_fn, round_ids[w], node_rows)
            y[w] = states
            committed[w] += 1
            cont = accepted & (j + 1 < depth_eff[w])
            stop = w[~cont]
            v_out[stop] = v_node[stop]
            w = w[cont]
            if w.size:
                v_node[w] = tgt.velocity(y[w], sch.s[k[w] + j + 1])
            j += 1
        return y, committed, v_out

    def walk_full(self, x, k, v_last, root_eval, depth_eff, round_ids, node_rows):
        sch, tgt, rng, shape = self.schedule, self.target, self.rng, self.shape
        n, d = x.shape
        L = shape.depth
        last = sch.n_stochastic - 1
        # 1. draft every node of every tree (depth 0..L), level by level
        levels = [x[:, None, :].copy()]
        for j in range(L):
            Kj = shape.widths[j]
            par = levels[j]                                   # (n, N_j, d)
            Nj = par.shape[1]
            kk = np.minimum(k + j, last)                      # nodes past depth_eff are never used
            flat = par.reshape(n * Nj, d)
            kk_flat = np.repeat(kk, Nj)
            if self.draft_model is None:
                u_d = np.repeat(v_last, Nj, axis=0)
            else:
                u_d = self.draft_model.velocity(flat, sch.s[kk_flat])
            mu_d = sch.mean(kk_flat, flat, u_d).reshape(n, Nj, 1, d)
            sig = sch.sigma[kk][:, None, None, None]
            kids = mu_d + sig * rng.standard_normal((n, Nj, Kj, d))
            levels.append(kids.reshape(n, Nj * Kj, d))
        # 2. ONE batched target call on all internal nodes (depth 0..L-1)
        internal = np.concatenate([levels[j] for j in range(L)], axis=1)     # (n, T, d)
        T = internal.shape[1]
        s_nodes = np.concatenate([np.repeat(np.minimum(k + j, last)[:, None], levels[j].shape[1], axis=1)
                                  for j in range(L)], axis=1)
        V = tgt.velocity(internal.reshape(n * T, d), sch.s[s_nodes.reshape(-1)]).reshape(n, T, d)
        V[root_eval, 0] = v_last[root_eval]     # the root was already evaluated: reuse, same value
        offsets = np.cumsum([0] + [levels[j].shape[1] for j in range(L)])
        # 3. walk from the root
        y = x.copy()
        committed = np.zeros(n, dtype=np.int64)
        v_out = np.empty_like(v_last)
        pos = np.zeros(n, dtype=np.int64)
        w = np.arange(n)
        j = 0
        while w.size:
            kk = k[w] + j
            Kj = shape.widths[j]
            v_node = V[w, offsets[j] + pos[w]]
            u_d = v_last[w] if self.draft_model is None else self.draft_model.velocity(y[w], sch.s[kk])
            child_ids = pos[w, None] * Kj + np.arange(Kj)[None, :]

            def children_fn(mu_d, sig, w=w, child_ids=child_ids, j=j):
                return levels[j + 1][w[:, None], child_ids]

            states, accepted, idx = self.verify(j, y[w], kk, v_node, u_d, children_fn, round_ids[w], node_rows)
            y[w] = states
            committed[w] += 1
            cont = accepted & (j + 1 < depth_eff[w])
            stop = w[~cont]
            v_out[stop] = v_node[~cont]
            pos[w[cont]] = child_ids[cont, idx[cont]]
            w = w[cont]
            j += 1
        return y, committed, v_out
