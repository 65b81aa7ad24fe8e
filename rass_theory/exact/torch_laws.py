"""Torch kernels of the rank-1 laws: log Phi, order-statistic laws, D-GRS levels, residual draws.

Every function works on batched tensors (one row per node, per-row ``delta``), uses only
``torch.where`` / ``gather`` / ``scatter`` and fixed-iteration loops (never a data-dependent
branch), so nothing here synchronises the device with the host.  The NumPy references are
:mod:`rass_theory.exact.batch` and :mod:`rass_theory.exact.dgrs`; tests check agreement.

Notation (``proofs/P1-rank1-reduction.md``): ``phi``/``Phi`` standard normal pdf/cdf, ``f(s) = phi(s - delta)``.
"""
from __future__ import annotations

import math

import torch

from ._window import half_width

__all__ = [
    "LOG_SQRT_2PI",
    "log_phi",
    "log_ndtr",
    "log1mexp",
    "log_ndtr_diff",
    "SelectedLaw",
    "rank_law",
    "threshold_law",
    "sample_residual",
    "dgrs_levels",
    "dgrs_accept_prob",
    "dgrs_sample_final_residual",
    "bisection_iterations",
]

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF_PI = math.sqrt(0.5 * math.pi)
_SQRT_HALF = math.sqrt(0.5)


def bisection_iterations(dtype: torch.dtype, width_bits: int = 4) -> int:
    """Number of bisection steps that shrink a bracket of width ``2**width_bits`` below one ulp.

    float64: 52 + ``width_bits``; float32: 23 + ``width_bits``.
    """
    return int(round(-math.log2(torch.finfo(dtype).eps))) + width_bits


def log_phi(x: torch.Tensor) -> torch.Tensor:
    """``log phi(x) = -x^2/2 - log sqrt(2 pi)``."""
    return -0.5 * x * x - LOG_SQRT_2PI


def log_ndtr(x: torch.Tensor) -> torch.Tensor:
    """``log Phi(x)``, accurate in both tails (``torch.special.log_ndtr``)."""
    return torch.special.log_ndtr(x)


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """``log(1 - exp(x))`` for ``x <= 0`` (Maechler's two-branch formula; ``-inf`` at 0)."""
    return torch.where(x > -math.log(2.0), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def log_ndtr_diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``log(Phi(b) - Phi(a))`` for ``a <= b`` without cancellation in either tail.

    For ``a > 0`` the difference is taken between upper tails, ``Phi(-a) - Phi(-b)``.
    ``b = +inf`` gives ``log Phi(-a)``.
    """
    upper = a > 0
    hi = torch.where(upper, log_ndtr(-a), log_ndtr(b))
    lo = torch.where(upper, log_ndtr(-b), log_ndtr(a))
    return hi + log1mexp(torch.clamp(lo - hi, max=0.0))


def _mills(x: torch.Tensor) -> torch.Tensor:
    """Mills ratio ``Phi(-x)/phi(x) = sqrt(pi/2) erfcx(x/sqrt 2)``."""
    return _SQRT_HALF_PI * torch.special.erfcx(x * math.sqrt(0.5))


def _log_binom(K: int, dtype, device) -> torch.Tensor:
    """``log C(K, i)`` for ``i = 0..K`` as a tensor."""
    i = torch.arange(K + 1, dtype=torch.float64, device=device)     # built on the device: no copy
    val = math.lgamma(K + 1) - torch.lgamma(i + 1) - torch.lgamma(K - i + 1)
    return val.to(dtype=dtype)


def _stream_logsumexp(terms):
    """``log sum_i exp(t_i)`` of a list of equally shaped tensors, memory of one term."""
    acc = None
    for t in terms:
        acc = t if acc is None else torch.logaddexp(acc, t)
    return acc


class SelectedLaw:
    """Law of the selected child's ``s`` under a threshold-rank policy, per row.

    The policy: sort the ``K`` children by ``s``; if the top one has ``s >= t`` select it,
    otherwise select rank ``j`` with probability ``w_j``.  ``t = +inf`` is plain RASS.

    Parameters
    ----------
    weights : Tensor (n, K)
        Rank weights per row (ascending ranks, on the simplex).
    t : Tensor (n,)
        Threshold per row (``+inf`` for RASS).

    Notes
    -----
    With ``p = Phi(s)`` and ``P = Phi(t)``, for ``s < t``

        g(s) = phi(s) sum_j w_j K C(K-1, j) p^j (P - p)^(K-1-j),
        G(s) = sum_{i=1}^K W_i C(K, i) p^i (P - p)^(K-i),   W_i = sum_{j<i} w_j,
        1 - G(s) = (1 - P^K) + sum_{i=0}^{K-1} (1 - W_i) C(K, i) p^i (P - p)^(K-i),

    and for ``s >= t``: ``g(s) = K phi(s) p^(K-1)``, ``G(s) = p^K``.  With ``t = +inf`` this is
    the Bernstein form of the RASS selected law (proof ``P7-selected-law``).
    All sums are evaluated as streaming log-sum-exps of log-space terms (``log_ndtr``), so
    float32 keeps relative accuracy in both tails.  Inputs ``s`` of shape ``(n, m)`` evaluate
    row ``i``'s law at ``m`` points.
    """

    def __init__(self, weights: torch.Tensor, t: torch.Tensor):
        self.K = int(weights.shape[-1])
        self.weights = weights
        self.t = t
        dtype, device = weights.dtype, weights.device
        K = self.K
        with torch.no_grad():
            self._log_w = torch.log(weights)                           # (n, K), -inf for w = 0
            cum = torch.cumsum(weights, dim=-1)
            cum_excl = torch.cat([torch.zeros_like(cum[:, :1]), cum[:, :-1]], dim=-1)  # W_0..W_{K-1}
            W = torch.cat([cum_excl, torch.ones_like(cum[:, :1])], dim=-1)             # W_0..W_K
            self._log_W = torch.log(torch.clamp(W, min=0.0))
            self._log_1mW = torch.log(torch.clamp(1.0 - W, min=0.0))
            self._log_binom_K = _log_binom(K, dtype, device)
            self._log_binom_Km1 = _log_binom(K - 1, dtype, device) + math.log(K)
            finite_t = torch.isfinite(t)
            t_safe = torch.where(finite_t, t, torch.zeros_like(t))
            self._log_P = torch.where(finite_t, log_ndtr(t_safe), torch.zeros_like(t))       # log Phi(t)
            self._log_1mPK = torch.where(finite_t, log1mexp(K * self._log_P),
                                         torch.full_like(t, -math.inf))                      # log(1 - P^K)
            binom_K = torch.exp(self._log_binom_K)
            self._coef_pdf = weights * torch.exp(self._log_binom_Km1)                   # w_j K C(K-1, j)
            self._coef_cdf = W * binom_K                                                 # W_i C(K, i)
            self._coef_ccdf = torch.clamp(1.0 - W, min=0.0) * binom_K                    # (1 - W_i) C(K, i)
        #: True when the law was built by :func:`rank_law` (no threshold anywhere)
        self.rank_only = False

    def _parts(self, s):
        log_p = log_ndtr(s)
        if self.rank_only:
            return None, log_p, log_ndtr(-s)
        t = self.t[:, None]
        below = s < t
        log_q = torch.where(torch.isfinite(t), log_ndtr_diff(torch.minimum(s, t), t), log_ndtr(-s))  # log(P - p)
        return below, log_p, log_q

    def _logpdf(self, s, below, log_p, log_q):
        K = self.K
        terms = []
        for j in range(K):
            term = self._log_w[:, j:j + 1] + self._log_binom_Km1[j]
            if j:
                term = term + j * log_p
            if K - 1 - j:
                term = term + (K - 1 - j) * log_q
            terms.append(term)
        low = _stream_logsumexp(terms)
        if below is not None:
            low = torch.where(below, low, math.log(K) + (K - 1) * log_p)
        return log_phi(s) + low

    def _cdf_pair(self, below, log_p, log_q):
        K = self.K
        lower_terms, upper_terms = [], []
        for i in range(K + 1):
            base = self._log_binom_K[i]
            if i:
                base = base + i * log_p
            if K - i:
                base = base + (K - i) * log_q
            if i:                               # W_0 = 0
                lower_terms.append(base + self._log_W[:, i:i + 1])
            if i < K:                           # 1 - W_K = 0
                upper_terms.append(base + self._log_1mW[:, i:i + 1])
        G = torch.exp(_stream_logsumexp(lower_terms))
        upper = _stream_logsumexp(upper_terms)
        if below is None:
            return G, torch.exp(upper)
        Gc = torch.exp(torch.logaddexp(upper, self._log_1mPK[:, None]))
        G = torch.where(below, G, torch.exp(K * log_p))
        Gc = torch.where(below, Gc, -torch.expm1(K * log_p))
        return G, Gc

    def linear(self, s: torch.Tensor, need_cdf: bool = True):
        """``(g(s)/phi(s), G(s), 1 - G(s))`` in linear space (fast path of the residual sampler).

        ``p`` and ``P - p`` come from ``erfc`` (upper tails right of 0), so there is no
        cancellation; powers underflow only where the law's mass is below the dtype's range.
        """
        K = self.K
        p = 0.5 * torch.special.erfc(-s * _SQRT_HALF)
        if self.rank_only:
            q = 0.5 * torch.special.erfc(s * _SQRT_HALF)
            below = None
        else:
            t = self.t[:, None]
            below = s < t
            tt = torch.where(torch.isfinite(t), t, torch.full_like(t, 1e300 if t.dtype == torch.float64 else 3e38))
            sm = torch.minimum(s, tt)
            q = torch.where(sm > 0,
                            0.5 * (torch.special.erfc(sm * _SQRT_HALF) - torch.special.erfc(tt * _SQRT_HALF)),
                            0.5 * (torch.special.erfc(-tt * _SQRT_HALF) - torch.special.erfc(-sm * _SQRT_HALF)))
        p_pow = [torch.ones_like(p), p]
        q_pow = [torch.ones_like(q), q]
        for _ in range(2, K + 1):
            p_pow.append(p_pow[-1] * p)
            q_pow.append(q_pow[-1] * q)
        B = 0
        for j in range(K):
            B = B + self._coef_pdf[:, j:j + 1] * (p_pow[j] * q_pow[K - 1 - j])
        if not need_cdf:
            return (B if below is None else torch.where(below, B, K * p_pow[K - 1])), None, None
        G = 0
        Gc = 0
        for i in range(K + 1):
            term = p_pow[i] * q_pow[K - i]
            G = G + self._coef_cdf[:, i:i + 1] * term
            Gc = Gc + self._coef_ccdf[:, i:i + 1] * term
        if below is None:
            return B, G, Gc
        pK = p_pow[K]
        B = torch.where(below, B, K * p_pow[K - 1])
        Gc = Gc + (-torch.expm1(K * self._log_P))[:, None]
        G = torch.where(below, G, pK)
        upper_tail = 0.5 * torch.special.erfc(s * _SQRT_HALF)
        Gc = torch.where(below, Gc, -torch.expm1(K * torch.log1p(-upper_tail)))
        return B, G, Gc

    def logpdf(self, s: torch.Tensor) -> torch.Tensor:
        """``log g(s)`` for ``s`` of shape ``(n, m)``."""
        return self._logpdf(s, *self._parts(s))

    def cdf_pair(self, s: torch.Tensor):
        """``(G(s), 1 - G(s))`` for ``s`` of shape ``(n, m)``, each without cancellation."""
        return self._cdf_pair(*self._parts(s))

    def subset(self, rows: torch.Tensor) -> "SelectedLaw":
        """The law restricted to the given rows (an index tensor)."""
        law = SelectedLaw(self.weights[rows], self.t[rows])
        law.rank_only = self.rank_only
        return law


def rank_law(weights: torch.Tensor) -> SelectedLaw:
    """RASS selected law for rank weights ``(n, K)`` (threshold ``+inf``)."""
    t = torch.full(weights.shape[:1], math.inf, dtype=weights.dtype, device=weights.device)
    law = SelectedLaw(weights, t)
    law.rank_only = True
    return law


def threshold_law(weights: torch.Tensor, t: torch.Tensor) -> SelectedLaw:
    """Selected law of the threshold-rank policy (top child if ``s >= t``, else rank ``~ w``)."""
    return SelectedLaw(weights, t)


def default_grid_size(K: int, span: float | None = None) -> int:
    """Grid points giving spacing ``min(0.125, 0.5/K)`` on a grid of width ``2 span + 2``.

    ``span`` defaults to the engine's window half-width ``L(K)`` (:mod:`rass_theory.exact._window`).
    """
    span = half_width(K) if span is None else span
    return int(math.ceil((2.0 * span + 2.0) / min(0.125, 0.5 / K))) + 1


def _evaluate(law: SelectedLaw, delta: torch.Tensor, s: torch.Tensor, *, need_ratio=True, need_diff=True):
    """``[h, D, f - g]`` at ``s`` (only the requested ones), in linear space.

    ``h = log(f/phi) - log(g/phi) = delta s - delta^2/2 - log B(s)``; ``D = F - G`` with
    ``F(s) = Phi(s - delta)``, taken between upper tails right of ``delta/2`` so that neither tail
    cancels; ``f - g = phi(s) (exp(delta s - delta^2/2) - B(s))``.
    """
    d = delta[:, None]
    B, G, Gc = law.linear(s, need_cdf=need_diff)
    out = []
    lr = d * s - 0.5 * d * d
    if need_ratio:
        out.append(lr - torch.log(B))
    if need_diff:
        F = 0.5 * torch.special.erfc((d - s) * _SQRT_HALF)
        Fc = 0.5 * torch.special.erfc((s - d) * _SQRT_HALF)
        out.append(torch.where(s >= 0.5 * d, Gc - Fc, F - G))
        if need_ratio:
            out.append(torch.exp(log_phi(s)) * (torch.exp(lr) - B))
    return out


def sample_residual(law: SelectedLaw, delta: torch.Tensor, u: torch.Tensor, *,
                    grid_size: int | None = None, max_crossings: int | None = None,
                    span: float | None = None) -> torch.Tensor:
    """Inverse-CDF draw from the residual ``(f - g)_+ / TV(f, g)``, one draw per row.

    Parameters
    ----------
    law : SelectedLaw
        The selected law ``g`` per row.
    delta : Tensor (n,)
        Per-row displacement (``> 0``; callers substitute 1 on degenerate rows).
    u : Tensor (n,)
        Uniforms in ``(0, 1]``.
    grid_size : int, optional
        Number ``m`` of grid points on ``[min(0, delta) - span, max(0, delta) + span]``.  Default
        :func:`default_grid_size`: spacing ``min(0.125, 0.5/K)`` for ``delta <= 2`` (crossings of
        optimal weights are ``>= ~2/K`` apart; Dirichlet-random weights occasionally have bumps
        down to ``~0.13`` wide, see ``rass_theory.exact.batch.grid_spacing``).
    max_crossings : int, optional
        Sign-change cells of ``f - g`` refined per row (default ``K + 1``).
    span : float, optional
        Half-width of the grid beyond the two means; default ``L(K)``, the engine's window
        (:func:`rass_theory.exact._window.half_width`: 11.5 for ``K <= 1515``).

    Returns
    -------
    Tensor (n,)

    Notes
    -----
    1. Evaluate ``h = log f - log g`` on the grid; cells where ``h`` changes sign hold a
       crossing, located by fixed-iteration bisection (the ``max_crossings`` sign-change cells
       per row are chosen with ``topk``, no host synchronisation).
    2. Each cell's residual mass is ``D(b) - D(a)`` on its positive part ``[a, b]``, where
       ``D = F - G`` is closed form (``F(s) = Phi(s - delta)``, ``G`` the Bernstein CDF).
    3. Pick the cell by ``u * TV`` against the cumulative masses (``searchsorted``), then solve
       ``D(s) - D(a) = rest`` inside it (``D' = f - g > 0`` there): 8 bisection steps, then
       safeguarded Newton steps (a step leaving the bracket is replaced by a bisection step).

    Accuracy: the result is exact up to (i) the root-finding tolerance, (ii) rounding of ``D``
    (absolute ``eps``, relative to a cell's mass: the float32 limitation), (iii) residual mass
    outside the grid, at most ``(K + 1) Phi(-span)`` (``<= 1e-27`` at the default span, the
    engine's window ``L(K)`` of :mod:`rass_theory.exact._window`) and
    (iv) a pair of crossings closer than one grid cell (``(hi - lo)/(m - 1)``), whose bump of mass ``O(width^3 max|(f - g)''|)`` would be missed, as would a
    ``max_crossings + 1``-th crossing.  The residual of RASS at optimal weights has one to three
    well separated crossings; tests compare the draws with an independent quadrature.
    """
    dtype, device = delta.dtype, delta.device
    K = law.K
    span = half_width(K) if span is None else float(span)
    m = int(grid_size) if grid_size is not None else default_grid_size(K, span)
    C = min(m - 1, int(max_crossings if max_crossings is not None else K + 1))
    lo = torch.clamp(delta, max=0.0) - span
    hi = torch.clamp(delta, min=0.0) + span
    frac = torch.linspace(0.0, 1.0, m, dtype=dtype, device=device)
    grid = lo[:, None] + (hi - lo)[:, None] * frac[None, :]            # (n, m)
    h, D = _evaluate(law, delta, grid)[:2]
    pos = h > 0                                                         # f > g at grid points
    left_pos, right_pos = pos[:, :-1], pos[:, 1:]
    change = left_pos != right_pos                                      # (n, m-1)

    # refine up to C sign-change cells per row; the mass error is quadratic in the location
    # error, so about half the mantissa bits suffice
    _, cell = torch.topk(change.to(dtype), C, dim=1)                    # (n, C)
    valid = change.gather(1, cell)
    a = grid.gather(1, cell)
    b = grid.gather(1, cell + 1)
    sign_a = left_pos.gather(1, cell)
    n_bisect = bisection_iterations(dtype, 0) // 2 if not law.rank_only else 6
    for _ in range(n_bisect):
        mid = 0.5 * (a + b)
        same = (_evaluate(law, delta, mid, need_diff=False)[0] > 0) == sign_a
        a = torch.where(same, mid, a)
        b = torch.where(same, b, mid)
    if law.rank_only:                  # h is smooth: Illinois (regula falsi) steps, bracketed
        big = torch.finfo(dtype).max ** 0.5
        ha = torch.clamp(_evaluate(law, delta, a, need_diff=False)[0], -big, big)
        hb = torch.clamp(_evaluate(law, delta, b, need_diff=False)[0], -big, big)
        for _ in range(5):
            x = (a * hb - b * ha) / (hb - ha)
            inside = (x > torch.minimum(a, b)) & (x < torch.maximum(a, b))
            x = torch.where(inside, x, 0.5 * (a + b))
            hx = torch.clamp(_evaluate(law, delta, x, need_diff=False)[0], -big, big)
            flip = (hx > 0) != (hb > 0)
            a, ha = torch.where(flip, b, a), torch.where(flip, hb, 0.5 * ha)
            b, hb = x, hx
        x = b
    else:
        x = 0.5 * (a + b)
    Dx = _evaluate(law, delta, x, need_ratio=False)[0]
    right, D_l, D_r = grid[:, 1:], D[:, :-1], D[:, 1:]
    x_full = right.clone().scatter_(1, cell, torch.where(valid, x, right.gather(1, cell)))
    Dx_full = D_r.clone().scatter_(1, cell, torch.where(valid, Dx, D_r.gather(1, cell)))
    refined = torch.zeros_like(change).scatter_(1, cell, valid)

    both = left_pos & right_pos
    cross_l = change & refined & left_pos          # positive on [left, x]
    cross_r = change & refined & right_pos         # positive on [x, right]
    zero = torch.zeros((), dtype=dtype, device=device)
    mass = torch.where(both, D_r - D_l,
                       torch.where(cross_l, Dx_full - D_l, torch.where(cross_r, D_r - Dx_full, zero)))
    mass = torch.clamp(mass, min=0.0)
    a_cell = torch.where(cross_r, x_full, grid[:, :-1])
    b_cell = torch.where(cross_l, x_full, right)
    Da_cell = torch.where(cross_r, Dx_full, D_l)

    cum = torch.cumsum(mass, dim=1)
    target = u[:, None] * cum[:, -1:]
    k = torch.clamp(torch.searchsorted(cum, target), max=m - 2)        # (n, 1)
    rest = target - (cum.gather(1, k) - mass.gather(1, k))
    a = a_cell.gather(1, k)
    b = b_cell.gather(1, k)
    Da = Da_cell.gather(1, k)
    for _ in range(8):
        mid = 0.5 * (a + b)
        low = (_evaluate(law, delta, mid, need_ratio=False)[0] - Da) < rest
        a = torch.where(low, mid, a)
        b = torch.where(low, b, mid)
    x = 0.5 * (a + b)
    for _ in range(6 if dtype == torch.float64 else 4):
        _, Dm, slope = _evaluate(law, delta, x)
        resid = Dm - Da - rest
        a = torch.where(resid < 0, x, a)
        b = torch.where(resid < 0, b, x)
        step = x - resid / slope
        ok = (slope > 0) & (step >= a) & (step <= b)
        x = torch.where(ok, step, 0.5 * (a + b))
    return x[:, 0]


# --------------------------------------------------------------------------------------------
# D-GRS closed-form levels
# --------------------------------------------------------------------------------------------

def dgrs_levels(K: int, delta: torch.Tensor):
    """Closed-form D-GRS residual levels for per-row ``delta`` (computed in float64).

    Returns
    -------
    log_b : Tensor (n, K + 1)
        ``log b_k`` for ``k = 0..K`` (``-inf`` at ``k = 0``).
    c : Tensor (n, K + 1)
        Crossings ``c_k`` (``-inf`` at ``k = 0``).
    log_Z : Tensor (n, K)
        ``log Z_k`` for ``k = 1..K``; acceptance ``1 - exp(sum log Z)``.

    Notes
    -----
    ``r_k = a_k f - b_k phi`` on ``s > c_k`` with ``a_k f(c_k) = b_k phi(c_k)``, so
    ``r_k(s)/phi(s) = b_k expm1(delta (s - c_k))``.  From ``r_k = (r_{k-1} - phi)_+ / Z_k``:

        c_1 = delta/2,   c_k = c_{k-1} + log1p(1/b_{k-1}) / delta   (k >= 2),
        Z_k = (b_{k-1} + 1) phi(c_k) [M(c_k - delta) - M(c_k)],     M(x) = Phi(-x)/phi(x),
        b_k = (b_{k-1} + 1) / Z_k,   b_0 = 0,

    with the Mills ratio through ``erfcx`` (no overflow in either tail).  Computed in float64
    whatever the input dtype (``O(nK)`` scalars, negligible next to the projections); proof
    ``P3-dgrs-closed-form``.  ``delta`` must be ``> 0`` (callers substitute 1 on degenerate rows).
    """
    d = delta.to(torch.float64)
    n = d.shape[0]
    log_b = [torch.full((n,), -math.inf, dtype=torch.float64, device=d.device)]
    c = [torch.full((n,), -math.inf, dtype=torch.float64, device=d.device)]
    log_Z = []
    for k in range(1, K + 1):
        if k == 1:
            ck = 0.5 * d
            log_bp1 = torch.zeros_like(d)                     # log(b_0 + 1)
        else:
            ck = c[-1] + torch.log1p(torch.exp(-log_b[-1])) / d
            log_bp1 = torch.logaddexp(log_b[-1], torch.zeros_like(d))
        diff = _mills(ck - d) - _mills(ck)
        lz = log_bp1 + log_phi(ck) + torch.log(torch.clamp(diff, min=torch.finfo(torch.float64).tiny))
        lz = torch.clamp(lz, max=0.0)
        log_Z.append(lz)
        log_b.append(log_bp1 - lz)
        c.append(ck)
    return torch.stack(log_b, 1), torch.stack(c, 1), torch.stack(log_Z, 1)


def dgrs_accept_prob(k: int, delta: torch.Tensor, s: torch.Tensor, log_b: torch.Tensor,
                     c: torch.Tensor) -> torch.Tensor:
    """``min(1, r_{k-1}(s)/phi(s))`` for child ``k`` (1-based), float64.

    ``k = 1``: ``exp(min(0, delta s - delta^2/2))``; ``k >= 2``:
    ``clip(b_{k-1} expm1(delta (s - c_{k-1})), 0, 1)``.
    """
    d = delta.to(torch.float64)
    s = s.to(torch.float64)
    if k == 1:
        return torch.exp(torch.clamp(d * s - 0.5 * d * d, max=0.0))
    val = torch.exp(log_b[:, k - 1]) * torch.expm1(d * (s - c[:, k - 1]))
    return torch.clamp(val, min=0.0, max=1.0)


#: Upper end of the D-GRS final-residual bracket beyond ``max(c_K, delta)``, and its bisection steps.
_DGRS_SPAN = 12.0
_DGRS_BISECTIONS = 16


def dgrs_sample_final_residual(delta: torch.Tensor, u: torch.Tensor, log_b: torch.Tensor,
                               c: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from ``r_K`` (float64): the ``s`` with ``R_K(s) = u``, ``u`` in ``[0, 1)``.

    Notes
    -----
    The upper tail of ``r_K`` is ``Q(s) = b_K phi(s) [exp(delta (s - c_K)) M(s - delta) - M(s)]``
    for ``s >= c_K`` (``Q(c_K) = 1``, decreasing), its density ``r_K(s) = b_K phi(s)
    expm1(delta (s - c_K))``.  Solve ``g(s) = log Q(s) - log(1 - u) = 0`` on
    ``[c_K, max(c_K, delta) + 12]``: 16 bisection steps (bracket ``<= 2e-4``), then 6 Newton
    steps ``s - g / g'`` with ``g' = -r_K / Q``, each kept inside the current bracket (a step
    that leaves it is replaced by bisection).  ``g`` is decreasing and concave near ``c_K``, so
    Newton converges monotonically there.  Fixed iteration counts: no host synchronisation (a
    data-dependent stop, as in :func:`rass_theory.exact._roots.bracketed_roots`, would need one).
    Same map ``u -> s`` as ``rass_theory.exact.dgrs.batch_sample_final_residual``.
    """
    d = delta.to(torch.float64)
    v = 1.0 - u.to(torch.float64)
    log_u = torch.log(torch.clamp(v, min=torch.finfo(torch.float64).tiny))
    cK = c[:, -1]
    lbK = log_b[:, -1]

    def log_q(x):
        log_first = d * (x - cK) + torch.log(_mills(x - d))
        return lbK + log_phi(x) + log_first + log1mexp(torch.clamp(torch.log(_mills(x)) - log_first, max=0.0))

    a = cK.clone()
    # Q(max(c_K, delta) + 12) <= Phi(-12) ~ 2e-33 (times O(1)): below the smallest 1 - u (2**-53)
    b = torch.maximum(cK, d) + _DGRS_SPAN
    for _ in range(_DGRS_BISECTIONS):
        mid = 0.5 * (a + b)
        above = log_q(mid) > log_u                # Q(mid) > 1 - u: the root lies to the right
        a = torch.where(above, mid, a)
        b = torch.where(above, b, mid)
    x = 0.5 * (a + b)
    for _ in range(6):
        lq = log_q(x)
        g = lq - log_u
        a = torch.where(g > 0, x, a)
        b = torch.where(g > 0, b, x)
        log_r = lbK + log_phi(x) + torch.log(torch.expm1(d * (x - cK)))
        step = x + g * torch.exp(lq - log_r)      # x - g / g'
        ok = torch.isfinite(step) & (step >= a) & (step <= b)   # g = 0 gives step = x: stay
        x = torch.where(ok, step, 0.5 * (a + b))
    return x


# --------------------------------------------------------------------------------------------
# The law pieces of the verifier kernels: the same names and meanings as in
# rass_theory.exact.residual_tables (the NumPy back end); rass_theory.verifiers.kernels picks
# the module that matches the inputs.
# --------------------------------------------------------------------------------------------

#: Rows per residual block (bounded memory; a loop over blocks, not rows).
RESIDUAL_BLOCK = 16384


def law_residual(law: SelectedLaw, delta: torch.Tensor, u: torch.Tensor, **options) -> torch.Tensor:
    """:func:`sample_residual` in blocks of :data:`RESIDUAL_BLOCK` rows."""
    n = delta.shape[0]
    if n <= RESIDUAL_BLOCK:
        return sample_residual(law, delta, u, **options)
    parts = []
    for start in range(0, n, RESIDUAL_BLOCK):
        rows = torch.arange(start, min(n, start + RESIDUAL_BLOCK), device=delta.device)
        parts.append(sample_residual(law.subset(rows), delta[rows], u[rows], **options))
    return torch.cat(parts)


def rank_residual(weights: torch.Tensor, delta: torch.Tensor, u: torch.Tensor, **options) -> torch.Tensor:
    """Draws from ``(f - g_w)_+ / TV`` per row for rank weights ``(K,)`` or ``(n, K)``."""
    w = weights.expand(delta.shape[0], -1) if weights.ndim == 1 else weights
    return law_residual(rank_law(w.contiguous()), delta, u, **options)


def dgrs_row_levels(K: int, delta: torch.Tensor):
    """Per-row D-GRS levels ``(log_b, c)`` (:func:`dgrs_levels`), the state of :func:`dgrs_accept`."""
    return dgrs_levels(K, delta)[:2]


def take_levels(levels, rows: torch.Tensor):
    """The levels of the given rows."""
    return tuple(x[rows] for x in levels)


def dgrs_accept(k: int, delta: torch.Tensor, s: torch.Tensor, levels) -> torch.Tensor:
    """``min(1, r_{k-1}(s)/phi(s))`` for child ``k`` (1-based), :func:`dgrs_accept_prob`."""
    return dgrs_accept_prob(k, delta, s, *levels)


def dgrs_final(K: int, delta: torch.Tensor, u: torch.Tensor, levels) -> torch.Tensor:
    """Inverse-CDF draw from ``r_K`` per row (:func:`dgrs_sample_final_residual`)."""
    return dgrs_sample_final_residual(delta, u, *levels)


def single_draft_residual(delta: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from ``(f - phi)_+ / TV`` (the D-GRS level 1 residual), float64."""
    return dgrs_final(1, delta, u, dgrs_row_levels(1, delta))
