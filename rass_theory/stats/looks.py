"""Sequential looks within a cell: stop a cell early, FAILED, once a test is decisively rejected.

A cell runs ``T`` chunks (every chunk of every dtype pass, in run order).  After chunks
``1, 2, 4, 8, ... < T`` (:func:`look_positions`) the cell's tests are evaluated on the counts
merged so far; the cell stops, FAILED, when the smallest raw p-value is at most the per-test
interim level :attr:`LookPlan.level`.  A contract violation does not stop a cell (the run counts
every violation; a grid still stops after the cell that had one).  A small share
(:data:`INTERIM_SHARE`) of ``alpha`` is spent on all interim looks together, Bonferroni over
every (look, test) pair; the final look (the end of the cell, or of the grid) runs Holm at the
rest, :attr:`LookPlan.final_alpha`, so an exact verifier's verdict and power are those of a run
without looks at level ``0.99 alpha``, while a verifier rejected with ``p ~ 1e-30`` after one
chunk stops after that chunk.  The proof of the family-wise bound is in
``proofs/S1-harness-power.md``, section "Sequential looks".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .family import family_size, pass_plan, tail_tests
from .node import n_chunks_of

__all__ = ["INTERIM_SHARE", "design_level", "LookPlan", "LookStop", "SequentialLooks", "look_positions", "look_plan",
           "total_chunks", "interim_tests", "interim_adjusted"]

#: Share of ``alpha`` spent on the interim looks of a run (all looks of all cells together).
INTERIM_SHARE = 0.01
#: Tests not evaluated at an interim look: the energy test's permutation p-value is at least
#: ``1 / (P + 1) >= 1e-5``, never below the interim level, so running it there is wasted time.
NOT_AT_LOOKS = ("energy_two_sample",)


def total_chunks(cfg) -> int:
    """Chunks of one cell: every chunk of every dtype pass."""
    return len(cfg.dtypes) * n_chunks_of(cfg.n_samples, cfg.chunk_size)


def look_positions(total: int) -> tuple:
    """Interim looks of a cell of ``total`` chunks: after chunks ``1, 2, 4, 8, ...`` strictly before ``total``."""
    out, k = [], 1
    while k < total:
        out.append(k)
        k *= 2
    return tuple(out)


@dataclass(frozen=True)
class LookPlan:
    """How ``alpha`` is split between the interim looks and the final look of a run.

    ``n_pairs`` is the number of (interim look, test) pairs of the run: for every cell, its
    number of interim looks times its family size (:func:`~.family.family_size`).
    """

    alpha: float
    interim_alpha: float
    n_pairs: int

    @property
    def final_alpha(self) -> float:
        """Holm's level at the final look: ``alpha - interim_alpha``."""
        return self.alpha - self.interim_alpha

    @property
    def level(self) -> float:
        """Raw p-value at or below which a test rejects at an interim look (``0``: no looks)."""
        return self.interim_alpha / self.n_pairs if self.n_pairs else 0.0


def look_plan(cfgs, alpha: float, enabled: bool = True) -> LookPlan:
    """The alpha split of a run of the cells ``cfgs`` (``enabled=False`` or no look: everything at the final look).

    Notes
    -----
    With ``L_c`` interim looks in cell ``c`` and ``m_c`` tests in its family, the run has
    ``N = sum_c L_c m_c`` (look, test) pairs.  Each is rejected when its raw p-value is
    ``<= alpha_I / N`` with ``alpha_I = INTERIM_SHARE * alpha``; the final Holm runs at
    ``alpha - alpha_I``.  Proof that the family-wise error is ``<= alpha``:
    ``proofs/S1-harness-power.md``, section "Sequential looks".
    """
    pairs = sum(len(look_positions(total_chunks(c))) * family_size(c) for c in cfgs)
    interim = alpha * INTERIM_SHARE if enabled and pairs else 0.0
    return LookPlan(float(alpha), float(interim), int(pairs) if enabled else 0)


def design_level(alpha: float, enabled: bool = True) -> float:
    """The Holm level at which ``detect=`` designs ``n``: the final look's, ``(1 - INTERIM_SHARE) alpha`` with looks.

    A designed run has interim looks unless it is a single chunk, and then its final level is
    ``alpha >=`` this one, so the stated power holds either way (``proofs/S1-harness-power.md``, S1.9).
    """
    return float(alpha) * (1.0 - INTERIM_SHARE) if enabled else float(alpha)


def interim_tests(counts, cfg, node) -> list:
    """``[(name, TestStatistic)]``: the family's tests on the passes that have rows so far.

    The per-pass tests of :func:`~.family.pass_plan` (without :data:`NOT_AT_LOOKS`) and the
    cell's far tails pooled over the passes run.
    """
    out, ran = [], []
    for p, c in enumerate(counts):
        if c.n_rows == 0:
            continue
        ran.append(c)
        out += [(name, run(c)) for name, run in pass_plan(cfg, p) if name not in NOT_AT_LOOKS]
    return out + tail_tests(ran, node.dim, node.n_directions)


def interim_adjusted(raw, plan: LookPlan):
    """``(reject, p_adjusted)`` of tests evaluated at an interim look.

    ``p_adjusted = min(1, p alpha / level)`` (Bonferroni over the run's look-test pairs, scaled so
    that it is rejected exactly when ``p_adjusted <= alpha``); NaN stays NaN.
    """
    p = np.array([t.pvalue for _, t in raw], dtype=np.float64)
    reject = np.where(np.isnan(p), False, p <= plan.level)
    scale = plan.alpha / plan.level if plan.level > 0 else math.inf
    with np.errstate(invalid="ignore"):
        p_adj = np.where(np.isnan(p), np.nan, np.minimum(1.0, p * scale))
    return reject, p_adj


@dataclass(frozen=True)
class LookStop:
    """Where a cell stopped: its ``look`` (1-based), the chunk ``position`` and the tests evaluated there."""

    look: int
    position: int
    tests: list


class SequentialLooks:
    """The interim looks of one cell: ``looks(counts, position) -> stop?`` (records :attr:`stopped`).

    Called by :func:`~.chunks.collect_counts` after every chunk (and once on resume); only the
    positions of :func:`look_positions` are looks.
    """

    def __init__(self, cfg, node, plan: LookPlan):
        self.cfg, self.node, self.plan = cfg, node, plan
        self.positions = look_positions(total_chunks(cfg)) if plan.level > 0 else ()
        self.stopped: LookStop | None = None

    @property
    def n_looks(self) -> int:
        return len(self.positions)

    def __call__(self, counts, position: int) -> bool:
        if position not in self.positions:
            return False
        look = self.positions.index(position) + 1
        tests = interim_tests(counts, self.cfg, self.node)
        p = [t.pvalue for _, t in tests if not math.isnan(t.pvalue)]
        if not p or min(p) > self.plan.level:
            return False
        self.stopped = LookStop(look, position, tests)
        return True
