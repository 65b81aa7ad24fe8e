"""The residual-law engine: a selected law as a mixture of segments with closed-form masses.

The selected law of every rule in this package (RASS, the threshold and value-aware policies)
is piecewise of the form

    g_w(s) = g_0(s) + sum_j w_j b_j(s)        on each segment [lo, hi) of the real line,

with ``w`` on the simplex, ``b_j`` densities (sub-densities on a segment) whose integrals over
any interval are closed form, and ``g_0`` a fixed sub-density (zero for RASS).  For such a law
:func:`evaluate_tv` computes, without quadrature,

* the crossing points of ``f = phi(. - delta)`` and ``g_w`` (sign changes of
  ``r = log f - log g_w`` on a grid over the window of :mod:`rass_theory.exact._window`,
  refined by the engine's root finder ``NUMPY.find_root``), or, for the RASS segment
  (:class:`RankSegment`), the one crossing search of every residual,
  :func:`rass_theory.exact.laws.residual_intervals` (also behind the verifiers),
* ``A = {f > g_w}`` as a union of intervals,
* the acceptance ``int min(f, g_w) = f(A^c) + g_w(A)`` and ``TV = f(A) - g_w(A)``, each
  summed from closed-form interval masses (so each keeps relative accuracy in its own tail;
  for RASS the TV is the engine's excess-form residual mass),
* the gradient of the acceptance in ``w``: ``d acceptance / d w_j = b_j(A)`` (the crossing
  points move, but ``f = g_w`` there, so their motion does not contribute),
* the Hessian ``-sum_c b(c) b(c)^T / |f'(c) - g_w'(c)|`` over interior crossings ``c``.

See ``proofs/P4-weight-program.md`` (P4.1-P4.3) for the formulas; the only approximation is
the truncation of the real line to the window, whose neglected mass is below
``(K + 1) Phi(-L(K)) <= 1e-27`` for every ``K`` (:mod:`rass_theory.exact._window`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
from scipy.special import betainc, gammaln, log_ndtr, ndtr

from rass_theory.exact._window import window as default_window
from rass_theory.backend import NUMPY
from rass_theory.exact.laws import cdf_difference, rank_law, residual_intervals
from rass_theory.exact.normal import interval_mass as normal_mass, log_phi

__all__ = [
    "Segment",
    "RankSegment",
    "TVEvaluation",
    "evaluate_tv",
    "rass_evaluation",
    "normal_mass",
    "default_window",
    "fw_gap",
    "certified_gap",
    "logsumexp_rows",
]


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


def _r(seg: Segment, w_log: np.ndarray, delta: float, s: np.ndarray) -> np.ndarray:
    """``log f - log g_w``; ``+inf`` where ``g_w = 0``."""
    lg = _log_g(seg, w_log, s)
    lf = log_phi(s - delta)
    with np.errstate(invalid="ignore"):
        r = lf - lg
    return np.where(np.isneginf(lg), np.inf, r)


def _segment_crossings(rfun, glo, ghi, hi, spacing, delta):
    """Crossings of ``r = rfun`` on ``[glo, ghi]`` and the sign of ``r`` on each piece between them."""
    grid = _grid(glo, ghi, spacing, delta)
    # stay strictly inside open ends so one-sided limits are used at breakpoints
    if np.isfinite(hi) and ghi == hi:
        grid[-1] = np.nextafter(hi, -np.inf)
    rv = rfun(grid)
    x0s, x1s, r0s, r1s = _brackets(rfun, grid, rv)
    roots = list(np.sort(NUMPY.find_root(rfun, x0s, x1s))) if x0s.size else []
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
    return roots, signs


def evaluate_tv(
    segments: Sequence[Segment],
    w: np.ndarray,
    delta: float,
    *,
    window: tuple[float, float],
    spacing: float = 0.04,
    hessian: bool = True,
    known_crossings: np.ndarray | None = None,
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
    known_crossings : ndarray, optional
        Crossings known to machine precision for a segment with its own crossing search
        (:meth:`RankSegment.intervals`, ``known``), which then only confirms them.

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
    engine_tv = None
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
        if hasattr(seg, "intervals"):
            # the segment has its own crossing engine (RASS: rass_theory.exact.batch)
            roots, signs, engine_tv = seg.intervals(w, delta, window, known_crossings)
            roots = list(roots)
        elif glo >= ghi:
            # segment lies outside the window: sign from its midpoint-ish representative
            rep = np.array([min(max(lo_w, lo), hi) if np.isfinite(lo) else hi - 1.0])
            pos = bool(rfun(rep)[0] > 0)
            (a_list if pos else ac_a).append(lo)
            (b_list if pos else ac_b).append(hi)
            (seg_of_interval if pos else ac_seg).append(k)
            continue
        else:
            roots, signs = _segment_crossings(rfun, glo, ghi, hi, spacing, delta)
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
    tv = min(max(fA - gA if engine_tv is None or len(segments) > 1 else engine_tv, 0.0), 1.0)

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


def _polish(fun, roots):
    """Roots of ``fun`` near ``roots``: the nearest bracket ``[c - e, c + e]`` with a sign change,
    ``e = 1e-12, 1e-9, 1e-6, 1e-3`` times ``1 + |c|``, refined by
    the engine's root finder ``NUMPY.find_root``; a root without one is kept."""
    roots = np.asarray(roots, dtype=np.float64)
    lo, hi = roots.copy(), roots.copy()
    todo = np.ones(roots.size, dtype=bool)
    for e in (1e-12, 1e-9, 1e-6, 1e-3):
        if not np.any(todo):
            break
        eta = e * (1.0 + np.abs(roots))
        a, b = roots - eta, roots + eta
        flip = todo & ((fun(a) > 0) != (fun(b) > 0))
        lo[flip], hi[flip] = a[flip], b[flip]
        todo &= ~flip
    out = roots.copy()
    ok = ~todo
    if np.any(ok):
        out[ok] = NUMPY.find_root(fun, lo[ok], hi[ok])
    return out


def _roots_and_signs(bounds, positive):
    """The crossings of one row of :func:`rass_theory.exact.laws.residual_intervals` and the
    sign of ``f - g`` on each interval between them."""
    nc = int(np.count_nonzero(np.isfinite(bounds[0])))
    return bounds[0, 1:1 + nc], [bool(x) for x in positive[0, :nc + 1]]


def _excess_tv(law, roots, delta: float, signs) -> float:
    """``TV = sum of D(b) - D(a)`` over the intervals of ``A`` between ``roots``, with
    ``D = F - G`` in excess form (:func:`rass_theory.exact.laws.residual_intervals`, Notes)."""
    D = np.concatenate([[0.0], cdf_difference(law, roots, np.full(roots.shape, float(delta))), [0.0]])
    return float(np.maximum(np.diff(D), 0.0)[np.asarray(signs, dtype=bool)].sum())


class RankSegment:
    """The rank basis on the whole line: ``b_j(s) = K C(K-1, j) phi(s) Phi(s)^j (1-Phi(s))^(K-1-j)``.

    ``b_j`` is the density of the ``j``-th order statistic (ascending, ``j = 0..K-1``) of ``K``
    iid ``N(0, 1)``; its CDF is ``F_j(s) = I_{Phi(s)}(j + 1, K - j)`` (regularised incomplete
    beta), with the upper tail ``1 - F_j(s) = I_{Phi(-s)}(K - j, j + 1)`` used where it is the
    smaller of the two, so interval masses keep relative accuracy in both tails.
    """

    lo = -np.inf
    hi = np.inf

    def __init__(self, K: int):
        self.K = K
        self.n_components = K
        j = np.arange(K, dtype=np.float64)
        self._j = j
        self._log_coef = np.log(K) + gammaln(K) - gammaln(j + 1) - gammaln(K - j)

    def log_components(self, s):
        s = np.asarray(s, dtype=np.float64)
        lu = log_ndtr(s)[:, None]
        lv = log_ndtr(-s)[:, None]
        return log_phi(s)[:, None] + self._log_coef + self._j * lu + (self.K - 1 - self._j) * lv

    def log_fixed(self, s):
        return None

    def sign_function(self, w, delta):
        """For ``delta < 1``: ``(f - g_w)/phi = expm1(delta s - delta^2/2) - sum_j (w_j - 1/K) b_j/phi``.

        Both terms are O(delta) there, so the sign (and the crossings) keep full relative
        accuracy, unlike ``log f - log g_w``, whose rounding is O(eps) against an O(delta)
        signal.  Returns ``(function, scale)`` with ``f - g_w = scale * function``.
        """
        if delta >= 1.0:
            return None
        v = np.asarray(w, dtype=np.float64) - 1.0 / self.K

        def fun(s):
            s = np.asarray(s, dtype=np.float64)
            ratio = np.exp(self.log_components(s) - log_phi(s)[:, None])
            return np.expm1(delta * s - 0.5 * delta * delta) - ratio @ v

        return fun, (lambda s: np.exp(log_phi(s)))

    def intervals(self, w, delta, window, known=None):
        """Crossings, signs of ``f - g_w`` between them, and ``TV``, from the one crossing search.

        :func:`rass_theory.exact.laws.residual_intervals` (the search of every residual, on the
        truncation window ``window`` of :mod:`rass_theory.exact._window`); ``TV`` is its
        excess-form mass.  For ``delta < 1`` each crossing is polished on
        :meth:`sign_function` (:func:`_polish`): ``log f - log g_w`` carries an absolute
        rounding ``eps`` against an ``O(delta)`` signal, which moves a crossing by
        ``~eps / delta``, first order in the certificate's component masses; the masses are
        then summed again at the polished crossings.

        ``known``: crossings the caller has solved to machine precision on :meth:`sign_function`'s
        form (the KKT solve, :mod:`rass_theory.optimize.kkt`).  The search then only confirms
        them (roots to its ``1e-9``, the same number, each within ``2e-6 (1 + |c|)``) and the
        masses are summed at them; unconfirmed, they are ignored.
        """
        w = np.asarray(w, dtype=np.float64)
        law = rank_law(w)
        d = np.array([float(delta)])
        if known is not None:
            roots, signs = _roots_and_signs(*residual_intervals(law, d, precise=False)[:2])
            known = np.sort(np.asarray(known, dtype=np.float64))
            if known.size == roots.size and np.all(np.abs(known - roots) <= 2e-6 * (1.0 + np.abs(known))):
                return known, signs, _excess_tv(law, known, delta, signs)
        bounds, positive, mass = residual_intervals(law, d)
        roots, signs = _roots_and_signs(bounds, positive)
        custom = self.sign_function(w, delta)
        if custom is None or not roots.size:
            return roots, signs, float(mass[0].sum())
        # the masses again at the polished crossings: D = F - G is stationary at a crossing, but
        # an engine root off by ~eps/delta still costs ~(eps/delta)^2 relative in TV at tiny delta
        roots = _polish(custom[0], roots)
        return roots, signs, _excess_tv(law, roots, delta, signs)

    def component_masses(self, a, b):
        a = np.asarray(a, dtype=np.float64)[:, None]
        b = np.asarray(b, dtype=np.float64)[:, None]
        j, K = self._j, self.K
        Fa = betainc(j + 1, K - j, ndtr(a))
        Fb = betainc(j + 1, K - j, ndtr(b))
        Sa = betainc(K - j, j + 1, ndtr(-a))
        Sb = betainc(K - j, j + 1, ndtr(-b))
        return np.where(Fa > 0.5, Sa - Sb, Fb - Fa)

    def fixed_masses(self, a, b):
        return np.zeros(np.asarray(a).shape)


@functools.lru_cache(maxsize=None)
def rank_segment(K: int) -> RankSegment:
    """The (cached) RASS segment for ``K`` children."""
    return RankSegment(K)


def rass_evaluation(weights, delta: float, *, hessian: bool = False) -> TVEvaluation:
    """Exact acceptance, TV, gradient (and Hessian) of RASS with the given rank weights.

    This is the one evaluation behind :func:`rass_theory.exact.rass.rass_tv` and the optimiser
    (:func:`rass_theory.optimize.rank_weights.optimal_rank_weights`).

    Notes
    -----
    :func:`evaluate_tv` with the single :class:`RankSegment`; ``grad_j = b_j(A)`` with
    ``A = {f > g_w}`` (proofs/P4-weight-program.md, P4.1-P4.2).
    """
    w = np.asarray(weights, dtype=np.float64)
    K = w.size
    return evaluate_tv([rank_segment(K)], w, float(delta), window=default_window(K, delta), hessian=hessian)
