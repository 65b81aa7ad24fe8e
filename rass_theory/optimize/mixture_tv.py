"""Exact total variation between the target ``N(delta, 1)`` and a selected law that is a
mixture with closed-form component CDFs.

The selected law of every rule in :mod:`rass_theory.optimize` is piecewise of the form

    g_w(s) = g_0(s) + sum_j w_j b_j(s)        on each segment [lo, hi) of the real line,

with ``w`` on the simplex, ``b_j`` densities (sub-densities on a segment) whose integrals over
any interval are closed form, and ``g_0`` a fixed sub-density (zero for RASS).  For such a law
this module computes, without quadrature,

* the crossing points of ``f = phi(. - delta)`` and ``g_w`` (sign changes of
  ``r = log f - log g_w`` on a fine grid, refined with Brent's method to machine precision),
* ``A = {f > g_w}`` as a union of intervals,
* the acceptance ``int min(f, g_w) = f(A^c) + g_w(A)`` and ``TV = f(A) - g_w(A)``, each
  summed from closed-form interval masses (so each keeps relative accuracy in its own tail),
* the gradient of the acceptance in ``w``: ``d acceptance / d w_j = b_j(A)`` (the crossing
  points move, but ``f = g_w`` there, so their motion does not contribute),
* the Hessian ``-sum_c b(c) b(c)^T / |f'(c) - g_w'(c)|`` over interior crossings ``c``.

See ``proofs/P4-weight-program.md`` (P4.1-P4.3) for the formulas and the error statement:
the only approximation is the truncation of the real line to ``window``, whose neglected
mass is below ``1e-25`` for the windows used here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
from scipy.special import ndtr

__all__ = [
    "Segment",
    "TVEvaluation",
    "evaluate_tv",
    "normal_mass",
    "log_phi",
    "default_window",
    "fw_gap",
    "certified_gap",
    "maximize_acceptance",
    "PolishResult",
]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def log_phi(s):
    """Log of the standard normal density."""
    s = np.asarray(s, dtype=np.float64)
    return -0.5 * s * s - _LOG_SQRT_2PI


def normal_mass(a, b):
    """``P(a < Z < b)`` for standard normal ``Z``, computed in the tail where it is small."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    upper = a > 0.0
    return np.where(upper, ndtr(-a) - ndtr(-b), ndtr(b) - ndtr(a))


def default_window(delta: float, K: int) -> tuple[float, float]:
    """Finite window outside which both ``f`` and every order statistic have mass < 1e-25."""
    top = np.sqrt(2.0 * np.log(max(K, 2)))
    return (-11.5, max(float(delta), top) + 11.5)


class Segment(Protocol):
    """One piece ``[lo, hi)`` of a piecewise mixture law (see module docstring)."""

    lo: float
    hi: float
    n_components: int

    def log_components(self, s: np.ndarray) -> np.ndarray:
        """``log b_j(s)``, shape ``(m, J)``; ``-inf`` where a component vanishes."""

    def log_fixed(self, s: np.ndarray) -> np.ndarray | None:
        """``log g_0(s)``, shape ``(m,)``, or ``None`` when there is no fixed part."""

    def component_masses(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``int_a^b b_j``, shape ``(p, J)``, for intervals inside the segment."""

    def fixed_masses(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``int_a^b g_0``, shape ``(p,)``."""


@dataclass(frozen=True)
class TVEvaluation:
    """Exact quantities of ``g_w`` against the target at one weight vector ``w``."""

    acceptance: float
    tv: float
    grad: np.ndarray          # d acceptance / d w_j = b_j(A)
    hessian: np.ndarray | None  # d^2 acceptance / dw dw^T (negative semidefinite)
    crossings: np.ndarray     # interior crossing points
    intervals: np.ndarray     # (p, 2) intervals making up A = {f > g_w}
    interval_f: np.ndarray = None           # (p,) target mass of each interval of A
    interval_fixed: np.ndarray = None       # (p,) fixed-part mass of each interval
    interval_components: np.ndarray = None  # (p, J) component masses of each interval


def fw_gap(ev: TVEvaluation, w: np.ndarray) -> float:
    """Certified optimality gap of the concave acceptance at ``w`` (P4.3)."""
    return float(max(np.max(ev.grad) - float(ev.grad @ w), 0.0))


def logsumexp_rows(x: np.ndarray) -> np.ndarray:
    """``log sum_j exp(x_ij)`` per row; ``-inf`` for rows that are all ``-inf``."""
    m = np.max(x, axis=1)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", under="ignore"):
        return safe + np.log(np.sum(np.exp(x - safe[:, None]), axis=1))


def _log_g(seg: Segment, w_log: np.ndarray, s: np.ndarray) -> np.ndarray:
    lc = seg.log_components(s) + w_log[None, :]
    lf = seg.log_fixed(s)
    if lf is not None:
        lc = np.concatenate([lc, lf[:, None]], axis=1)
    return logsumexp_rows(lc)


def _grid(lo: float, hi: float, spacing: float, delta: float) -> np.ndarray:
    """Bracketing grid: ``spacing`` on the bulk ``[-7, delta + 7]``, 5x coarser in the far tails
    (where ``f`` and every order statistic have mass < K 1.3e-12 and crossings are rare; pairs
    hidden in one cell are still caught by the local-extremum check of :func:`_brackets`)."""
    core_lo, core_hi = max(lo, -7.0), min(hi, max(delta, 0.0) + 7.0)
    if core_lo >= core_hi:
        n = max(int(np.ceil((hi - lo) / (5 * spacing))) + 1, 17)
        return np.linspace(lo, hi, n)
    parts = []
    if lo < core_lo:
        parts.append(np.linspace(lo, core_lo, max(int(np.ceil((core_lo - lo) / (5 * spacing))) + 1, 2))[:-1])
    parts.append(np.linspace(core_lo, core_hi, max(int(np.ceil((core_hi - core_lo) / spacing)) + 1, 17)))
    if hi > core_hi:
        parts.append(np.linspace(core_hi, hi, max(int(np.ceil((hi - core_hi) / (5 * spacing))) + 1, 2))[1:])
    return np.concatenate(parts)


def _brackets(fun, grid: np.ndarray, rv: np.ndarray):
    """Brackets of the sign changes of ``r`` on ``grid``, including pairs of crossings hidden
    inside one cell (detected at discrete local extrema of ``r`` whose parabolic vertex, or the
    exact value there, has the opposite sign)."""
    pos = rv > 0
    change = np.nonzero(pos[1:] != pos[:-1])[0]
    x0 = [grid[change]]
    x1 = [grid[change + 1]]
    r0 = [rv[change]]
    r1 = [rv[change + 1]]
    if grid.size >= 3:
        d1 = rv[1:-1] - rv[:-2]
        d2 = rv[2:] - rv[1:-1]
        i = np.nonzero((d1 * d2 < 0) & np.isfinite(d1) & np.isfinite(d2)
                       & (pos[:-2] == pos[1:-1]) & (pos[1:-1] == pos[2:]))[0] + 1
        if i.size:
            h = 0.5 * (grid[i + 1] - grid[i - 1])
            curv = rv[i + 1] - 2 * rv[i] + rv[i - 1]
            shift = 0.5 * h * (rv[i - 1] - rv[i + 1]) / np.where(curv != 0, curv, 1.0)
            shift = np.clip(shift, -h, h)
            xv = grid[i] + shift
            vv = rv[i] - 0.25 * (rv[i - 1] - rv[i + 1]) * shift / h
            cand = (np.sign(vv) != np.sign(rv[i])) | (np.abs(vv) < 1e-3 * (np.abs(rv[i]) + 1e-12) + 1e-9)
            if np.any(cand):
                i, xv = i[cand], xv[cand]
                # locate the extremum more precisely (a few golden steps on |r| would also do)
                h = h[cand]
                xs = np.stack([xv - h / 4, xv, xv + h / 4], axis=1)
                xs = np.clip(xs, grid[i - 1][:, None], grid[i + 1][:, None])
                rs = fun(xs.ravel()).reshape(xs.shape)
                k = np.argmin(np.abs(rs), axis=1)
                xm = xs[np.arange(i.size), k]
                rmv = rs[np.arange(i.size), k]
                hidden = np.sign(rmv) != np.sign(rv[i])
                if np.any(hidden):
                    i, xm, rmv = i[hidden], xm[hidden], rmv[hidden]
                    lo_i = np.where(xm <= grid[i], i - 1, i)
                    x0 += [grid[lo_i], xm]
                    x1 += [xm, grid[lo_i + 1]]
                    r0 += [rv[lo_i], rmv]
                    r1 += [rmv, rv[lo_i + 1]]
    x0 = np.concatenate(x0); x1 = np.concatenate(x1); r0 = np.concatenate(r0); r1 = np.concatenate(r1)
    order = np.argsort(x0)
    return x0[order], x1[order], r0[order], r1[order]


def _refine_roots(fun, x0: np.ndarray, x1: np.ndarray, r0: np.ndarray, r1: np.ndarray) -> np.ndarray:
    """Vectorised Illinois (regula falsi) on brackets with a sign change, to machine precision.

    ``fun`` maps an array of points to ``r``; infinite end values are clipped so that the
    secant degenerates gracefully to bisection.
    """
    a, b = x0.astype(np.float64).copy(), x1.astype(np.float64).copy()
    fa = np.clip(r0, -1e3, 1e3).astype(np.float64)
    fb = np.clip(r1, -1e3, 1e3).astype(np.float64)
    side = np.zeros(a.size, dtype=np.int8)
    c_prev = np.full(a.size, np.nan)
    done = np.zeros(a.size, dtype=bool)
    tiny = 4 * np.finfo(float).eps
    for it in range(60):
        width = b - a
        done |= width <= tiny * np.maximum(np.abs(a), np.abs(b)) + 1e-300
        if np.all(done):
            break
        denom = fb - fa
        c = np.where(denom != 0, b - fb * width / np.where(denom != 0, denom, 1.0), 0.5 * (a + b))
        # bisection whenever the secant point leaves the bracket or a side stalls (Illinois)
        bad = ~(c > a) | ~(c < b)
        c = np.where(bad, 0.5 * (a + b), c)
        fc = np.clip(fun(c), -1e3, 1e3)
        exact = fc == 0
        left = (np.sign(fc) == np.sign(fa)) & ~exact
        a_new = np.where(left, c, a)
        fa_new = np.where(left, fc, np.where(side == -1, 0.5 * fa, fa))
        b_new = np.where(~left, c, b)
        fb_new = np.where(~left, fc, np.where(side == 1, 0.5 * fb, fb))
        side = np.where(left, 1, -1).astype(np.int8)
        a_new = np.where(exact, c, a_new)
        b_new = np.where(exact, c, b_new)
        a, b, fa, fb = (np.where(done, a, a_new), np.where(done, b, b_new),
                        np.where(done, fa, fa_new), np.where(done, fb, fb_new))
        done |= exact | (np.abs(c - c_prev) <= 2e-15 * (1.0 + np.abs(c)))
        c_prev = c
    return np.where(np.abs(fa) <= np.abs(fb), a, b)


def _r(seg: Segment, w_log: np.ndarray, delta: float, s: np.ndarray) -> np.ndarray:
    """``log f - log g_w``; ``+inf`` where ``g_w = 0``."""
    lg = _log_g(seg, w_log, s)
    lf = log_phi(s - delta)
    with np.errstate(invalid="ignore"):
        r = lf - lg
    return np.where(np.isneginf(lg), np.inf, r)


def evaluate_tv(
    segments: Sequence[Segment],
    w: np.ndarray,
    delta: float,
    *,
    window: tuple[float, float],
    spacing: float = 0.04,
    hessian: bool = True,
) -> TVEvaluation:
    """Exact acceptance, TV, gradient and Hessian of ``g_w`` against ``N(delta, 1)``.

    Parameters
    ----------
    segments : sequence of Segment
        Consecutive pieces covering the real line (first ``lo = -inf``, last ``hi = inf``).
    w : ndarray (J,)
        Weights on the simplex.
    delta : float
        Target mean.
    window : (float, float)
        Finite window searched for crossings; outside it the sign of ``f - g_w`` is taken
        from the nearest window point (neglected mass < 1e-25, see P4.2).
    spacing : float
        Grid spacing for bracketing the crossings.
    hessian : bool
        Whether to assemble the Hessian.

    Notes
    -----
    ``acceptance = f(A^c) + g_w(A)``, ``TV = f(A) - g_w(A)``, ``grad_j = b_j(A)``,
    ``hess = -sum_c b(c) b(c)^T / (f(c) |r'(c)|)`` with ``r = log f - log g_w``
    (proofs/P4-weight-program.md, P4.1-P4.2).
    """
    w = np.asarray(w, dtype=np.float64)
    J = w.size
    with np.errstate(divide="ignore"):
        w_log = np.log(w)
    lo_w, hi_w = window
    a_list: list[float] = []   # interval ends of A
    b_list: list[float] = []
    seg_of_interval: list[int] = []
    ac_a: list[float] = []     # interval ends of A^c
    ac_b: list[float] = []
    ac_seg: list[int] = []
    crossings: list[tuple[int, float]] = []
    sign_funs = []
    for k, seg in enumerate(segments):
        custom = seg.sign_function(w, delta) if hasattr(seg, "sign_function") else None
        if custom is None:
            rfun = (lambda sg: (lambda x: _r(sg, w_log, delta, np.asarray(x, dtype=np.float64))))(seg)
            scale = (lambda x: np.exp(log_phi(x - delta)))
        else:
            rfun, scale = custom
        sign_funs.append((rfun, scale))
        lo, hi = float(seg.lo), float(seg.hi)
        glo, ghi = max(lo, lo_w), min(hi, hi_w)
        if glo >= ghi:
            # segment lies outside the window: sign from its midpoint-ish representative
            rep = np.array([min(max(lo_w, lo), hi) if np.isfinite(lo) else hi - 1.0])
            pos = bool(rfun(rep)[0] > 0)
            (a_list if pos else ac_a).append(lo)
            (b_list if pos else ac_b).append(hi)
            (seg_of_interval if pos else ac_seg).append(k)
            continue
        grid = _grid(glo, ghi, spacing, delta)
        # stay strictly inside open ends so one-sided limits are used at breakpoints
        if np.isfinite(hi) and ghi == hi:
            grid[-1] = np.nextafter(hi, -np.inf)
        rv = rfun(grid)
        x0s, x1s, r0s, r1s = _brackets(rfun, grid, rv)
        roots = list(_refine_roots(rfun, x0s, x1s, r0s, r1s)) if x0s.size else []
        # sign on each piece: left end, midpoints between roots, right end
        if roots:
            mids = np.concatenate([[0.5 * (grid[0] + roots[0]) if roots[0] > grid[0] else grid[0]],
                                   0.5 * (np.asarray(roots[:-1]) + np.asarray(roots[1:])),
                                   [0.5 * (roots[-1] + grid[-1]) if roots[-1] < grid[-1] else grid[-1]]])
            rm = rfun(mids)
            signs = [bool(x > 0) for x in rm]
            # the outermost pieces take the sign at the window ends when those are nonzero
            if rv[0] != 0:
                signs[0] = bool(rv[0] > 0)
            if rv[-1] != 0:
                signs[-1] = bool(rv[-1] > 0)
        else:
            signs = [bool(rv[0] > 0)]
        ends = [lo] + roots + [hi]
        for (x0, x1, sg) in zip(ends[:-1], ends[1:], signs):
            if sg:
                a_list.append(x0); b_list.append(x1); seg_of_interval.append(k)
            else:
                ac_a.append(x0); ac_b.append(x1); ac_seg.append(k)
        crossings.extend((k, c) for c in roots)

    # per-interval masses of A: f, fixed part, components
    a_arr, b_arr = np.array(a_list, dtype=np.float64), np.array(b_list, dtype=np.float64)
    p = a_arr.size
    comp = np.zeros((p, J))
    fixed = np.zeros(p)
    seg_idx = np.array(seg_of_interval, dtype=int)
    for k, seg in enumerate(segments):
        m = seg_idx == k
        if np.any(m):
            comp[m] = seg.component_masses(a_arr[m], b_arr[m])
            fixed[m] = seg.fixed_masses(a_arr[m], b_arr[m])
    fmass = normal_mass(a_arr - delta, b_arr - delta) if p else np.zeros(0)
    grad = comp.sum(axis=0)
    fA = float(fmass.sum())
    fAc = float(normal_mass(np.array(ac_a) - delta, np.array(ac_b) - delta).sum()) if ac_a else 0.0
    gA = float(grad @ w) + float(fixed.sum())
    acceptance = min(max(fAc + gA, 0.0), 1.0)
    tv = min(max(fA - gA, 0.0), 1.0)

    H = None
    if hessian:
        H = np.zeros((J, J))
        for k, seg in enumerate(segments):
            cs = np.array([c for kk, c in crossings if kk == k])
            if cs.size == 0:
                continue
            rfun, scale = sign_funs[k]
            eta = 1e-6 * (1.0 + np.abs(cs))
            rr = rfun(np.concatenate([cs - eta, cs + eta]))
            slope = np.abs(rr[cs.size:] - rr[: cs.size]) / (2 * eta)
            bc = np.exp(seg.log_components(cs))
            denom = np.maximum(scale(cs) * slope, 1e-300)
            H -= (bc / denom[:, None]).T @ bc
    return TVEvaluation(
        acceptance=acceptance,
        tv=tv,
        grad=grad,
        hessian=H,
        crossings=np.array([c for _, c in crossings]),
        intervals=np.column_stack([a_arr, b_arr]) if p else np.zeros((0, 2)),
        interval_f=fmass,
        interval_fixed=fixed,
        interval_components=comp,
    )


def certified_gap(ev: TVEvaluation, w: np.ndarray) -> float:
    r"""Certified bound on ``TV(w) - TV*`` (equivalently ``acceptance* - acceptance(w)``).

    Notes
    -----
    For every union of intervals ``A'``, weak duality gives
    ``TV* >= f(A') - g_0(A') - max_j b_j(A')`` (P4.3).  With ``A' = A \ D`` for a set ``D``
    of dropped intervals of ``A = {f > g_w}``,

        TV(w) - bound = f(D) - g_w(D) + max_j b_j(A') - <w, b(A')>,

    computed from small terms only (no cancellation, so the bound keeps relative accuracy
    when the acceptance is tiny).  ``D = {}`` is the Frank-Wolfe gap; dropping intervals whose
    target mass is negligible removes the spurious far-tail gradient of a near-vertex ``w``.
    The minimum over a few candidate ``D`` is returned.
    """
    w = np.asarray(w, dtype=np.float64)
    F, G0, B = ev.interval_f, ev.interval_fixed, ev.interval_components
    p = F.size
    if p == 0:
        return 0.0
    gI = B @ w + G0          # g_w mass per interval
    excess = F - gI          # >= 0 up to rounding
    best = np.inf
    masks = [np.zeros(p, dtype=bool)]
    order = np.argsort(F)
    for k in range(1, p):
        d = np.zeros(p, dtype=bool)
        d[order[:k]] = True
        masks.append(d)
    for i in range(p):
        d = np.zeros(p, dtype=bool)
        d[i] = True
        masks.append(d)
    for d in masks:
        keep = ~d
        bk = B[keep].sum(axis=0)
        g = float(np.max(bk) - bk @ w) + float(np.clip(excess[d], 0, None).sum())
        best = min(best, max(g, 0.0))
    return best


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
