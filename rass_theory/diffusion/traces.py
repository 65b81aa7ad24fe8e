"""Delta traces: what a run met, in a form that predicts other verifiers and tree shapes.

A run's :class:`~rass_theory.diffusion.results.NodeRecord` (round, depth, step, delta, accepted,
K, drift source) is its trace.  :class:`DeltaTrace` groups the deltas by cell
``(round start step, depth, drift source)``; :func:`rass_theory.diffusion.predict_speedup`
turns the cell means of ``alpha(rule, K_j, delta)`` into expected target calls by a dynamic
programme (``proofs/P9-tree-exactness.md`` section 6).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SOURCE_CLASSES", "DeltaTrace", "source_class"]

#: drift-source classes of the dynamic programme: the root's delta law depends only on the class
SOURCE_CLASSES = ("exact", "nearest", "parent", "model")
_CLASS_OF = {"initial": "exact", "root": "exact", "leaf": "exact", "nearest": "nearest", "parent": "parent",
             "model": "model"}


def _optional_array(value):
    return None if value is None else np.asarray(value, dtype=float)


def source_class(source) -> np.ndarray:
    """Map drift sources (``results.DRIFT_SOURCES`` keys) to class indices into :data:`SOURCE_CLASSES`."""
    src = np.asarray(source).astype(str)
    out = np.empty(src.shape, dtype=np.int64)
    for name, cls in _CLASS_OF.items():
        out[src == name] = SOURCE_CLASSES.index(cls)
    unknown = ~np.isin(src, list(_CLASS_OF))
    if unknown.any():
        raise ValueError(f"unknown drift source(s) {sorted(set(src[unknown]))}; known: {sorted(_CLASS_OF)}")
    return out


@dataclass(frozen=True)
class DeltaTrace:
    """Deltas met by a run, with what the dynamic programme needs to know about the run.

    Attributes
    ----------
    step, depth, source_class : ndarray of int
        Per verified node: its schedule step, its depth, its round's drift-source class.
    delta : ndarray of float
    n_std, first_step : int
        Stochastic steps and index of the first one (the programme runs over
        ``first_step .. first_step + n_std``).
    widths : tuple
        Per-depth widths of the recorded tree.
    prefetch, draft : str
    evaluate_leaves : bool
    target_calls : ndarray or None
        Measured calls per trajectory, when the trace comes from a run.
    verifier : str or None
    sigma, mu_ratio : ndarray of float or None
        Per verified node: the kernel scale and ``||mu_draft|| / sigma``, when the run recorded
        them (``check_exactness(..., regime=trace)`` draws its rows' sigma and draft-mean norm
        from them).
    """

    step: np.ndarray
    depth: np.ndarray
    source_class: np.ndarray
    delta: np.ndarray
    n_std: int
    first_step: int
    widths: tuple
    prefetch: str = "parent"
    draft: str = "frozen"
    evaluate_leaves: bool = False
    target_calls: np.ndarray | None = None
    verifier: str | None = None
    sigma: np.ndarray | None = None
    mu_ratio: np.ndarray | None = None

    @classmethod
    def from_run(cls, run) -> DeltaTrace:
        """The trace of a :class:`SpeculativeResult` (which must have kept its node trace)."""
        nodes = run.nodes
        if nodes.delta.size == 0:
            raise ValueError("the run has no node trace (record_trace=False); rerun with record_trace=True")
        if nodes.source is not None and len(nodes.source) == nodes.delta.size:
            cls_idx = source_class(nodes.source)
        else:                                   # traces without sources: one class per draft mode
            cls_idx = np.full(nodes.delta.size, SOURCE_CLASSES.index("model" if run.draft == "model" else "parent"))
            cls_idx[(nodes.step - nodes.depth) == getattr(run, "first_step", 0)] = SOURCE_CLASSES.index("exact")
        return cls(step=np.asarray(nodes.step), depth=np.asarray(nodes.depth), source_class=cls_idx,
                   delta=np.asarray(nodes.delta, dtype=float), n_std=int(run.n_standard_steps),
                   first_step=int(getattr(run, "first_step", 0)), widths=tuple(run.shape.widths),
                   prefetch=getattr(run, "prefetch", "parent"), draft=run.draft,
                   evaluate_leaves=bool(getattr(run, "evaluate_leaves", False)),
                   target_calls=np.asarray(run.target_calls), verifier=run.verifier,
                   sigma=_optional_array(getattr(nodes, "sigma", None)),
                   mu_ratio=_optional_array(getattr(nodes, "mu_ratio", None)))

    @property
    def depth_recorded(self) -> int:
        return len(self.widths)

    def cell_means(self, alpha: np.ndarray, L: int) -> np.ndarray:
        """Mean of per-node ``alpha`` in each cell ``(step - first_step, depth, class)``, shape ``(n_std, L, 4)``.

        Cells are keyed by the node's own step, so a tree of another depth (whose rounds start
        at other steps) reads the cells of the steps its nodes sit at.  An empty cell takes the
        same ``(depth, class)`` interpolated linearly in the step between the nearest non-empty
        steps below and above it (the one side at the ends of the schedule), then, where that
        ``(depth, class)`` never occurs, the same ``(step, depth)`` pooled over classes, then the
        depth pooled over all.  Depths ``>= depth_recorded`` (a deeper tree than the one
        recorded) use the deepest recorded depth: deeper nodes have older frozen velocities and
        larger deltas, so that prediction is optimistic.

        Notes
        -----
        The dynamic programme reaches empty cells with positive probability (the exact
        ``alpha`` spreads the flow over round starts that the run's own accept/reject outcomes
        never produced: about 15 % of the rounds of a 10-trajectory MNIST run), so their values
        matter.  Filling them from the nearest steps keeps the fallback local in the schedule:
        acceptance varies with the step, and a class's occupancy depends on it (``exact`` rounds
        follow fully accepted rounds, ``nearest`` ones follow corrections), so the same
        ``(depth, class)`` pooled over every step weights the steps where the class is common and
        biased the prediction (on the MNIST UNet protocol, 76 arms at 20 images: mean z -0.94,
        max |z| 5.1; with the nearest steps mean z -0.17, max |z| 2.3;
        ``bench/results/mnist_speedup.md``).  With indicator ``alpha`` (the run's own
        accept flags) every cell the programme reaches is non-empty and it returns the measured
        mean calls exactly (flow conservation, ``proofs/P9-tree-exactness.md`` section 6).
        """
        n, C = self.n_std, len(SOURCE_CLASSES)
        Lr = self.depth_recorded
        k = self.step - self.first_step
        sums = np.zeros((n, Lr, C))
        counts = np.zeros((n, Lr, C))
        np.add.at(sums, (k, self.depth, self.source_class), alpha)
        np.add.at(counts, (k, self.depth, self.source_class), 1.0)
        out = _nearest_steps(sums, counts)                                 # nan where (depth, class) never occurs
        with np.errstate(invalid="ignore", divide="ignore"):
            by_kd = sums.sum(axis=2) / counts.sum(axis=2)                 # (n, Lr)
            by_d = sums.sum(axis=(0, 2)) / counts.sum(axis=(0, 2))        # (Lr,)
        out = np.where(np.isnan(out), np.broadcast_to(by_kd[:, :, None], out.shape), out)
        out = np.where(np.isnan(out), np.broadcast_to(by_d[None, :, None], out.shape), out)
        out = np.nan_to_num(out, nan=0.0)
        idx = np.minimum(np.arange(L), Lr - 1)
        return out[:, idx, :]


def _nearest_steps(sums: np.ndarray, counts: np.ndarray):
    """Mean per cell ``(step, depth, class)``: the cell's own where it is non-empty, else the linear
    interpolation in the step between the nearest non-empty cells of the same ``(depth, class)``
    below and above it (the one side's mean at the ends of the schedule; nan where the pair
    never occurs)."""
    n = sums.shape[0]
    steps = np.arange(n)[:, None, None]
    has = counts > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums / counts
    below = np.maximum.accumulate(np.where(has, steps, -1), axis=0)
    above = np.flip(np.minimum.accumulate(np.flip(np.where(has, steps, n), axis=0), axis=0), axis=0)
    m_lo = np.take_along_axis(mean, np.clip(below, 0, n - 1), axis=0)
    m_hi = np.take_along_axis(mean, np.clip(above, 0, n - 1), axis=0)
    ok_lo, ok_hi = below >= 0, above < n
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(ok_lo & ok_hi, (steps - below) / np.maximum(above - below, 1), 0.0)
    out = np.where(ok_lo & ok_hi, m_lo + w * (m_hi - m_lo), np.where(ok_lo, m_lo, m_hi))
    return np.where(has, mean, out)
