"""The residual-law engine: a selected law as a mixture of segments with closed-form masses.

The selected law of every rule in this package (RASS, the threshold and value-aware policies)
is piecewise of the form

    g_w(s) = g_0(s) + sum_j w_j b_j(s)        on each segment [lo, hi) of the real line,

with ``w`` on the simplex, ``b_j`` densities (sub-densities on a segment) whose integrals over
any interval are closed form, and ``g_0`` a fixed sub-density (zero for RASS).  For such a law
:func:`evaluate_tv` computes, without quadrature,

* the crossing points of ``f = phi(. - delta)`` and ``g_w`` from the one crossing search of
  every residual, :func:`rass_theory.exact.laws.residual_intervals` (also behind the
  verifiers): of the engine's rank law for the RASS segment (:class:`RankSegment`), of the
  piecewise law of the segments otherwise (:class:`_PiecewiseLaw`),
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
    "segments_logpdf",
    "segments_cdf",
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


def _r(seg: Segment, w_log: np.ndarray, delta: float, s: np.ndarray) -> np.ndarray:
    """``log f - log g_w``; ``+inf`` where ``g_w = 0``."""
    lg = _log_g(seg, w_log, s)
    lf = log_phi(s - delta)
    with np.errstate(invalid="ignore"):
        r = lf - lg
    return np.where(np.isneginf(lg), np.inf, r)


def segments_logpdf(segments: Sequence[Segment], w: np.ndarray, s) -> np.ndarray:
    """``log g_w(s)`` of consecutive segments at points ``s`` (any shape; each point in the
    segment ``[lo, hi)`` that holds it)."""
    s = np.asarray(s, dtype=np.float64)
    flat = s.reshape(-1)
    out = np.full(flat.size, -np.inf)
    k = np.searchsorted(np.array([float(seg.lo) for seg in segments[1:]]), flat, side="right")
    with np.errstate(divide="ignore"):
        w_log = np.log(np.asarray(w, dtype=np.float64))
    for i, seg in enumerate(segments):
        m = k == i
        if np.any(m):
            out[m] = _log_g(seg, w_log, flat[m])
    return out.reshape(s.shape)


def segments_cdf(segments: Sequence[Segment], w: np.ndarray, s) -> np.ndarray:
    """``G_w(s)``: the segments' closed-form component and fixed masses from ``-inf`` to ``s``."""
    s = np.asarray(s, dtype=np.float64)
    G = np.zeros(s.shape)
    for seg in segments:
        inside = s > seg.lo
        if np.any(inside):
            a = np.full(int(inside.sum()), float(seg.lo))
            b = np.minimum(s[inside], seg.hi)
            G[inside] += seg.component_masses(a, b) @ w + seg.fixed_masses(a, b)
    return G


class _PiecewiseLaw:
    """``g_w`` of consecutive segments as a protocol law of :mod:`rass_theory.exact.laws` (NumPy).

    Every row is the same law; row ``i`` announces one finite segment boundary ``breaks[i]``
    (``+inf``: none), so the engine's scan splits the grid cell holding it and brackets the
    crossings on each side of it apart (a jump of ``g`` there is a crossing where ``f - g``
    changes sign across it).  ``log_ratio = log g_w - log phi``, ``cdf_excess = G_w - Phi``
    (absolute accuracy; :func:`evaluate_tv` sums its masses from the segments' own forms).
    """

    unblocked = True

    def __init__(self, segments, w, K: int, spacing: float, breaks: np.ndarray):
        self.nx, self.K, self.spacing = NUMPY, int(K), float(spacing)
        self._segments, self._w, self._brk = segments, w, breaks

    def take(self, rows) -> "_PiecewiseLaw":
        return _PiecewiseLaw(self._segments, self._w, self.K, self.spacing, self._brk[rows])

    def keys(self):
        return self._brk[:, None]

    def breaks(self):
        return self._brk

    def log_ratio(self, s):
        s = np.asarray(s, dtype=np.float64)
        return segments_logpdf(self._segments, self._w, s) - log_phi(s)

    def log_ratio_grid(self, grid):
        """``log_ratio`` on one shared grid ``(m,)``: computed once, the same for every row."""
        return np.broadcast_to(self.log_ratio(grid), (self._brk.size, np.shape(grid)[0]))

    def cdf_excess(self, s):
        s = np.asarray(s, dtype=np.float64)
        return segments_cdf(self._segments, self._w, s) - ndtr(s)


def _engine_pieces(segments, w, delta: float, K: int, spacing: float):
    """Crossings of ``f`` and ``g_w`` in each segment and the sign of ``f - g_w`` on each piece.

    The one crossing search, :func:`rass_theory.exact.laws.residual_intervals` (precise roots)
    of :class:`_PiecewiseLaw`, one row per finite boundary; row ``i`` serves the stretch of the
    line between the midpoints of its boundary and its neighbours'.  Returns per segment
    ``(roots, signs)``: the crossings strictly inside it, ascending, and the sign on each piece
    between ``[lo] + roots + [hi]`` (read from the engine's intervals at the piece's midpoint).
    """
    ends = sorted({float(x) for seg in segments for x in (seg.lo, seg.hi) if np.isfinite(x)})
    brk = np.array(ends if ends else [np.inf])
    # the engine keeps the first K' + 2 sign events of a row: K' = n (K + 2) leaves K + 2 to each of
    # n segments; its window [-L, max(delta, sqrt(2 log K')) + L] holds the one of K (P7)
    law = _PiecewiseLaw(segments, w, len(segments) * (K + 2), spacing, brk)
    bounds, positive, _ = residual_intervals(law, np.full(brk.size, float(delta)))
    cuts = 0.5 * (brk[1:] + brk[:-1])                  # row i serves [cuts[i-1], cuts[i])

    def row_of(x):
        return int(np.searchsorted(cuts, x, side="right"))

    def sign_at(x):
        i = row_of(x)
        return bool(positive[i, int(np.searchsorted(bounds[i], x, side="right")) - 1])

    pieces = []
    for seg in segments:
        lo, hi = float(seg.lo), float(seg.hi)
        roots = sorted(float(c) for i in range(brk.size) for c in bounds[i, 1:-1]
                       if lo < c < hi and np.isfinite(c) and row_of(c) == i)
        pts = [lo] + roots + [hi]
        reps = [0.5 * (a + b) if np.isfinite(a) and np.isfinite(b) else
                (b - 1.0 if np.isfinite(b) else (a + 1.0 if np.isfinite(a) else 0.0))
                for a, b in zip(pts[:-1], pts[1:])]
        pieces.append((roots, [sign_at(x) for x in reps]))
    return pieces


def evaluate_tv(
    segments: Sequence[Segment],
    w: np.ndarray,
    delta: float,
    *,
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
    spacing : float
        Grid spacing of the engine's crossing scan (the window is the engine's,
        :mod:`rass_theory.exact._window`: beyond it the sign of ``f - g_w`` is that at its
        ends, neglected mass ``<= 1e-27``).
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
    a_list: list[float] = []   # interval ends of A
    b_list: list[float] = []
    seg_of_interval: list[int] = []
    ac_a: list[float] = []     # interval ends of A^c
    ac_b: list[float] = []
    ac_seg: list[int] = []
    crossings: list[tuple[int, float]] = []
    engine_tv = None
    if len(segments) == 1 and hasattr(segments[0], "intervals"):
        # RASS: the engine's rank law, with its own polish at small delta (RankSegment.intervals)
        roots, signs, engine_tv = segments[0].intervals(w, delta, known_crossings)
        pieces = [(list(roots), signs)]
    else:
        pieces = _engine_pieces(segments, w, delta, int(getattr(segments[0], "K", J)), spacing)
    for k, (seg, (roots, signs)) in enumerate(zip(segments, pieces)):
        ends = [float(seg.lo)] + list(roots) + [float(seg.hi)]
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
    tv = min(max(fA - gA if engine_tv is None else engine_tv, 0.0), 1.0)

    H = None
    if hessian:
        H = np.zeros((J, J))
        for k, seg in enumerate(segments):
            cs = np.array([c for kk, c in crossings if kk == k])
            if cs.size == 0:
                continue
            custom = seg.sign_function(w, delta) if hasattr(seg, "sign_function") else None
            rfun, scale = custom or ((lambda x: _r(seg, w_log, delta, x)), (lambda x: np.exp(log_phi(x - delta))))
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

    def intervals(self, w, delta, known=None):
        """Crossings, signs of ``f - g_w`` between them, and ``TV``, from the one crossing search.

        :func:`rass_theory.exact.laws.residual_intervals` (the search of every residual, on the
        truncation window of :mod:`rass_theory.exact._window`); ``TV`` is its
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
    return evaluate_tv([rank_segment(K)], w, float(delta), hessian=hessian)
