"""Active-set Newton polish of the exact acceptance over the simplex (proofs/P4-weight-program.md).

The exact evaluation it polishes (crossings, masses, gradient, Hessian, certified gap) is the
residual-law engine :mod:`rass_theory.exact.segments`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rass_theory.exact.segments import TVEvaluation, certified_gap

__all__ = ["maximize_acceptance", "PolishResult"]


@dataclass(frozen=True)
class PolishResult:
    """Outcome of :func:`maximize_acceptance`."""

    weights: np.ndarray
    evaluation: TVEvaluation
    gap: float
    iterations: int
    converged: bool


def _project_simplex_clean(w: np.ndarray) -> np.ndarray:
    w = np.clip(np.asarray(w, dtype=np.float64), 0.0, None)
    tot = w.sum()
    if not np.isfinite(tot) or tot <= 0:
        return np.full(w.size, 1.0 / w.size)
    return w / tot


def maximize_acceptance(evaluate, w0, *, rtol: float = 1e-11, max_iter: int = 80,
                        max_backtrack: int = 12) -> PolishResult:
    """Maximise the concave exact acceptance over the simplex by active-set Newton steps.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(w) -> TVEvaluation`` (exact, with Hessian).
    w0 : ndarray (J,)
        Starting point (e.g. the quadrature-LP solution); projected onto the simplex.
    rtol : float
        Stop when the certified Frank-Wolfe gap is below ``rtol * max(acceptance, tiny)``
        or at the rounding floor ``16 eps max_j grad_j``.
    max_iter : int
        Iteration cap.
    max_backtrack : int
        Step halvings per iteration before the step is declared failed.

    Notes
    -----
    On the current face ``S`` the Newton step solves
    ``(H_SS + mu I) d + nu 1 = grad_S, 1^T d = 0`` with ``H = -hessian`` (positive
    semidefinite, rank = number of crossings; ``mu`` a Levenberg-Marquardt shift), followed
    by a ratio test that drops a coordinate reaching zero, and backtracking on the exact
    acceptance.  A coordinate outside ``S`` whose gradient exceeds the face's is added.
    The stopping quantity is the Frank-Wolfe gap, a certificate by concavity
    (proofs/P4-weight-program.md, P4.3).
    """
    w = _project_simplex_clean(w0)
    J = w.size
    ev = evaluate(w)
    eps = np.finfo(float).eps
    support = w > 0
    it = 0
    converged = False
    mu_scale = 1e-13
    best = (np.inf, w, ev)
    stall = 0
    for it in range(1, max_iter + 1):
        g = ev.grad
        gap = max(float(np.max(g) - g @ w), 0.0)
        cgap = min(gap, certified_gap(ev, w))
        if cgap < 0.5 * best[0]:
            stall = 0
        else:
            stall += 1
        if cgap < best[0]:
            best = (cgap, w, ev)
        floor = 16 * eps * float(np.max(np.abs(g)))
        if cgap <= max(rtol * ev.acceptance, floor, 1e-300):
            converged = True
            break
        if stall >= 3 and best[0] <= 1e-9:
            break  # at the rounding floor of the crossings: no further certified progress
        S = np.nonzero(support)[0]
        face_gap = float(np.max(g[S]) - g[S] @ w[S])
        jmax = int(np.argmax(g))
        if not support[jmax] and face_gap <= 0.5 * gap:
            support[jmax] = True
            S = np.nonzero(support)[0]
        m = S.size
        if m == 1:
            # a vertex with no better vertex on the face: move toward the best vertex
            d_full = -w.copy()
            d_full[jmax] += 1.0
        else:
            H = -ev.hessian[np.ix_(S, S)]
            scale = max(float(np.trace(H)) / m, 1e-300)
            H = H + (mu_scale * scale + 1e-300) * np.eye(m)
            kkt = np.zeros((m + 1, m + 1))
            kkt[:m, :m] = H
            kkt[:m, m] = 1.0
            kkt[m, :m] = 1.0
            rhs = np.concatenate([g[S], [0.0]])
            try:
                sol = np.linalg.solve(kkt, rhs)
            except np.linalg.LinAlgError:
                sol = np.linalg.lstsq(kkt, rhs, rcond=None)[0]
            d_full = np.zeros(J)
            d_full[S] = sol[:m]
            if not np.all(np.isfinite(d_full)) or float(g @ d_full) <= 0:
                if face_gap > 0.5 * gap:
                    break  # the Newton model gives no ascent on the face: stalled at rounding
                d_full = -w.copy()
                d_full[jmax] += 1.0
        neg = d_full < 0
        alpha_max = float(np.min(-w[neg] / d_full[neg])) if np.any(neg) else np.inf
        alpha = min(1.0, alpha_max)
        accepted = False
        for _ in range(max_backtrack):
            w_new = w + alpha * d_full
            hit = alpha >= alpha_max
            if hit:
                w_new[neg & (w + alpha_max * d_full <= 0)] = 0.0
            w_new = _project_simplex_clean(w_new)
            ev_new = evaluate(w_new)
            tol_a = 8 * eps * max(ev.acceptance, 1e-300)
            gap_new = max(float(np.max(ev_new.grad) - ev_new.grad @ w_new), 0.0)
            if ev_new.acceptance >= ev.acceptance - tol_a or gap_new < 0.5 * gap:
                accepted = True
                break
            alpha *= 0.5
        if not accepted:
            mu_scale *= 1e3
            if mu_scale > 1e-4:
                break
            continue
        w, ev = w_new, ev_new
        support = w > 0
    g = ev.grad
    gap = min(max(float(np.max(g) - g @ w), 0.0), certified_gap(ev, w))
    if best[0] < gap:
        gap, w, ev = best
        g = ev.grad
    floor = 16 * eps * float(np.max(np.abs(g)))
    converged = converged or gap <= max(rtol * ev.acceptance, floor, 1e-300)
    return PolishResult(weights=w, evaluation=ev, gap=gap, iterations=it, converged=converged)
