"""Result types of speculative diffusion sampling: per-node trace, per-round records, run summary."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .trees import TreeShape

__all__ = ["DRIFT_SOURCES", "NodeRecord", "RoundRecord", "SpeculativeResult"]

#: how a round's frozen draft velocity was obtained (``RoundRecord.drift_source``)
DRIFT_SOURCES = {
    "initial": "target velocity at the starting state (the counted initial evaluation); exact root",
    "root": "prefetch='none': the root target-evaluated at the start of the round (one counted call); exact root",
    "leaf": "evaluate_leaves: the committed leaf's velocity from the previous round's batch; exact root",
    "nearest": "velocity of the drafted sibling nearest to the committed correction, at the committed step",
    "parent": "velocity of the last verified node (the committed state's parent), one step stale",
    "model": "an independent draft model (no frozen velocity)",
}


@dataclass(frozen=True)
class NodeRecord:
    """One row per verified node (every node whose children went through the verifier): the delta trace.

    Attributes
    ----------
    round_id, depth, step : ndarray of int
        Round (global id, the row of :class:`RoundRecord`), depth in the tree (0 = root) and
        schedule step ``k`` of the node (an index into ``ChurnSchedule.s``).
    delta : ndarray of float
        ``||mu_target - mu_draft|| / sigma`` at the node.
    accepted : ndarray of bool
        Whether the verifier committed one of the node's drafted children.
    K : ndarray of int
        Number of children of the node.
    source : ndarray of str or None
        Drift source of the node's round (see :data:`DRIFT_SOURCES`); None in traces that
        do not record it.
    sigma, mu_ratio : ndarray of float or None
        The node's kernel scale ``sigma`` and ``||mu_draft|| / sigma`` (the regime a verifier met,
        read by ``check_exactness(..., regime=run)``); None in traces that do not record them.
    """

    round_id: np.ndarray
    depth: np.ndarray
    step: np.ndarray
    delta: np.ndarray
    accepted: np.ndarray
    K: np.ndarray
    source: np.ndarray | None = None
    sigma: np.ndarray | None = None
    mu_ratio: np.ndarray | None = None


@dataclass(frozen=True)
class RoundRecord:
    """One row per round.

    Attributes
    ----------
    trajectory : ndarray of int
    start_step : ndarray of int
        Schedule step of the round's root.
    depth : ndarray of int
        Effective tree depth ``min(L, stop - start_step)``.
    committed : ndarray of int
        Steps committed by the round (accepted children plus the final correction or leaf).
    called : ndarray of bool
        Whether the round made its batched target call (False only when nothing needed
        evaluating: root already exact, ``L = 1`` and leaves not evaluated).
    drift_source : ndarray of str or None
        Where the round's frozen draft velocity came from (keys of :data:`DRIFT_SOURCES`).
    root_call : ndarray of bool or None
        Whether the round paid one extra call to evaluate its root first (``prefetch="none"``).
    """

    trajectory: np.ndarray
    start_step: np.ndarray
    depth: np.ndarray
    committed: np.ndarray
    called: np.ndarray
    drift_source: np.ndarray | None = None
    root_call: np.ndarray | None = None


def speedup_estimate(n_std: int, calls) -> tuple:
    """``n_std / mean(calls)`` and its delta-method standard error."""
    calls = np.asarray(calls, dtype=np.float64)
    mean = calls.mean()
    sd = calls.std(ddof=1) if calls.size > 1 else 0.0
    return float(n_std / mean), float(n_std * sd / (np.sqrt(calls.size) * mean ** 2))


@dataclass(frozen=True)
class SpeculativeResult:
    """Outcome of :func:`rass_theory.diffusion.speculative_sample`.

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
        Ratio of means ``n_standard_steps / mean(target_calls)`` and its delta-method standard
        error ``n_standard_steps * sd(target_calls) / (sqrt(n) mean^2)``.
    verifier : str
    shape : TreeShape
    draft : str
    rounds : RoundRecord
    nodes : NodeRecord
    wall_time_s : float
    expansion : str
        ``"lazy"`` (only the walked path is materialised) or ``"full"`` (every node drafted and
        every internal node target-evaluated, as on an accelerator).  Same law.
    n_steps, churn : schedule parameters
    prefetch, protocol, kind : str
    evaluate_leaves : bool
    first_step : int
        Schedule index of the first stochastic step (where the chain starts).
    extra : dict
    trajectories, draft_means : ndarray (n_samples, S, dim) or None
        With ``return_trajectories=True``: every committed state and the draft mean in force
        when it was committed (layout in :mod:`rass_theory.diffusion.trajectories`); else None.
    depths : ndarray of int (n_samples, S) or None
        Tree depth at which each state was committed (0 = the round's root; -1 at the start).
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
    prefetch: str = "parent"
    protocol: str = "default"
    kind: str = "sde"
    evaluate_leaves: bool = False
    first_step: int = 0
    trajectories: np.ndarray | None = None
    draft_means: np.ndarray | None = None
    depths: np.ndarray | None = None

    @property
    def speedup_mean_of_ratios(self) -> float:
        """Mean over trajectories of ``n_standard_steps / target_calls_i`` (the papers' estimator).

        By Jensen's inequality it is at least :attr:`speedup` (the ratio of means, which is the
        throughput-relevant figure); the two differ by about ``speedup * CV(calls)^2``.
        """
        return float(np.mean(self.n_standard_steps / np.asarray(self.target_calls, dtype=np.float64)))

    @property
    def speedup_mean_of_ratios_se(self) -> float:
        """Standard error ``sd(n / calls_i) / sqrt(n)`` of :attr:`speedup_mean_of_ratios`."""
        r = self.n_standard_steps / np.asarray(self.target_calls, dtype=np.float64)
        return float(r.std(ddof=1) / np.sqrt(r.size)) if r.size > 1 else 0.0

    @property
    def target_nodes_per_round(self) -> int:
        """Target-evaluated nodes of one full round (see :class:`TreeShape`)."""
        return self.shape.target_nodes + (self.shape.nodes_at_depth(self.shape.depth) if self.evaluate_leaves else 0)

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
