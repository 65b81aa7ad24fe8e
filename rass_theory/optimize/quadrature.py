"""The weight program as a small dual LP on cells with exact masses, solved in cvxpy (DPP),
and the exchange iteration that moves the cell boundaries onto the crossings.

Partition the line into cells ``C_i``.  Restricting the dual variable of the weight program
to functions constant on cells gives the LP

    max_{0 <= lam_i <= 1, t}  sum_i lam_i (f(C_i) - g_0(C_i)) - t
    s.t.  sum_i lam_i b_j(C_i) <= t          (j = 1..J),

with ``J`` (= K) general constraints instead of the one-slack-per-node primal
``min_w sum_i (f(C_i) - g_0(C_i) - sum_j w_j b_j(C_i))_+``.  The cell masses are closed form
(no quadrature error), so every feasible ``lam`` gives a *certified lower bound* on the exact
optimal TV, and the optimal multipliers of the ``J`` rank constraints are weights on the
simplex.  If the cell boundaries contain the crossing points of the optimal ``g_w*`` with
``f``, the LP value equals the exact optimum; the exchange iteration therefore re-solves the
LP with the crossings of the current weights inserted as boundaries (plus a few points around
them).  Derivation and the error statement: proofs/P4-weight-program.md, P4.4-P4.5.

The problem is built once per ``(n_cells, J)`` with ``cp.Parameter`` data (disciplined
parametrised programming), so re-solves skip canonicalisation; unused cells are padded with
zero rows, which changes nothing.  Solver: HiGHS (dual simplex: vertex solutions, i.e.
sparse weights, and exact-zero duals off the support), CLARABEL as a fallback.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rass_theory.exact.segments import Segment, evaluate_tv, normal_mass

from .mixture_tv import maximize_acceptance

__all__ = ["CellDualLP", "ExchangeResult", "exchange_lp", "cell_masses"]


class CellDualLP:
    """Parametrised dual LP (cvxpy, DPP) with ``n_cells`` cells and ``n_weights`` weights.

    Parameters
    ----------
    n_cells, n_weights : int
        Problem sizes; the parameters are the cell masses ``f(C_i) - g_0(C_i)`` (n,) and
        ``b_j(C_i)`` (n, J).
    solver : str
        First-choice cvxpy solver (HIGHS); CLARABEL is tried if it fails.
    """

    def __init__(self, n_cells: int, n_weights: int, solver: str = "HIGHS", n_blocks: int = 1):
        import cvxpy as cp

        self._cp = cp
        self.n_cells = n_cells
        self.n_weights = n_weights
        self.n_blocks = n_blocks
        self.solver = solver
        self.rhs = cp.Parameter(n_cells, name="target_minus_fixed_mass")
        self.basis = cp.Parameter((n_cells, n_weights), name="component_mass")
        self.lam = cp.Variable(n_cells, name="lam")
        # weights come in n_blocks equal blocks, each on its own simplex (one t per block)
        t = cp.Variable(n_blocks, name="t")
        size = n_weights // n_blocks
        expand = np.kron(np.eye(n_blocks), np.ones((size, 1)))     # (n_weights, n_blocks)
        self._expand = expand
        self._rank_constraint = self.basis.T @ self.lam <= expand @ t
        self.problem = cp.Problem(
            cp.Maximize(self.rhs @ self.lam - cp.sum(t)),
            [self._rank_constraint, self.lam >= 0, self.lam <= 1],
        )
        if not self.problem.is_dcp(dpp=True):  # pragma: no cover - structural guarantee
            raise RuntimeError("the cell LP must be DPP")

    def solve(self, rhs: np.ndarray, basis: np.ndarray):
        """Solve; return ``(weights, certified_lower_bound, status, solver)``.

        The lower bound is recomputed from the clipped primal ``lam`` in float64
        (``sum lam_i rhs_i - max_j sum_i lam_i basis_ij``), so it is valid whatever the
        solver's feasibility tolerance.
        """
        cp = self._cp
        n = rhs.shape[0]
        r = np.zeros(self.n_cells)
        B = np.zeros((self.n_cells, self.n_weights))
        r[:n] = rhs
        B[:n] = basis
        self.rhs.value = r
        self.basis.value = B
        status = "error"
        for solver in (self.solver, "CLARABEL"):
            try:
                # no warm start from the previous solve of this shared problem object: the
                # answer must not depend on what was solved before.  HiGHS prints a start-up
                # banner to fd 1 once per process, before cvxpy passes any option; it is left
                # alone (swapping fd 1 is not thread-safe)
                self.problem.solve(solver=solver, warm_start=False)
            except cp.error.SolverError:
                continue
            status = self.problem.status
            if status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
                w = np.clip(np.asarray(self._rank_constraint.dual_value, dtype=np.float64), 0, None)
                lam = np.clip(np.asarray(self.lam.value, dtype=np.float64), 0.0, 1.0)
                per = (B.T @ lam).reshape(self.n_blocks, -1)
                lb = float(lam @ r - per.max(axis=1).sum())
                wb = w.reshape(self.n_blocks, -1)
                tot = wb.sum(axis=1, keepdims=True)
                if np.all(tot > 0) and np.all(np.isfinite(w)):
                    return (wb / tot).ravel(), lb, status, solver
        size = self.n_weights // self.n_blocks
        return np.full(self.n_weights, 1.0 / size), -np.inf, status, "none"


@functools.lru_cache(maxsize=64)
def _cell_lp(n_cells: int, n_weights: int, n_blocks: int = 1) -> CellDualLP:
    return CellDualLP(n_cells, n_weights, n_blocks=n_blocks)


def cell_masses(segments: Sequence[Segment], delta: float, boundaries: np.ndarray):
    """Exact masses of ``f - g_0`` and of each component on the cells between ``boundaries``.

    ``boundaries`` must contain every segment end; cells are attributed to the segment that
    contains them.
    """
    a, b = boundaries[:-1], boundaries[1:]
    keep = b > a
    a, b = a[keep], b[keep]
    J = segments[0].n_components
    rhs = normal_mass(a - delta, b - delta)
    basis = np.zeros((a.size, J))
    for seg in segments:
        inside = (a >= seg.lo) & (b <= seg.hi)
        if np.any(inside):
            basis[inside] = seg.component_masses(a[inside], b[inside])
            rhs[inside] -= seg.fixed_masses(a[inside], b[inside])
    return rhs, basis


@dataclass(frozen=True)
class ExchangeResult:
    """Outcome of :func:`exchange_lp`."""

    weights: np.ndarray
    lower_bound: float        # certified lower bound on the optimal TV
    tv: float                 # exact TV at ``weights``
    iterations: int
    solver: str


def exchange_lp(
    segments: Sequence[Segment],
    delta: float,
    *,
    lp_range: tuple[float, float],
    n_base: int = 48,
    w_start: np.ndarray | None = None,
    tol: float = 1e-8,
    max_iter: int = 6,
    spacing: float = 0.04,
    seed_crossings: np.ndarray | None = None,
    n_blocks: int = 1,
) -> ExchangeResult:
    """Cell LP with boundaries moved onto the crossings of the current weights (P4.5).

    Iterate: cells = a uniform base grid on ``lp_range`` + segment ends + the crossings of the
    current ``g_w`` (each flanked by points at distances 1e-1 ... 1e-3); solve the dual LP;
    evaluate the exact TV at the new weights.  Stops when ``TV(w) - LB <= tol`` (relative to
    ``max(TV, tiny)`` is not used: the bound is absolute) or after ``max_iter`` LPs.
    """
    J = segments[0].n_components
    base = np.linspace(lp_range[0], lp_range[1], n_base)
    ends = [s.lo for s in segments[1:]]
    n_cells_max = n_base + len(ends) + 11 * (2 * J + 8) + 2
    lp = _cell_lp(n_cells_max, J, n_blocks)
    offsets = np.array([1e-1, 3e-2, 1e-2, 3e-3, 1e-3])
    crossings = np.zeros(0)
    if seed_crossings is not None and np.size(seed_crossings):
        crossings = np.unique(np.asarray(seed_crossings, dtype=np.float64))
    elif w_start is not None:
        crossings = evaluate_tv(segments, w_start, delta, spacing=spacing, hessian=False).crossings
    best = None
    it = 0
    for it in range(1, max_iter + 1):
        cr = crossings[: 2 * J + 8]
        extra = (cr[:, None] + np.concatenate([offsets, -offsets])[None, :]).ravel()
        xs = np.unique(np.concatenate([[-np.inf, np.inf], base, ends, cr, extra]))
        rhs, basis = cell_masses(segments, delta, xs)
        w, lb, status, solver = lp.solve(rhs, basis)
        ev = evaluate_tv(segments, w, delta, spacing=spacing, hessian=False)
        if best is None or ev.tv - max(lb, best.lower_bound) < best.tv - best.lower_bound:
            best = ExchangeResult(weights=w, lower_bound=max(lb, best.lower_bound if best else -np.inf),
                                  tv=ev.tv, iterations=it, solver=solver)
        elif lb > best.lower_bound:
            best = ExchangeResult(weights=best.weights, lower_bound=lb, tv=best.tv,
                                  iterations=it, solver=best.solver)
        crossings = ev.crossings
        if best.tv - best.lower_bound <= tol:
            break
    return best


def solve_weights(
    segments: Sequence[Segment],
    delta: float,
    *,
    lp_range: tuple[float, float],
    spacing: float,
    w_start: np.ndarray | None = None,
    start_name: str = "warm",
    gap_target: float = 1e-9,
    warm_iter: int = 3,
    lp_tol: float = 1e-6,
    seed_crossings: np.ndarray | None = None,
    try_newton_first: bool = True,
):
    """Maximise the exact acceptance over the simplex for a mixture family; certify it.

    Warm start (exact Newton from ``w_start``) when given; otherwise, or if that does not
    reach ``gap_target``, the exchange cell LP followed by exact Newton.  Returns
    ``(PolishResult, solver_name, certified_gap)`` where the certified gap is the smaller of
    the Newton certificate and ``TV(w) - LP lower bound``.
    """
    def evaluate(w):
        return evaluate_tv(segments, w, delta, spacing=spacing, hessian=True)

    pol, name, lp_bound = None, "", -np.inf
    if w_start is not None and try_newton_first:
        pol = maximize_acceptance(evaluate, w_start, rtol=1e-12, max_iter=warm_iter, max_backtrack=3)
        name = f"exact-Newton({start_name} start)"
    # the exchange LP in two stages: a loose one (often one or two LPs when seeded with good
    # crossings) handed to Newton, and a tight one only if Newton did not certify
    seeded = seed_crossings is not None and np.size(seed_crossings) > 0
    # stage 1 with neighbour crossings as cells: a single LP usually identifies the support
    for stage_tol, newton_iter, lp_iter in ((max(lp_tol, 1e-5), 10, 1 if seeded else 6),
                                            (lp_tol * 1e-2, 60, 6)):
        if pol is not None and pol.converged and pol.gap <= gap_target:
            break
        ex = exchange_lp(segments, delta, lp_range=lp_range,
                         w_start=w_start if pol is None else pol.weights, tol=stage_tol,
                         spacing=spacing, seed_crossings=seed_crossings, max_iter=lp_iter)
        lp_bound = max(lp_bound, ex.lower_bound)
        pol2 = maximize_acceptance(evaluate, ex.weights, rtol=1e-12, max_iter=newton_iter)
        if pol is None or pol2.gap < pol.gap:
            pol = pol2
        name = f"{ex.solver}-cell-LP(x{ex.iterations})+exact-Newton"
        seed_crossings = pol.evaluation.crossings
    tv = pol.evaluation.tv
    gap = min(pol.gap, max(tv - lp_bound, 0.0)) if np.isfinite(lp_bound) else pol.gap
    return pol, name, gap
