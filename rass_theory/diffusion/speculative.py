"""Speculative sampling of the churned Euler chain with draft trees.

One *round* per trajectory: draft a tree from the current state, make ONE batched target call on
the tree's internal nodes (root included; leaves too with ``evaluate_leaves``), then walk down
from the root verifying each node's children until a correction (rejection) or a leaf.  Every
committed state is an exact draw of the target kernel given the past
(``proofs/P9-tree-exactness.md``), so the committed chain has the plain chain's law.
"""
from __future__ import annotations

import time

import numpy as np

from .._validation import as_generator, check_positive_int
from ._checks import PREFETCH_MODES, check_backend, check_bool, check_prefetch, check_target, unfinished_rows
from ._contract import resolve_verifier, verifier_name
from ._walk import RoundWalker
from .kernel import plain_kernel
from .results import NodeRecord, RoundRecord, SpeculativeResult, speedup_estimate
from .trajectories import TrajectoryRecorder
from .trees import TreeShape

__all__ = ["PREFETCH_MODES", "NodeRecord", "RoundRecord", "SpeculativeResult", "speculative_sample"]

_DRAFT_MODES = ("frozen",)
_EXPANSIONS = ("lazy", "full")


def speculative_sample(target, verifier, K=4, L=3, n_samples: int = 1000, n_steps: int = 30,
                       churn: float = 0.06, rng=None, *, kind: str = "sde", draft="frozen",
                       expansion: str = "lazy", prefetch: str = "nearest", protocol: str = "default",
                       evaluate_leaves: bool = False, backend: str = "numpy", device=None, dtype=None,
                       record_trace: bool = True, max_floats_in_memory: int = 2 ** 24,
                       return_trajectories: bool = False) -> SpeculativeResult:
    """Sample the churned Euler chain speculatively with draft trees.

    Parameters
    ----------
    target : GaussianMixture
        The target model (anything with ``dim`` and ``velocity(x, s)``).
    verifier : str or callable
        ``"rmc"``, ``"dgrs"``, ``"rass"``, ``"threshold"``, ``"optimal_list"`` (when registered) or
        a callable obeying the verifier contract.  Names are resolved once per distinct width;
        ``"threshold"`` is the optimal threshold policy with parameters chosen on a grid of deltas
        (exact for any parameters; see ``diffusion._contract.snapped_threshold_verifier``).
    K : int or sequence of int
        Children per node; a sequence gives per-depth widths ``(K_0, ..., K_{L-1})``.
    L : int or None
        Tree depth (must match ``len(K)`` when ``K`` is a sequence; may then be None).
    n_samples, n_steps : int
    churn : float
        Noise scale in ``(0, inf)`` (its meaning depends on ``protocol``; :class:`ChurnSchedule`).
    rng : int, SeedSequence, Generator or None
    kind : {"sde", "ddim"}
        Form of the stochastic step, passed to :class:`ChurnSchedule`; use the same ``kind`` and
        ``protocol`` in :func:`plain_sample` for the matching reference chain.
    draft : "frozen" or GaussianMixture
        ``"frozen"``: every node of a round drafts with one frozen target velocity chosen by
        ``prefetch`` (no extra target call except under ``"none"``).  A model: an independent
        cheap draft model evaluated at every node (its calls are not counted).
    expansion : {"lazy", "full"}
        ``"full"`` drafts every node and target-evaluates every internal node in one batched
        array call, as an accelerator would; ``"lazy"`` materialises only the walked path (and,
        uncounted, the few velocities the full batch would hold that the walk reads).  Same law
        and same target-call count (P9 section 4).
    prefetch : {"nearest", "parent", "none"}
        Frozen velocity of the next round (frozen draft only; default ``"nearest"``).
        ``"nearest"``: when the round ends with a correction while verifying the children of a
        depth-``j`` node whose children were target-evaluated (``j + 1`` below the round's depth,
        or any ``j`` with ``evaluate_leaves``), the velocity of the child nearest in Euclidean
        norm to the committed state (ties to the lower index), at the committed step -- free, it
        is in the batch; otherwise the last verified node's velocity.  ``"parent"``: always the
        last verified node's velocity (the committed state's parent, one step stale).
        ``"none"``: the root is target-evaluated at the start of every round (one counted call)
        and drafts use its exact velocity.  ``RoundRecord.drift_source`` says which source each
        round used.  All three are exact (P9 section 3).
    protocol : {"default", "paper"}
        Time grid and noise law (:class:`ChurnSchedule`).  ``"paper"``: the authors' protocol,
        28 stochastic steps at ``n_steps = 30``.
    evaluate_leaves : bool
        Add the leaves to the round's batched target call (the call count does not change), so a
        committed leaf's velocity is the next round's exact frozen velocity, and ``"nearest"``
        also applies to corrections at the last level.  Needs ``draft="frozen"``: a draft model
        never reads a frozen velocity, so evaluating leaves could not be used (ValueError).
    backend : {"numpy", "torch"}
        ``"torch"`` returns ``rass_theory.diffusion.torch_sampler.speculative_sample_torch(...)``
        on ``device`` with ``dtype`` (imported only then).
    record_trace : bool
        Keep the per-node trace (``nodes``); False leaves it empty (saves memory).
    max_floats_in_memory : int
        ``"full"`` expansion processes trajectories in chunks whose drafted trees hold at most this
        many floats (nodes drafted before the batched call x dim: the internal nodes, and the leaves
        with ``evaluate_leaves``; default 2**24, 128 MiB of states, peak about three times that).
    return_trajectories : bool
        Record every committed state with the draft mean and tree depth it was committed at, in
        ``run.trajectories`` / ``run.draft_means`` (float64, ``(n_samples, S, dim)`` with
        ``S = n_stochastic + 1``) and ``run.depths`` (``(n_samples, S)``), the layout
        :func:`rass_theory.diffusion.check_trajectories` reads (see
        :mod:`rass_theory.diffusion.trajectories`).  Off by default: it holds
        ``8 n S (2 dim + 1)`` bytes (238 MB = 227 MiB at ``n = 1000``, ``S = 29``, ``dim = 512``).  The
        law, the random stream and the target calls do not change.

    Returns
    -------
    SpeculativeResult
        ``speedup`` is the ratio of means ``steps / mean(calls)``;
        ``speedup_mean_of_ratios`` the mean of ``steps / calls_i`` (the papers' estimator).

    Notes
    -----
    Round from ``x`` at step ``k`` with frozen velocity ``u_f``: a node ``y`` at depth ``j`` (step
    ``k + j``) has draft mean ``a_{k+j} y + b_{k+j} u_f`` and target mean
    ``a_{k+j} y + b_{k+j} u(y, s_{k+j})``; children are ``N(draft mean, sigma_{k+j}^2 I)``.  The
    walk verifies the current node's children; on acceptance it moves to the accepted child,
    on rejection it commits the verifier's correction and ends the round; reaching a leaf commits
    it.  Target calls: one per round (the batched call), one more per round under
    ``prefetch="none"`` after the first, plus one initial evaluation at the starting state (which
    makes the first round's root exact).  Trees are cut at the end of the stochastic schedule.
    Exactness needs only that ``u_f`` is fixed before the round's children are drawn
    (predictability; proof in ``proofs/P9-tree-exactness.md`` section 3).
    """
    if check_backend(backend) == "torch":
        from .torch_sampler import speculative_sample_torch

        return speculative_sample_torch(target, verifier, K=K, L=L, n_samples=n_samples, n_steps=n_steps,
                                        churn=churn, rng=rng, kind=kind, prefetch=prefetch, protocol=protocol,
                                        evaluate_leaves=evaluate_leaves, device=device, dtype=dtype,
                                        record_trace=record_trace, return_trajectories=return_trajectories)
    t0 = time.perf_counter()
    target = check_target(target)
    shape = TreeShape.from_spec(K, L)
    n_samples = check_positive_int(n_samples, "n_samples")
    kernel = plain_kernel(target, n_steps, churn, kind=kind, protocol=protocol)
    schedule = kernel.schedule
    return_trajectories = check_bool(return_trajectories, "return_trajectories")
    rng = as_generator(rng)
    if expansion not in _EXPANSIONS:
        raise ValueError(f"expansion must be one of {list(_EXPANSIONS)}, got {expansion!r}")
    prefetch = check_prefetch(prefetch)
    evaluate_leaves = check_bool(evaluate_leaves, "evaluate_leaves")
    max_floats_in_memory = check_positive_int(max_floats_in_memory, "max_floats_in_memory")
    draft_model = _check_draft(draft, target)
    if evaluate_leaves and draft_model is not None:
        raise ValueError("evaluate_leaves=True needs draft='frozen': a draft model never reads the frozen "
                         "velocity that a committed leaf's evaluation would provide, so it cannot use it")
    verifiers = {k: resolve_verifier(verifier, k) for k in sorted(set(shape.widths))}

    d = target.dim
    k0, stop, n_std = schedule.first_stochastic, schedule.stop, schedule.n_stochastic
    x = rng.standard_normal((n_samples, d))
    step = np.full(n_samples, k0, dtype=np.int64)
    calls = np.zeros(n_samples, dtype=np.int64)
    if draft_model is None:
        v_frozen = kernel.velocity(k0, x)               # initial evaluation (counted)
        calls += 1
        root_exact = np.ones(n_samples, dtype=bool)
        source = np.full(n_samples, "initial", dtype=object)
    else:
        v_frozen = np.zeros((n_samples, d))
        root_exact = np.zeros(n_samples, dtype=bool)
        source = np.full(n_samples, "model", dtype=object)

    recorder = TrajectoryRecorder(kernel, x) if return_trajectories else None
    walker = RoundWalker(kernel, draft_model, shape, verifiers, rng, prefetch=prefetch,
                         evaluate_leaves=bool(evaluate_leaves), record=record_trace, recorder=recorder)
    round_rows: list = []
    node_rows: list = []
    round_counter = 0
    for active in unfinished_rows(step, stop):
        root_call = np.zeros(active.size, dtype=bool)
        if prefetch == "none" and draft_model is None:
            root_call = ~root_exact[active]
            rows = active[root_call]
            if rows.size:
                v_frozen[rows] = kernel.velocity(step[rows], x[rows])
                root_exact[rows] = True
                source[rows] = "root"
                calls[rows] += 1
        depth_eff = np.minimum(shape.depth, stop - step[active])
        called = (depth_eff >= 2) | ~root_exact[active] | bool(evaluate_leaves)
        calls[active] += called
        round_ids = round_counter + np.arange(active.size)
        round_counter += active.size
        node_start = len(node_rows)
        args = (x[active], step[active], v_frozen[active], root_exact[active], depth_eff, round_ids, active)
        if expansion == "lazy":
            y, committed, v_new, exact_new, src_new = walker.walk_lazy(*args, node_rows)
        else:
            held = shape.depth + 1 if evaluate_leaves else shape.depth    # levels drafted before the batch
            per_row = sum(shape.nodes_at_depth(j) for j in range(held))
            chunk = max(1, max_floats_in_memory // (per_row * d))
            parts = [walker.walk_full(*(a[lo:lo + chunk] for a in args), node_rows)
                     for lo in range(0, active.size, chunk)]
            y, committed, v_new, exact_new, src_new = (np.concatenate([p[i] for p in parts]) for i in range(5))
        if record_trace:
            src_of = source[active]
            node_rows[node_start:] = [r + (src_of[r[0] - round_ids[0]],) for r in node_rows[node_start:]]
        round_rows.append((active, step[active].copy(), depth_eff, committed, called,
                           source[active].astype(str), root_call))
        x[active] = y
        step[active] += committed
        v_frozen[active] = v_new
        root_exact[active] = exact_new
        source[active] = src_new

    samples = kernel.tail(x)
    traj = recorder.arrays() if recorder is not None else (None, None, None)
    speedup, se = speedup_estimate(n_std, calls)
    rounds = RoundRecord(*(np.concatenate([r[i] for r in round_rows]) for i in range(7)))
    nodes = _node_record(node_rows)
    return SpeculativeResult(
        samples=samples, target_calls=calls, n_standard_steps=n_std, speedup=speedup, speedup_se=se,
        verifier=verifier_name(verifier), shape=shape, draft="frozen" if draft_model is None else "model",
        rounds=rounds, nodes=nodes, wall_time_s=time.perf_counter() - t0, expansion=expansion,
        n_steps=schedule.n_steps, churn=schedule.churn, prefetch=prefetch, protocol=protocol, kind=kind,
        evaluate_leaves=bool(evaluate_leaves), first_step=k0,
        trajectories=traj[0], draft_means=traj[1], depths=traj[2],
    )


def _check_draft(draft, target):
    if isinstance(draft, str):
        if draft not in _DRAFT_MODES:
            raise ValueError(f"draft must be 'frozen' or a GaussianMixture draft model, got {draft!r}")
        return None
    if not (hasattr(draft, "velocity") and hasattr(draft, "dim")):
        raise TypeError(f"draft must be 'frozen' or a model with .dim and .velocity, got {type(draft).__name__}")
    if draft.dim != target.dim:
        raise ValueError(f"draft model dim {draft.dim} does not match target dim {target.dim}")
    return draft


def _node_record(node_rows) -> NodeRecord:
    if not node_rows:
        empty = np.zeros(0, dtype=np.int64)
        return NodeRecord(empty, empty, empty, np.zeros(0), np.zeros(0, bool), empty, np.zeros(0, dtype=str))
    # columns: round_id, depth, step, delta, accepted, K, sigma, mu_ratio, then the source
    cols = [np.concatenate([r[i] for r in node_rows]) for i in range(8)]
    src = np.concatenate([np.asarray(r[8], dtype=object) for r in node_rows]).astype(str)
    return NodeRecord(*cols[:6], source=src, sigma=cols[6], mu_ratio=cols[7])
