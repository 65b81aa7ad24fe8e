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
        at other steps) reads the cells of the steps its nodes sit at.  Empty cells fall back,
        in order, to the same ``(depth, class)`` pooled over steps,
        then the same ``(start, depth)`` pooled over classes, then the depth pooled over all.
        Depths ``>= depth_recorded`` (a deeper tree than the one recorded) use the deepest
        recorded depth: deeper nodes have older frozen velocities and larger deltas, so that
        prediction is optimistic.
        """
        n, C = self.n_std, len(SOURCE_CLASSES)
        Lr = self.depth_recorded
        k = self.step - self.first_step
        sums = np.zeros((n, Lr, C))
        counts = np.zeros((n, Lr, C))
        np.add.at(sums, (k, self.depth, self.source_class), alpha)
        np.add.at(counts, (k, self.depth, self.source_class), 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            cell = sums / counts
            by_dc = sums.sum(axis=0) / counts.sum(axis=0)                 # (Lr, C)
            by_kd = sums.sum(axis=2) / counts.sum(axis=2)                 # (n, Lr)
            by_d = sums.sum(axis=(0, 2)) / counts.sum(axis=(0, 2))        # (Lr,)
        out = np.where(counts > 0, cell, np.broadcast_to(by_dc[None], cell.shape))
        out = np.where(np.isnan(out), np.broadcast_to(by_kd[:, :, None], cell.shape), out)
        out = np.where(np.isnan(out), np.broadcast_to(by_d[None, :, None], cell.shape), out)
        out = np.nan_to_num(out, nan=0.0)
        idx = np.minimum(np.arange(L), Lr - 1)
        return out[:, idx, :]
