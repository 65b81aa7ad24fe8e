"""Mergeable integer statistics of a harness run (constant memory in ``n_samples``).

Every statistic of the exactness harness is an integer histogram of probability-integral
transforms in fixed bins, a count, or a bounded subsample of the first rows in chunk order.
Histograms add, so a run split into chunks, resumed from a checkpoint or spread over Dask workers
gives exactly the totals of one sequential pass when the chunks are merged in order.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..verifiers._contract import VIOLATION_KINDS as CONTRACT_VIOLATION_KINDS

__all__ = ["ExactnessCounts", "VIOLATION_KINDS", "MAX_MESSAGES"]

#: Kinds of contract violation counted per row: those of
#: ``rass_theory.verifiers.check_contract`` in its order, plus ``"other"``.
VIOLATION_KINDS = CONTRACT_VIOLATION_KINDS + ("other",)

#: At most this many distinct contract messages are kept.
MAX_MESSAGES = 5

_INT_FIELDS = ("n_rows", "n_valid", "n_accepted")
_ARRAY_FIELDS = ("s_counts", "r_counts", "dir_counts", "joint_counts", "violations")


@dataclass(frozen=True, eq=False)
class ExactnessCounts:
    """Sufficient statistics of a harness run, additive across chunks.

    Attributes
    ----------
    n_rows : int
        Rows (nodes) drawn.
    n_valid : int
        Rows with no contract violation; every statistic below uses only these.
    n_accepted : int
        Valid rows whose verifier reported ``accepted``.
    s_counts : ndarray of int64 (n_bins,)
        Histogram of the PIT bin of ``s - delta`` under ``N(0, 1)``.
    r_counts : ndarray of int64 (n_bins,)
        Histogram of the PIT bin of ``||z_perp||^2`` under ``chi^2(dim - 1)``.
    dir_counts : ndarray of int64 (n_directions, n_bins)
        Histograms of the PIT bins of ``<v_j, z>`` under ``N(0, 1)``.
    joint_counts : ndarray of int64 (J, J)
        Joint histogram ``[s_bin * J // n_bins, r_bin * J // n_bins]``.
    violations : ndarray of int64 (len(VIOLATION_KINDS),)
        Rows affected, per kind (a whole-array problem counts every row of its chunk).
    subsample : ndarray of float64 (m, dim)
        Standardised states ``z`` of the first rows in chunk order (valid rows only).
    messages : tuple of str
        Up to :data:`MAX_MESSAGES` distinct contract messages, first seen first.
    """

    n_rows: int
    n_valid: int
    n_accepted: int
    s_counts: np.ndarray
    r_counts: np.ndarray
    dir_counts: np.ndarray
    joint_counts: np.ndarray
    violations: np.ndarray
    subsample: np.ndarray
    messages: tuple = ()

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls, node) -> "ExactnessCounts":
        """All-zero counts for ``node`` (the identity of :meth:`merge`)."""
        B, J = node.n_bins, node.n_joint_bins
        return cls(0, 0, 0, np.zeros(B, np.int64), np.zeros(B, np.int64),
                   np.zeros((node.n_directions, B), np.int64), np.zeros((J, J), np.int64),
                   np.zeros(len(VIOLATION_KINDS), np.int64), np.zeros((0, node.dim)), ())

    @classmethod
    def from_chunk(cls, node, z, valid, accepted, violations, messages=(), keep=0) -> "ExactnessCounts":
        """Counts of one chunk from its standardised states.

        Parameters
        ----------
        node : SyntheticNode
        z : ndarray (n, dim)
            Standardised states ``(x - mu_draft) / sigma`` of every row (rows that are not valid
            are ignored and may hold anything, including NaN).
        valid : ndarray of bool (n,)
            Rows with no contract violation.
        accepted : ndarray of bool (n,)
        violations : array of int (len(VIOLATION_KINDS),)
        messages : sequence of str
        keep : int
            The first ``keep`` rows (valid ones only) join the two-sample subsample.
        """
        valid = np.asarray(valid, dtype=bool)
        n = valid.shape[0]
        zv = z[valid]
        s, r, proj = node.project(zv)
        B, J = node.n_bins, node.n_joint_bins
        s_bin = node.bin_normal(s - node.delta)
        s_counts = np.bincount(s_bin, minlength=B).astype(np.int64)
        if node.dim > 1:
            r_bin = node.bin(r, node.r_edges)
            r_counts = np.bincount(r_bin, minlength=B).astype(np.int64)
            joint = np.bincount((s_bin * J // B) * J + (r_bin * J // B), minlength=J * J)
            joint_counts = joint.reshape(J, J).astype(np.int64)
        else:
            r_counts = np.zeros(B, np.int64)
            joint_counts = np.zeros((J, J), np.int64)
        dir_counts = np.zeros((node.n_directions, B), np.int64)
        for j in range(node.n_directions):
            dir_counts[j] = np.bincount(node.bin_normal(proj[:, j]), minlength=B)
        keep = int(min(max(keep, 0), n))
        subsample = np.array(z[:keep][valid[:keep]], dtype=np.float64).reshape(-1, node.dim)
        n_accepted = int(np.count_nonzero(np.asarray(accepted, dtype=bool)[valid]))
        viol = np.asarray(violations, dtype=np.int64).reshape(len(VIOLATION_KINDS))
        return cls(n, int(valid.sum()), n_accepted, s_counts, r_counts, dir_counts, joint_counts,
                   viol.copy(), subsample, tuple(messages)[:MAX_MESSAGES])

    # ------------------------------------------------------------------ merging
    def merge(self, other: "ExactnessCounts") -> "ExactnessCounts":
        """Counts of ``self`` followed by ``other`` (integer fields add, subsamples concatenate).

        Associative; commutative except for the order of the subsample rows, so merge in chunk
        order to reproduce a sequential run bit for bit.
        """
        if not isinstance(other, ExactnessCounts):
            raise TypeError(f"other must be ExactnessCounts, got {type(other).__name__}")
        for name in _ARRAY_FIELDS:
            if getattr(self, name).shape != getattr(other, name).shape:
                raise ValueError(f"cannot merge counts with different {name} shapes "
                                 f"{getattr(self, name).shape} and {getattr(other, name).shape}")
        if self.subsample.shape[1] != other.subsample.shape[1]:
            raise ValueError("cannot merge counts of different dimensions")
        messages = list(self.messages)
        for m in other.messages:
            if m not in messages and len(messages) < MAX_MESSAGES:
                messages.append(m)
        return ExactnessCounts(
            self.n_rows + other.n_rows, self.n_valid + other.n_valid, self.n_accepted + other.n_accepted,
            *(getattr(self, f) + getattr(other, f) for f in _ARRAY_FIELDS),
            np.concatenate([self.subsample, other.subsample]), tuple(messages))

    @staticmethod
    def merge_all(parts) -> "ExactnessCounts":
        """Merge an ordered, non-empty iterable of counts."""
        parts = list(parts)
        if not parts:
            raise ValueError("parts must hold at least one ExactnessCounts")
        total = parts[0]
        for p in parts[1:]:
            total = total.merge(p)
        return total

    def violation_dict(self) -> dict:
        """Nonzero violation counts by kind."""
        return {k: int(v) for k, v in zip(VIOLATION_KINDS, self.violations) if v}

    # ------------------------------------------------------------------ serialisation
    def to_arrays(self) -> dict:
        """Plain arrays (for ``numpy.savez``); inverse of :meth:`from_arrays`."""
        out = {name: np.asarray(getattr(self, name), dtype=np.int64) for name in _INT_FIELDS}
        out.update({name: np.asarray(getattr(self, name)) for name in _ARRAY_FIELDS})
        out["subsample"] = np.asarray(self.subsample, dtype=np.float64)
        out["messages"] = np.asarray(self.messages, dtype=str) if self.messages else np.zeros(0, dtype="<U1")
        return out

    @classmethod
    def from_arrays(cls, arrays) -> "ExactnessCounts":
        """Rebuild counts from :meth:`to_arrays` output (``KeyError`` if a field is missing)."""
        ints = {name: int(np.asarray(arrays[name])) for name in _INT_FIELDS}
        arrs = {name: np.array(arrays[name], dtype=np.int64) for name in _ARRAY_FIELDS}
        sub = np.array(arrays["subsample"], dtype=np.float64)
        if sub.ndim != 2:
            raise ValueError(f"subsample must be two-dimensional, got shape {sub.shape}")
        if arrs["violations"].shape != (len(VIOLATION_KINDS),):
            raise ValueError(f"violations must have shape ({len(VIOLATION_KINDS)},)")
        messages = tuple(str(m) for m in np.asarray(arrays["messages"]).tolist())
        return cls(**ints, **arrs, subsample=sub, messages=messages)

    def equal(self, other: "ExactnessCounts") -> bool:
        """Bit-for-bit equality of every field."""
        return all(np.array_equal(np.asarray(getattr(self, f.name)), np.asarray(getattr(other, f.name)))
                   if f.name != "messages" else self.messages == other.messages for f in fields(self))
