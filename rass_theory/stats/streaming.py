"""Mergeable statistics of a harness pass (constant memory in ``n_samples``).

Every statistic of the exactness harness is an integer histogram of probability-integral
transforms in fixed bins, a count, a running float64 sum, or a bounded subsample of the first
rows in chunk order.  Histograms and counts add exactly; running sums add in chunk order, so a
run split into chunks, resumed from a checkpoint or spread over Dask workers gives bit for bit
the totals of one sequential pass when the chunks are merged in order (which the harness does).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..verifiers._contract import VIOLATION_KINDS as CONTRACT_VIOLATION_KINDS
from .node import N_PROJECTION_BINS

__all__ = ["ExactnessCounts", "VIOLATION_KINDS", "MAX_MESSAGES", "TAIL_NAMES", "HARNESS_VIOLATIONS", "SEQUENCE_KINDS"]

#: Kinds the harness adds to those of ``check_contract``: the verifier raised, wrote into its
#: read-only inputs, or returned one of its children unchanged on a row marked not accepted.
HARNESS_VIOLATIONS = ("other", "raised", "mutated_input", "uncorrected_copy", "states_dtype",
                      "rng_not_advanced", "result_aliased", "sequence_raised")
#: Kinds found by the calls-in-sequence probe (:func:`rass_theory.stats.call_check.sequence_probe`): the
#: caller's generator did not advance over a call, a later call overwrote an earlier call's result,
#: or the probe call raised.  They concern the probe's extra calls, so they count calls, not rows.
SEQUENCE_KINDS = ("rng_not_advanced", "result_aliased", "sequence_raised")
#: Kinds of contract violation counted per row: those of
#: ``rass_theory.verifiers.check_contract`` in its order, then :data:`HARNESS_VIOLATIONS`.
VIOLATION_KINDS = CONTRACT_VIOLATION_KINDS + HARNESS_VIOLATIONS

#: At most this many distinct contract messages are kept.
MAX_MESSAGES = 5

#: Far-tail counts: (name, statistic, side, threshold in sd).  ``side`` is +1 (above), -1
#: (below) or 0 (absolute value); ``rperp`` thresholds are the chi-square quantiles with the
#: upper-tail mass ``Phi(-t)``.
TAILS = (("s_hi4", "t", 1, 4.0), ("s_lo4", "t", -1, 4.0), ("s_hi5", "t", 1, 5.0), ("s_lo5", "t", -1, 5.0),
         ("s_abs4", "t", 0, 4.0),
         ("rperp_hi4", "r", 1, 4.0), ("rperp_hi5", "r", 1, 5.0), ("dir0_abs4", "dir0", 0, 4.0),
         ("dir0_abs5", "dir0", 0, 5.0), ("diag_abs4", "diag", 0, 4.0), ("diag_abs5", "diag", 0, 5.0))
TAIL_NAMES = tuple(t[0] for t in TAILS)
#: Rows whose delta is at least this are also counted apart for the tails: there the correction
#: branch carries the target's right tail (a truncated residual shows up only there).
LARGE_DELTA = 2.0
#: Statistics whose PITs enter the row-independence sums.
INDEP_STATS = ("s", "rperp", "dir0")

_INT_FIELDS = ("n_rows", "n_valid", "n_accepted")


def _field_shapes(node) -> dict:
    """name -> (shape, dtype) of every additive array of one pass."""
    B, J, d, G = node.n_bins, node.n_joint_bins, node.dim, node.n_groups
    k = node.xcov_basis.shape[0]
    return {
        "s_counts": ((B,), np.int64), "r_counts": ((B,), np.int64),
        "dir_counts": ((node.n_directions, B), np.int64), "diag_counts": ((B,), np.int64),
        "joint_counts": ((J, J), np.int64), "joint_sd_counts": ((J, J), np.int64),
        "proj_counts": ((node.projections.shape[0], N_PROJECTION_BINS), np.int64),
        "tail_counts": ((len(TAILS), 2), np.int64), "tail_rows": ((2,), np.int64),
        "group_rows": ((G,), np.int64), "group_accepted": ((G,), np.int64),
        "violations": ((len(VIOLATION_KINDS),), np.int64),
        "indep_pairs": ((2,), np.int64), "indep_sums": ((2, len(INDEP_STATS)), np.float64),
        "xcov_sums": ((2, k), np.float64), "xcov_matrix": ((2, k, k), np.float64),
        "repeat_counts": ((2,), np.int64), "repeat_expected": ((2,), np.float64),
        "seq_pairs": ((1,), np.int64), "seq_sums": ((len(INDEP_STATS),), np.float64),
    }


@dataclass(frozen=True, eq=False)
class ExactnessCounts:
    """Sufficient statistics of one harness pass, additive across chunks.

    Attributes
    ----------
    n_rows, n_valid, n_accepted : int
        Rows drawn; rows with no contract violation (every statistic uses only these); valid
        rows whose verifier reported ``accepted``.
    arrays : dict of ndarray
        ``s_counts`` / ``r_counts`` / ``diag_counts`` ``(n_bins,)``: PIT histograms of
        ``t = s - delta``, ``||z_perp||^2`` and ``<w, y>``; ``dir_counts (n_directions, n_bins)``
        of ``<v_j, y>``; ``joint_counts`` and ``joint_sd_counts (J, J)``: coarse joint histograms
        of ``(t, ||z_perp||^2)`` and ``(t, <v_0, y>)``; ``proj_counts (P, 256)``: PIT histograms of
        the fixed projections ``<u_k, y>``; ``tail_counts (len(TAILS), 2)``: far-tail counts (:data:`TAILS`) over all
        valid rows and over those with ``delta >= LARGE_DELTA``, ``tail_rows``: those two row counts;
        ``group_rows``/``group_accepted``: rows and accepted rows per delta group;
        ``violations``: rows per violation kind; ``indep_pairs``/``indep_sums``: number of
        (i, i + n/2) and (i, i + 1) row pairs and the sums of ``(u_i - 1/2)(u_j - 1/2)`` of their
        PITs; ``xcov_sums (2, k)``: ``sum t P z_perp`` and ``sum (t^2 - 1) P z_perp`` with the
        node's fixed orthonormal ``P = xcov_basis (k, d)``, ``k = min(dim, 32)``;
        ``xcov_matrix (2, k, k)``: their exact conditional covariances ``sum t^2 P Pi P'`` and
        ``sum (t^2 - 1)^2 P Pi P'`` with ``Pi = I - e e'``; ``repeat_counts``: pairs of rows of one
        verifier call whose ``t`` (resp. ``<v_0, y>``) differ by less than ``REPEAT_EPS``, and
        ``repeat_expected`` their expected number under the null; ``seq_pairs``/``seq_sums``: rows
        matched across two consecutive probe calls on the same nodes (fresh children) and the
        sums of ``(u - 1/2)(u' - 1/2)`` of their PITs.
    subsample : ndarray of float64 (m, dim)
        Standardised states ``y`` of the first rows in chunk order (valid rows only).
    messages : tuple of str
        Up to :data:`MAX_MESSAGES` distinct contract messages, first seen first.
    """

    n_rows: int
    n_valid: int
    n_accepted: int
    arrays: dict
    subsample: np.ndarray
    messages: tuple = ()

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays")
        if arrays is not None and name in arrays:
            return arrays[name]
        raise AttributeError(f"ExactnessCounts has no attribute {name!r}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls, node) -> "ExactnessCounts":
        """All-zero counts for ``node`` (the identity of :meth:`merge`)."""
        arrays = {k: np.zeros(shape, dt) for k, (shape, dt) in _field_shapes(node).items()}
        return cls(0, 0, 0, arrays, np.zeros((0, node.dim)), ())

    @classmethod
    def invalid_chunk(cls, node, n, kind, message, keep=0) -> "ExactnessCounts":
        """Counts of a chunk whose every row is excluded for one violation ``kind``."""
        out = cls.empty(node)
        out.arrays["violations"][VIOLATION_KINDS.index(kind)] = n
        return cls(n, 0, 0, out.arrays, out.subsample, (f"[{kind}] {message}",))

    # ------------------------------------------------------------------ merging
    def merge(self, other: "ExactnessCounts") -> "ExactnessCounts":
        """Counts of ``self`` followed by ``other`` (arrays add, subsamples concatenate).

        Integer fields add exactly; float sums add in this order, so merge in chunk order to
        reproduce a sequential run bit for bit.
        """
        if not isinstance(other, ExactnessCounts):
            raise TypeError(f"other must be ExactnessCounts, got {type(other).__name__}")
        if set(self.arrays) != set(other.arrays):
            raise ValueError("cannot merge counts with different fields")
        for name, a in self.arrays.items():
            if a.shape != other.arrays[name].shape:
                raise ValueError(f"cannot merge counts with different {name} shapes "
                                 f"{a.shape} and {other.arrays[name].shape}")
        if self.subsample.shape[1] != other.subsample.shape[1]:
            raise ValueError("cannot merge counts of different dimensions")
        messages = list(self.messages)
        for m in other.messages:
            if m not in messages and len(messages) < MAX_MESSAGES:
                messages.append(m)
        arrays = {k: a + other.arrays[k] for k, a in self.arrays.items()}
        return ExactnessCounts(self.n_rows + other.n_rows, self.n_valid + other.n_valid,
                               self.n_accepted + other.n_accepted, arrays,
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
        return {k: int(v) for k, v in zip(VIOLATION_KINDS, self.arrays["violations"]) if v}

    # ------------------------------------------------------------------ serialisation
    def to_arrays(self, prefix: str = "") -> dict:
        """Plain arrays (for ``numpy.savez``); inverse of :meth:`from_arrays`."""
        out = {prefix + name: np.asarray(getattr(self, name), dtype=np.int64) for name in _INT_FIELDS}
        out.update({prefix + name: np.asarray(a) for name, a in self.arrays.items()})
        out[prefix + "subsample"] = np.asarray(self.subsample, dtype=np.float64)
        out[prefix + "messages"] = (np.asarray(self.messages, dtype=str) if self.messages
                                    else np.zeros(0, dtype="<U1"))
        return out

    @classmethod
    def from_arrays(cls, arrays, node, prefix: str = "") -> "ExactnessCounts":
        """Rebuild counts from :meth:`to_arrays` output (``KeyError`` if a field is missing)."""
        ints = {name: int(np.asarray(arrays[prefix + name])) for name in _INT_FIELDS}
        out = {}
        for name, (shape, dt) in _field_shapes(node).items():
            a = np.array(arrays[prefix + name], dtype=dt)
            if a.shape != shape:
                raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
            out[name] = a
        sub = np.array(arrays[prefix + "subsample"], dtype=np.float64)
        if sub.ndim != 2:
            raise ValueError(f"subsample must be two-dimensional, got shape {sub.shape}")
        messages = tuple(str(m) for m in np.asarray(arrays[prefix + "messages"]).tolist())
        return cls(**ints, arrays=out, subsample=sub, messages=messages)

    def equal(self, other: "ExactnessCounts") -> bool:
        """Bit-for-bit equality of every field."""
        return (self.n_rows == other.n_rows and self.n_valid == other.n_valid
                and self.n_accepted == other.n_accepted and set(self.arrays) == set(other.arrays)
                and all(np.array_equal(a, other.arrays[k]) for k, a in self.arrays.items())
                and np.array_equal(self.subsample, other.subsample) and self.messages == other.messages)
