"""One law engine for NumPy and torch: selected laws and their residual sampler.

Every selected law ``g`` of the rank-1 coordinate ``s`` (the law of the child a rule selects)
is written once against the backend namespace ``nx`` (:mod:`rass_theory.backend`), so the same
code serves NumPy arrays and torch tensors on any device (float64 math, device follows the
inputs, no host synchronisation on an accelerator).

The protocol (:class:`SelectedLaw`) a law implements for :func:`sample`:

- ``K`` (int) and ``nx`` (the namespace of its parameters);
- ``log_ratio(s)``: ``log(g(s) / phi(s))`` for ``s`` of shape ``(r, m)``, row ``i`` in row
  ``i``'s law (a law with one shared parameter set broadcasts over rows; ``(r, 1)`` evaluates
  one point per row);
- ``cdf_excess(s)``: ``G(s) - Phi(s)``, same shapes, without cancellation in either tail;
- ``take(rows)``: the law of the given rows (a shared law returns itself);
- ``keys()``: a float64 ``(r, c)`` array identifying each row's law (rows with equal keys have
  the same law), or ``None`` for a shared law;
- optional ``log_ratio_grid(grid)``: ``log(g/phi)`` of every row on one shared ascending grid,
  ``(r, m)`` (a faster form of ``log_ratio``; default: ``log_ratio`` broadcast);
- optional ``breaks()``: ``(r,)`` points where ``g`` may jump (a threshold), or ``None``; the
  grid cell holding a break is split there and the jump itself is a crossing candidate;
- optional ``log_ratio_max`` (float): an upper bound of ``log(g/phi)`` (``log K`` for any
  selection of one of ``K`` children); the scan of a row then stops where ``h > 0`` is
  certain, ``s > delta/2 + log_ratio_max/delta`` (:func:`_scan_widths`);
- optional ``spacing`` (float): the grid spacing of the crossing scan (default
  :func:`grid_spacing` of ``K``);
- optional ``crossings(delta)``: ``(points (r, c), first_positive (r,))`` when the crossings of
  ``f = phi(. - delta)`` and ``g`` are known in closed form (``points`` ascending, padded with
  ``+inf``; ``first_positive`` the sign of ``f - g`` left of the first one).  When present the
  grid scan is skipped.

Implementations: :class:`RankLaw` (RASS rank mixtures with weights ``(K,)`` or ``(r, K)``, and
the threshold-rank policy with a per-row threshold ``t``, ``t = +inf`` being RASS) and
:class:`DGRSLaw` (the D-GRS level recursion: per-child acceptance and the final residual).
The optimal list law (``rass_theory.optimize.list_rule``) implements the same protocol.

Proofs: the selected laws ``proofs/P7-selected-law.md`` and ``proofs/P8-value-aware-policies.md``,
the residual ``proofs/P2-rass-exactness.md``, D-GRS ``proofs/P3-dgrs-closed-form.md``, the
truncation window :mod:`rass_theory.exact._window`.
"""
from __future__ import annotations

import functools
import math
from typing import Protocol

import numpy as np

from rass_theory.backend import get_backend
from rass_theory.exact._window import half_width

__all__ = ["SelectedLaw", "RankLaw", "rank_law", "threshold_law", "PolicyLaw", "DGRSLaw", "sample",
           "residual_intervals", "residual_mass",
           "shift_difference", "cdf_difference", "grid_spacing", "RESIDUAL_BLOCK"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
#: rows per block of the residual sampler on the host (bounded memory: a loop over blocks, not
#: rows; the crossing scan inside a block runs over cache-sized blocks of its own); twice as many
#: on an accelerator, where the scan holds a per-row grid of the whole block
RESIDUAL_BLOCK = 32768


class SelectedLaw(Protocol):
    """The law ``g`` of a selected child's ``s``, one parameter set per row (module docstring)."""

    K: int

    def log_ratio(self, s):
        """``log(g(s) / phi(s))`` for ``s (r, m)``."""

    def cdf_excess(self, s):
        """``G(s) - Phi(s)`` for ``s (r, m)``, without cancellation in either tail."""

    def take(self, rows) -> "SelectedLaw":
        """The law of ``rows`` (an index array of the law's back end)."""

    def keys(self):
        """``(r, c)`` float64 parameters identifying each row's law, or ``None`` if shared."""


def grid_spacing(K: int) -> float:
    """The crossing-scan spacing of the engine for ``K`` children: ``min(0.1, 0.5 / sqrt(K))``.

    Notes
    -----
    ``0.5/sqrt(K)`` is below half the width of the narrowest order-statistic density (standard
    deviation ``>= ~1.25/sqrt(K)``).  Two crossings inside one cell (a near tangency, the
    generic way crossings come close) are found by the hidden-pair split of :func:`sample`.
    """
    return min(0.1, 0.5 / math.sqrt(int(K)))


# ---------------------------------------------------------------------------------------------
# standard normal pieces in the namespace


def log_phi(nx, s):
    """``log phi(s)``."""
    return -0.5 * s * s - _LOG_SQRT_2PI


def shift_difference(nx, x, delta):
    """``Phi(x - delta) - Phi(x)`` (the CDF of ``f - phi``) with relative accuracy.

    ``-centered_mass(x - delta/2, delta/2)``: the half-width ``delta / 2`` is used exactly (forming
    ``x - delta`` first would round the width by ``eps |x|``), the Hermite series where the
    interval is short and upper tails otherwise (:func:`centered_mass`).  ``x = +-inf`` gives 0.
    """
    half = 0.5 * delta
    return -centered_mass(nx, x - half, half + nx.zeros_like(x))


def cdf_difference(law, x, delta):
    """``D(x) = F(x) - G(x) = [Phi(x - delta) - Phi(x)] - [G(x) - Phi(x)]`` at points ``x (n,)``,
    point ``i`` on row ``i`` of ``law`` (or of one shared law) with displacement ``delta[i]``.

    The residual's unnormalised CDF on an interval where ``f > g``: both brackets keep relative
    accuracy in the tails (:func:`shift_difference`, ``law.cdf_excess``; ``proofs/P7-selected-law.md``).
    """
    return shift_difference(law.nx, x, delta) - law.cdf_excess(x[:, None])[:, 0]


def _log1mexp(nx, x):
    """``log(1 - exp(x))`` for ``x <= 0`` (Maechler's two branches; ``-inf`` at 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return nx.where(x > -math.log(2.0), nx.log(-nx.expm1(x)), nx.log1p(-nx.exp(nx.minimum(x, 0.0))))


def _log_diff_tails(nx, s, t):
    """``log(Phi(t) - Phi(s))`` for ``s <= t`` in log space (upper tails right of 0), so it keeps
    relative accuracy far in either tail; ``-inf`` at ``s = t``."""
    upper = s > 0
    hi = nx.where(upper, nx.log_ndtr(-s), nx.log_ndtr(t))
    lo = nx.where(upper, nx.log_ndtr(-t), nx.log_ndtr(s))
    return hi + _log1mexp(nx, nx.minimum(lo - hi, 0.0))


def _powers(x, n: int) -> list:
    """``[1, x, x^2, ..., x^n]`` (repeated products)."""
    out = [x * 0.0 + 1.0, x]
    for _ in range(2, n + 1):
        out.append(out[-1] * x)
    return out[: n + 1]


#: largest K whose Bernstein coefficients ``K C(K-1, j)`` and ``C(K, i)`` are summed in linear
#: space (they overflow float64 from K = 1030); above it every sum is formed in log space
LINEAR_K_MAX = 512


@functools.lru_cache(maxsize=None)
def _coefficients(K: int):
    """``log(K C(K-1, j))`` (``j < K``), ``log C(K, i)`` (``i <= K``) as tuples."""
    pdf = tuple(math.log(K) + math.lgamma(K) - math.lgamma(j + 1) - math.lgamma(K - j) for j in range(K))
    cdf = tuple(math.lgamma(K + 1) - math.lgamma(i + 1) - math.lgamma(K - i + 1) for i in range(K + 1))
    return pdf, cdf


@functools.lru_cache(maxsize=None)
def _binomials(K: int):
    """``C(K, i)`` (``i <= K``), correctly rounded (``math.comb``): the coefficients of ``G - Phi``,
    where ``exp`` of ``lgamma`` differences loses ``eps lgamma(K + 1)`` (``2e-14`` at ``K = 64``);
    ``inf`` beyond the float range (``K > 1029``), as ``exp`` of the logs gives."""
    return tuple(float(c) if c.bit_length() < 1024 else math.inf for c in map(lambda i: math.comb(K, i), range(K + 1)))


# ---------------------------------------------------------------------------------------------
# rank mixtures and threshold-rank policies


class RankLaw:
    """Selected law of a rank rule, optionally with a threshold (``P8``): one class, both back ends.

    The rule sorts the ``K`` children by ``s``; if the top one has ``s >= t`` it is selected,
    otherwise rank ``j`` is selected with probability ``w_j``.  ``t = None`` (or ``+inf``) is
    RASS.

    Parameters
    ----------
    weights : array (K,) or (r, K)
        Rank weights (ascending ranks, on the simplex), NumPy array or torch tensor.
    t : array (r,), optional
        Per-row threshold (``+inf`` entries allowed); ``None`` for RASS.

    Notes
    -----
    With ``p = Phi(s)``, ``q = Phi(t) - p`` (``q = Phi(-s)`` for RASS) and
    ``W_i = w_0 + ... + w_{i-1}``, for ``s < t``

        g(s)/phi(s) = sum_j w_j K C(K-1, j) p^j q^(K-1-j),
        G(s) - Phi(s) = sum_{i=1}^{K-1} (W_i - i/K) C(K, i) p^i q^(K-i) - p (1 - Phi(t)^(K-1)),

    (the Bernstein form reproduces ``sum_i (i/K) C(K, i) p^i q^(K-i) = p Phi(t)^(K-1)``, so the
    coefficients vanish at both ends and neither tail cancels), and for ``s >= t``
    ``g/phi = K p^(K-1)``, ``G - Phi = p expm1((K - 1) log p)``.  Powers are taken in log space
    from ``log_ndtr`` (relative accuracy in both tails).  Proofs ``P7-selected-law``, ``P8``.
    """

    def __init__(self, weights, t=None):
        self.nx = get_backend(weights)
        nx = self.nx
        w = nx.cast(weights, nx.float64)
        self.K = K = int(w.shape[-1])
        self.t = None if t is None else nx.cast(t, nx.float64)
        self._raw = w
        self.weights = w / nx.cumsum(w, -1)[..., K - 1:]
        if K <= LINEAR_K_MAX:
            #: w_j K C(K-1, j)
            self._pdf_coef = self.weights * nx.constant(np.exp(_coefficients(K)[0]), w)
        if self.t is not None:
            self._Pt, self._Qt = nx.ndtr(self.t), nx.ndtr(-self.t)  # Phi(t), Phi(-t)

    #: per-row arrays (gathered by a take on first use) and those a law computes on first use
    #: (a verifier's law needs them on its rejected rows only, if any)
    _ROW_ARRAYS = ("weights", "_raw", "_pdf_coef", "_log_w", "_cdf_dev", "_cdf_lin", "_one_minus_PK1")
    _LAZY = ("_log_w", "_cdf_dev", "_cdf_lin", "_one_minus_PK1")

    def _computed(self, name):
        """The arrays of :data:`_LAZY` of a law built from weights: ``log w``, the cumulative
        deviations ``W_i - i/K`` (``i = 1..K-1``), ``(W_i - i/K) C(K, i)`` and, with a
        threshold, ``1 - Phi(t)^(K-1)`` per row."""
        nx, K = self.nx, self.K
        if name == "_one_minus_PK1":
            finite = nx.isfinite(self.t)
            log_P = nx.where(finite, nx.log_ndtr(nx.where(finite, self.t, nx.zeros_like(self.t))), nx.zeros_like(self.t))
            return -nx.expm1((K - 1) * log_P)
        if name == "_log_w":
            with np.errstate(divide="ignore"):
                return nx.log(self.weights)
        if name == "_cdf_lin":
            return self._cdf_dev * nx.constant(np.array(_binomials(K)[1:K]), self.weights)
        # the weights are read as w / S, S = sum w (exact for sums 1 only up to rounding); the
        # deviations v = w/S - 1/K are ((w - fl(1/K)) - mean) / S: the difference is exact
        # (Sterbenz) and the mean removes S - 1 and the rounding of 1/K, so v keeps relative
        # accuracy for nearly uniform weights (order_stats.weight_parts; 0 for uniform ones)
        w = self._raw
        dev = w - 1.0 / K
        v = (dev - nx.cumsum(dev, -1)[..., K - 1:] / K) / nx.cumsum(w, -1)[..., K - 1:]
        return nx.cumsum(v, -1)[..., : K - 1]

    # -- protocol ---------------------------------------------------------------------------
    @property
    def log_ratio_max(self) -> float:
        """``sup log(g/phi) <= log K``: any selection of one of ``K`` children has ``g <= K phi``
        (bounds the crossing scan, :func:`_scan_widths`)."""
        return math.log(self.K)

    def breaks(self):
        """The threshold ``t`` per row, where ``g`` jumps (``None`` for RASS)."""
        return self.t

    def take(self, rows) -> "RankLaw":
        if self.weights.ndim == 1 and self.t is None:
            return self
        out = RankLaw.__new__(RankLaw)
        out.nx, out.K = self.nx, self.K
        # per-row arrays are gathered on first use (a root finder's step needs one or two of them)
        out._source, out._rows = self, rows
        out.t = None if self.t is None else self.t[rows]
        if self.t is not None:
            out._Pt, out._Qt = self._Pt[rows], self._Qt[rows]
        return out

    def __getattr__(self, name):
        if name not in RankLaw._ROW_ARRAYS:
            raise AttributeError(name)
        source = self.__dict__.get("_source")
        if source is not None:                        # a take: gathered (computed once, there)
            value = getattr(source, name)
            if value.ndim == 2 or name == "_one_minus_PK1":  # (r, K), or the threshold's (r,)
                value = value[self._rows]
        elif name in RankLaw._LAZY:
            value = self._computed(name)
        else:
            raise AttributeError(name)
        setattr(self, name, value)
        return value

    def keys(self):
        if self.weights.ndim == 1 and self.t is None:
            return None
        w = self.weights if self.weights.ndim == 2 else None
        if self.t is None:
            return w
        t = self.t[:, None]
        return t if w is None else self.nx.concat([w, t], 1)

    def _col(self, x, j):
        return x[:, j:j + 1] if x.ndim == 2 else x[j]

    def _pq(self, s):
        """``p = Phi(s)``, ``q`` (``Phi(-s)``, or ``Phi(t) - Phi(s)`` from the tails that do not
        cancel, ``0`` at ``s >= t``) and the mask ``s < t`` (``None`` for RASS); ``Phi(t)``,
        ``Phi(-t)`` are the law's per-row constants."""
        nx = self.nx
        if self.t is None:
            # both tails (the RASS optimiser's certificates are computed from these values)
            return nx.ndtr(s), nx.ndtr(-s), None
        # one tail per point: Phi(-|s|), the smaller of p and 1 - p, with relative accuracy; the
        # larger one is 1 minus it (>= 1/2, so also to relative accuracy eps)
        upper = s > 0
        small = nx.ndtr(nx.where(upper, -s, s))
        p = nx.where(upper, 1.0 - small, small)
        q = nx.where(upper, small - self._Qt[:, None], self._Pt[:, None] - small)
        return p, nx.maximum(q, 0.0), s < self.t[:, None]

    def _log_pq(self, s):
        """``log p = log Phi(s)`` and ``log q`` (``log Phi(-s)``, or ``log(Phi(t) - Phi(min(s, t)))``)."""
        nx = self.nx
        if self.t is None:
            return nx.log_ndtr(s), nx.log_ndtr(-s)
        t = self.t[:, None]
        return nx.log_ndtr(s), _log_diff_tails(nx, nx.minimum(s, t), t)

    def _log_ratio_log_space(self, s):
        """``log(g/phi)`` as a log-sum-exp of log-space terms (no underflow at any ``s``, ``K``)."""
        nx, K = self.nx, self.K
        log_p, log_q = self._log_pq(s)
        coef = _coefficients(K)[0]
        terms = []
        for j in range(K):
            term = self._col(self._log_w, j) + coef[j]
            if j:
                term = term + j * log_p
            if K - 1 - j:
                term = term + (K - 1 - j) * log_q
            terms.append(term + nx.zeros_like(s))
        return nx.logsumexp(nx.stack(terms, -1), -1)

    def log_ratio(self, s):
        """``log(g/phi)``: the Bernstein sum in linear space (``p``, ``q`` with relative accuracy),
        and the log-space sum where it falls below ``1e-280`` (where linear powers underflow)."""
        nx, K = self.nx, self.K
        if K > LINEAR_K_MAX or nx.rows_where(s.reshape(-1)[:1] > 0) is None:
            # the binomials overflow (K > LINEAR_K_MAX), or an accelerator cannot look for the
            # entries that underflow: the log-space sum only
            out = self._log_ratio_log_space(s)
            if self.t is None:
                return out
            return nx.where(s < self.t[:, None], out, math.log(K) + (K - 1) * nx.log_ndtr(s))
        return self._linear_log_ratio(s, *self._pq(s))

    def _linear_log_ratio(self, s, p, q, below):
        """``log(g/phi)`` at ``s`` (``(r, m)``, or one shared ``(1, m)`` row) from ``p = Phi(s)``
        (``s``'s shape) and ``q (r, m)``: Horner in ``q``,
        ``sum_j c_j p^j q^(K-1-j) = ((c_0 q + c_1 p) q + c_2 p^2) q + ...`` (positive terms), the
        log-space sum where it falls below ``1e-280`` and the law of the maximum where ``s >= t``
        (``below`` false; ``None`` for RASS)."""
        nx, K = self.nx, self.K
        B = self._col(self._pdf_coef, 0) * (q if K > 1 else nx.zeros_like(q) + 1.0)
        pj = p
        for j in range(1, K):              # in place (B has the full shape): no temporary per step
            if j > 1:
                B *= q
            B += self._col(self._pdf_coef, j) * pj
            pj = pj * p if j < K - 1 else pj
        with np.errstate(divide="ignore"):
            out = nx.log(B)
        small = ~(B > 1e-280)
        if below is not None:
            small = small & below                          # above t the law of the maximum is used
        if nx.maybe_any(small):
            idx = nx.rows_where(small.reshape(-1))
            sb = s + nx.zeros_like(out)
            if idx is None:
                out = nx.where(small, self._log_ratio_log_space(sb), out)
            elif idx.shape[0]:
                sub = self.take(idx // out.shape[1])._log_ratio_log_space(sb.reshape(-1)[idx][:, None])[:, 0]
                out = nx.copy(out).reshape(-1)
                out[idx] = sub
                out = out.reshape(B.shape)
        if below is None:
            return out
        return _above_threshold(nx, below, out, lambda x: math.log(K) + (K - 1) * nx.log_ndtr(x), s)

    def cdf_excess(self, s):
        """``G(s) - Phi(s)``: the Bernstein form of the class notes, each basis term
        ``C(K, i) p^i q^(K-i)`` with relative accuracy (:meth:`_bernstein_terms`)."""
        nx, K = self.nx, self.K
        if K > LINEAR_K_MAX:
            return self._cdf_excess_log_terms(s)
        terms, p, below = self._bernstein_terms(s)
        out = nx.zeros_like(s)
        for i in range(1, K):
            out = out + self._col(self._cdf_lin, i - 1) * terms[i]
        if below is None:
            return out
        out = out - p * self._one_minus_PK1[:, None]
        return _above_threshold(nx, below, out, lambda x, p: p * nx.expm1((K - 1) * nx.log_ndtr(x)), s, p)

    def _cdf_excess_log_terms(self, s):
        """:meth:`cdf_excess` for ``K > LINEAR_K_MAX``, where ``C(K, i)`` overflows: every term
        ``(W_i - i/K) C(K, i) p^i q^(K-i)`` is a binomial probability (``<= 1``) formed in log
        space, ``exp(log C(K, i) + i log p + (K - i) log q)``, times its cumulative deviation."""
        nx, K = self.nx, self.K
        log_p, log_q = self._log_pq(s)
        lc = _coefficients(K)[1]
        out = nx.zeros_like(s)
        for i in range(1, K):
            out = out + self._col(self._cdf_dev, i - 1) * nx.exp(lc[i] + i * log_p + (K - i) * log_q)
        if self.t is None:
            return out
        p = nx.ndtr(s)
        out = out - p * self._one_minus_PK1[:, None]
        return nx.where(s < self.t[:, None], out, p * nx.expm1((K - 1) * log_p))

    def _bernstein_terms(self, s):
        """``[p^i q^(K-i) for i = 1..K-1]`` (index ``i``; no binomials), ``p`` and the mask ``s < t``
        (``p`` and the mask ``None`` for RASS).

        Every factor comes from the tail that does not cancel: right of 0 ``p = 1 - Phi(-s)`` is
        close to 1 and its powers are ``exp(i log1p(-Phi(-s)))`` (a relative error
        ``i |log p| eps``, small, where linear powers of the rounded ``p`` carry ``i eps / 2``);
        left of 0 the same for ``q = Phi(-s)``.  The small factor is raised by repeated
        products (relative error ``<= i eps``).  With the exact binomials (:func:`_binomials`)
        ``G - Phi`` keeps ``~1e-14`` relative accuracy at ``K = 64`` (the linear-space sum:
        ``4e-14``; ``tests/exact/test_accuracy_mpmath.py::TestCdfExcess``).  Threshold laws
        (``K <= 8`` in the shipped table, where the linear powers' ``i eps / 2`` is below
        ``4 eps``) keep linear powers of ``p`` and ``q = Phi(t) - Phi(s)``: the tail form costs
        them 50% more time for no measurable gain.
        """
        nx, K = self.nx, self.K
        if self.t is None:
            upper = s > 0
            small = nx.ndtr(nx.where(upper, -s, s))          # min(p, q), from its own tail
            log_big = nx.log1p(-small)                       # log max(p, q), in [log 1/2, 0]
            sp = _powers(small, K - 1)
            bp = [None] + [nx.exp(k * log_big) for k in range(1, K)]
            terms = [nx.where(upper, bp[i] * sp[K - i], sp[i] * bp[K - i]) for i in range(1, K)]
            return [None] + terms, None, None
        p, q, below = self._pq(s)
        pp, qq = _powers(p, K - 1), _powers(q, K - 1)
        return [None] + [pp[i] * qq[K - i] for i in range(1, K)], p, below

    def log_ratio_grid(self, grid):
        """``log(g/phi)`` of every row on one shared ascending grid ``(m,)`` as a matrix product.

        The scaled basis ``K C(K-1, j) p^j q^(K-1-j) / M(s)`` (``M`` its largest entry at ``s``)
        is built once on the grid, so every row costs one ``(K,) x (K, m)`` product.  Threshold
        laws share ``Phi`` and its powers on the grid and form ``q = Phi(t) - Phi(s)`` per row.
        """
        nx, K = self.nx, self.K
        if self.t is not None:
            return self._threshold_log_ratio_grid(grid)
        log_p, log_q = nx.log_ndtr(grid), nx.log_ndtr(-grid)
        coef = _coefficients(K)[0]
        cols = []
        for j in range(K):
            c = coef[j] + nx.zeros_like(grid)
            if j:
                c = c + j * log_p
            if K - 1 - j:
                c = c + (K - 1 - j) * log_q
            cols.append(c)
        lb = nx.stack(cols, 1)                                       # (m, K)
        scale = lb.max(1) if nx.name == "numpy" else lb.max(1).values
        basis = nx.exp(lb - scale[:, None])
        w = self.weights if self.weights.ndim == 2 else self.weights[None, :]
        with np.errstate(divide="ignore"):
            return nx.log(w @ basis.T) + scale[None, :]

    def _threshold_log_ratio_grid(self, grid):
        nx, K = self.nx, self.K
        if K > LINEAR_K_MAX:
            return self.log_ratio(grid[None, :] + nx.zeros_like(self.t)[:, None])
        p, Q = nx.ndtr(grid)[None, :], nx.ndtr(-grid)[None, :]
        right = nx.rows_where(grid > 0)                    # the grid ascends: a suffix
        if right is None:
            q = nx.where(grid[None, :] > 0, Q - self._Qt[:, None], self._Pt[:, None] - p)
        else:
            j0 = int(right[0]) if right.shape[0] else grid.shape[0]
            q = nx.concat([self._Pt[:, None] - p[:, :j0], Q[:, j0:] - self._Qt[:, None]], 1)
        q = nx.maximum(q, 0.0)
        return self._linear_log_ratio(grid[None, :], p, q, grid[None, :] < self.t[:, None])


def _above_threshold(nx, below, out, fn, *args):
    """``out`` where ``below``, ``fn(*args)`` elsewhere (the law of the maximum above ``t``).

    ``args`` broadcast to ``below``'s shape.  On one shared grid row (``(1, m)`` arguments)
    ``fn`` is evaluated once per point; at per-row points (a root finder's step) only where
    ``below`` is false, where indexing is free."""
    shared = all(a.shape[0] == 1 for a in args)
    idx = None if shared else nx.rows_where(~below.reshape(-1))
    if idx is None:
        return nx.where(below, out, fn(*args))
    out = nx.copy(out).reshape(-1)
    if idx.shape[0]:
        zero = nx.zeros_like(out).reshape(below.shape)
        out[idx] = fn(*((a + zero).reshape(-1)[idx] for a in args))
    return out.reshape(below.shape)


def rank_law(weights) -> RankLaw:
    """The RASS selected law for rank weights ``(K,)`` or ``(r, K)``."""
    return RankLaw(weights)


def threshold_law(weights, t) -> RankLaw:
    """The threshold-rank policy's law: top child if ``s >= t``, else a rank ``~ w`` (``P8``)."""
    return RankLaw(weights, t)


class PolicyLaw:
    """The selected law of a user's selection policy at one ``delta`` (NumPy), as a protocol law.

    Parameters
    ----------
    policy
        An object with ``K``, ``selected_logpdf(delta (n,), s (n,))`` and ``selected_cdf``
        (:class:`rass_theory.optimize.policies.SelectionPolicy`).
    delta : float

    Notes
    -----
    ``log_ratio = selected_logpdf - log phi`` and ``cdf_excess = selected_cdf - Phi`` (absolute
    accuracy only: nothing is known of the policy's structure).  The crossing scan uses the
    spacing ``2 * 11.5 / 400 = 0.0575`` of the engine's generic search, finer than
    :func:`grid_spacing`, since such a law may have bumps and jumps anywhere.
    """

    spacing = 2.0 * 11.5 / 400

    def __init__(self, policy, delta: float):
        from rass_theory.backend import NUMPY

        self.nx = NUMPY
        self.policy = policy
        self.delta = float(delta)
        self.K = int(policy.K)

    def take(self, rows) -> "PolicyLaw":
        return self

    def keys(self):
        return None

    def _call(self, name, s):
        s = np.asarray(s, dtype=np.float64)
        flat = s.reshape(-1)
        return np.asarray(getattr(self.policy, name)(np.full(flat.size, self.delta), flat),
                          dtype=np.float64).reshape(s.shape)

    def log_ratio(self, s):
        return self._call("selected_logpdf", s) - log_phi(self.nx, np.asarray(s, dtype=np.float64))

    def cdf_excess(self, s):
        from scipy.special import ndtr

        s = np.asarray(s, dtype=np.float64)
        finite = np.isfinite(s)
        out = np.zeros(s.shape)
        out[finite] = self._call("selected_cdf", s[finite]) - ndtr(s[finite])
        return out



# ---------------------------------------------------------------------------------------------
# the residual sampler


def _h_rows(law, delta, nx):
    """``h(x, j) = log f - log g`` at points ``x`` of rows ``j`` (1-d, for the root finder)."""

    def h(x, j):
        d = delta[j]
        return d * x - 0.5 * d * d - law.take(j).log_ratio(x[:, None])[:, 0]

    return h


#: half-width of the finely gridded core of the crossing scan beyond [0, max delta]
_CORE = 6.5
#: tolerance of a crossing: ``D = F - G`` is stationary there (``D' = f - g = 0``), so an error
#: ``e`` in a crossing moves an interval mass by ``O(e^2 max|(f - g)'|)`` (``1e-18`` here)
_CROSSING_TOL = 1e-9


def _golden_min(nx, fun, a, b, sign, n_iter=36):
    """The minimiser of ``sign * fun`` on ``[a, b]`` (golden-section search, fixed steps).

    36 steps shrink the interval to ``0.618^36 = 3e-8`` of the cell (``<= 6e-9``): the extremum's
    value is then exact to ``~h'' 1e-17``, so a pair of crossings is missed only if its bump of
    ``f - g`` is narrower than ``~1e-8`` (mass ``< 1e-24``)."""
    ratio = 0.5 * (math.sqrt(5.0) - 1.0)
    x1 = b - ratio * (b - a)
    x2 = a + ratio * (b - a)
    f1, f2 = sign * fun(x1), sign * fun(x2)
    for _ in range(n_iter):
        left = f1 < f2                                  # the minimum lies in [a, x2]
        b = nx.where(left, x2, b)
        a = nx.where(left, a, x1)
        x_new = nx.where(left, b - ratio * (b - a), a + ratio * (b - a))
        f_new = sign * fun(x_new)
        x1, f1, x2, f2 = (nx.where(left, x_new, x2), nx.where(left, f_new, f2),
                          nx.where(left, x1, x_new), nx.where(left, f1, f_new))
    return 0.5 * (a + b)


#: grid values evaluated at once by the crossing scan: it runs over blocks of rows of about this
#: many entries (1 MiB of float64), so that its temporaries stay in the processor's cache
_SCAN_ENTRIES = 2 ** 17


def _grid_crossings(law, delta, whi, precise=False):
    """Crossings of ``f`` and ``g`` per row from the scan on one shared grid (module notes).

    Returns ``(points (r, 2C), first_positive (r,))``: ascending, padded with ``+inf``.
    ``precise``: refine every crossing to ``nx.find_root``'s default (``~8 eps (1 + |x|)``),
    not to the sampler's :data:`_CROSSING_TOL` (what the certificate needs: there a crossing's
    error enters first order).
    """
    tol = None if precise else _CROSSING_TOL
    nx, K = law.nx, law.K
    r = delta.shape[0]
    L = half_width(K)
    sp = getattr(law, "spacing", None) or grid_spacing(K)
    hi = nx.host_max(whi)
    if hi is not None:                 # one grid on absolute s shared by every row
        # spacing sp on the core [-CORE, max delta + CORE], 4 sp in the tails, where both laws
        # carry at most (K + 1) Phi(-CORE) and h is dominated by its smooth quadratic part
        core_hi = min(hi, nx.host_max(delta) + _CORE)
        n_left = int(math.ceil((L - _CORE) / (4.0 * sp))) + 1
        n_core = int(math.ceil((core_hi + _CORE) / sp)) + 1
        n_right = int(math.ceil((hi - core_hi) / (4.0 * sp))) + 1
        pieces = [nx.linspace(-L, -_CORE, n_left, delta)[:-1], nx.linspace(-_CORE, core_hi, n_core, delta)]
        if hi > core_hi:
            pieces.append(nx.linspace(core_hi, hi, max(n_right, 2), delta)[1:])
        s2 = nx.concat(pieces, 0)[None, :]
        # blocks of rows (one block for a law whose take() costs as much as all its rows)
        step = r if getattr(law, "unblocked", False) else max(1, _SCAN_ENTRIES // s2.shape[1])
    else:                              # accelerator: a per-row grid of a fixed size (no host read)
        top = math.sqrt(2.0 * math.log(max(K, 2)))
        m = int(math.ceil((2.0 * L + max(top, 4.0)) / sp)) + 1
        frac = nx.linspace(0.0, 1.0, m, delta)
        s2 = -L + (whi + L)[:, None] * frac[None, :]
        step = r
    C = min(K + 2, s2.shape[1] - 1)                        # crossing slots per row
    widths = None
    if hi is not None and not getattr(law, "unblocked", False):
        widths = _scan_widths(nx, law, delta, s2)
    if widths is not None:
        scan = _scan_sorted_blocks(law, delta, whi, s2, C, widths)
    elif step >= r:
        scan = _scan_rows(law, delta, whi, s2, C)
    else:
        parts = []
        for start in range(0, r, step):
            sub = nx.arange(min(r, start + step) - start, delta) + start
            parts.append(_scan_rows(law.take(sub), delta[sub], whi[sub], s2, C))
        scan = [None if x[0] is None else nx.concat(list(x), 0) for x in zip(*parts)]
    cell, a, b, a_prev, h_a, h_b, valid, is_dip, pos_cell, pos0, on, brk_left, brk_right = scan
    brk = law.breaks() if hasattr(law, "breaks") else None
    is_change = valid & ~is_dip
    rows = nx.arange(r, delta)[:, None] + 0 * cell
    flat = (lambda x: x.reshape(-1))
    hfun = _h_rows(law, delta, nx)
    rows_f = flat(rows)
    chg = flat(is_change)
    # one regula-falsi step from the grid values narrows each bracket before the root finder
    # (where both values are finite: g may underflow far in a tail)
    fa, fb = flat(h_a), flat(h_b)
    with np.errstate(invalid="ignore"):
        denom = nx.where(fb == fa, nx.zeros_like(fa) + 1.0, fb - fa)
        x0 = nx.minimum(nx.maximum(flat(a) - fa * (flat(b) - flat(a)) / denom, flat(a)), flat(b))

    def narrow(x0, rows, fa, fb, lo, hi):
        h0 = hfun(x0, rows)
        left = (h0 > 0) == (fa > 0)
        return nx.where(left, x0, lo), nx.where(left, hi, x0), nx.where(left, h0, fa), nx.where(left, fb, h0)

    # h at the bracket ends: the grid values, then the step's
    lo_c, hi_c, f_lo, f_hi = _where_rows(nx, chg & nx.isfinite(fa) & nx.isfinite(fb), narrow,
                                         (x0, rows_f, fa, fb, flat(a), flat(b)), (flat(a), flat(b), fa, fb))
    # the sign changes and the cells holding a jump of g: one root-finder call
    brackets = [(lo_c, hi_c, rows_f, chg, f_lo, f_hi)]
    if brk is not None:
        brackets += _break_brackets(nx, delta, brk, on, brk_left, brk_right, hfun)
    roots = _solve_sets(nx, hfun, brackets, tol)
    x_change = roots[0]
    # hidden pairs: the extremum of h between the dip's neighbours, then a root on each side
    sign = nx.where(flat(pos_cell), 1.0, -1.0)
    dmask = flat(is_dip)

    d_lo, d_hi, d_ok = flat(a_prev), flat(b), None
    if brk is not None:
        d_lo, d_hi, d_ok = _dip_pieces(nx, brackets[1:], on, rows_f, d_lo, flat(a), d_hi, sign)
        dmask = dmask & d_ok

    def dip(lo, hi, sign, rows):
        x_mid = _golden_min(nx, lambda x: hfun(x, rows), lo, hi, sign)
        return x_mid, (hfun(x_mid, rows) > 0) != (sign > 0)

    x_mid, split = _where_rows(nx, dmask, dip, (d_lo, d_hi, sign, rows_f), (flat(a), dmask & False))
    x_left, x_right = _solve_sets(nx, hfun, [(d_lo, x_mid, rows_f, split, None, None),
                                             (x_mid, d_hi, rows_f, split, None, None)], tol)
    inf = nx.zeros_like(x_change) + math.inf
    first = nx.where(flat(is_change), x_change, nx.where(split, x_left, inf))
    second = nx.where(split, x_right, inf)
    parts = [first.reshape(r, C), second.reshape(r, C)]
    if brk is not None:
        (_, _, _, m_l, _, h_b), (t, _, _, m_r, h_t, _) = brackets[1:]
        jump = on & ((h_b > 0) != (h_t > 0))
        parts.append(nx.stack([nx.where(m_l, roots[1], inf[:r]), nx.where(jump, t, inf[:r]),
                               nx.where(m_r, roots[2], inf[:r])], 1))
    pts = nx.sort(nx.concat(parts, 1), 1)
    most = nx.host_max(nx.count_true(nx.isfinite(pts), 1) + 0.0) if r else 0.0
    if most is not None:                                   # drop the all-padding columns
        pts = pts[:, :max(int(most), 1)]
    return pts, pos0


#: margin added to a law's ``log_ratio_max`` in :func:`_scan_widths` (far above the rounding
#: of ``h`` on the grid, ``~1e-13``)
_CUT_MARGIN = 1e-6


def _scan_widths(nx, law, delta, s2):
    """Per row, how many columns of the shared grid ``s2 (1, m)`` the scan needs, or ``None``.

    A law that states ``log_ratio_max >= sup log(g/phi)`` (every selection of one of ``K`` iid
    children has ``g <= K phi``: ``log K``) has ``h = delta s - delta^2/2 - log(g/phi) > 0`` for
    ``s > s_cut = delta/2 + log_ratio_max/delta``: no crossing and no hidden pair lies right of
    ``s_cut``.  A row keeps the grid up to the first point at or above ``s_cut`` and one more
    (every sign change and every dip left of ``s_cut`` is seen with both its neighbours), so it
    finds the same events, on the same grid points, as the whole grid.
    """
    bound = getattr(law, "log_ratio_max", None)
    if bound is None:
        return None
    m = s2.shape[1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):   # tiny delta: inf, no cut
        s_cut = 0.5 * delta + (bound + _CUT_MARGIN) / delta
    s_cut = nx.where(delta > 0, s_cut, nx.zeros_like(delta) + math.inf)
    width = nx.minimum(nx.count_below(s2, s_cut) + 2, m)
    if delta.shape[0] == 0 or int(width.min()) >= m:
        return None                                        # no row gains
    return width


def _scan_sorted_blocks(law, delta, whi, s2, C, widths):
    """:func:`_scan_rows` over blocks of rows sorted by their scan width (:func:`_scan_widths`):
    each block scans the grid's first ``max width`` columns, about :data:`_SCAN_ENTRIES` values
    per block.  Returns the scan's arrays in the rows' original order."""
    nx = law.nx
    r = delta.shape[0]
    order = nx.argsort(widths, 0)
    ws = np.asarray(widths[order])                         # host values (this path runs on the host)
    parts, start = [], 0
    while start < r:
        # the most rows whose block (width of its widest, last row) holds <= _SCAN_ENTRIES values
        counts = np.arange(1, r - start + 1) * ws[start:]
        stop = start + max(1, int(np.searchsorted(counts, _SCAN_ENTRIES, side="right")))
        sub = order[start:stop]
        width = int(ws[stop - 1])
        parts.append(_scan_rows(law.take(sub), delta[sub], whi[sub], s2[:, :width], C))
        start = stop
    inverse = nx.argsort(order, 0)
    return [None if x[0] is None else nx.concat(list(x), 0)[inverse] for x in zip(*parts)]


def _scan_rows(law, delta, whi, s2, C):
    """The grid scan of one block of rows: ``h = log f - log g`` on the grid ``s2`` (``(1, m)``
    shared or ``(r, m)`` per row) and up to ``C`` event cells per row (:func:`_scan_events`).

    Returns per row and slot ``(cell, a, b, a_prev, h_a, h_b, valid, is_dip, positive)`` (the
    cell, its ends, the left end of the cell before, ``h`` at the ends, whether the slot holds an
    event, a dip, and the sign of ``h`` at ``a``), ``positive`` at the grid's first point, and
    for a law with jumps ``(on, left, right)``: whether the row's jump lies in its window and the
    ends of the cell holding it (``None`` without jumps).
    """
    nx = law.nx
    shared = s2.shape[0] == 1
    lr = law.log_ratio_grid(s2[0]) if shared and hasattr(law, "log_ratio_grid") else \
        law.log_ratio(s2 + nx.zeros_like(delta)[:, None])
    d = delta[:, None]
    h = d * s2                                             # d s - d^2/2 - log(g/phi), in place
    h -= 0.5 * d * d
    h -= lr
    top = nx.host_max(h)                                   # NaN if any entry is (None: a device)
    if top is None or top != top:
        h = nx.where(h != h, nx.zeros_like(h) + 1.0, h)   # NaN (both densities 0): positive
    pos = h > 0

    def pick(idx):
        return s2[0][idx] if shared else nx.gather(s2, idx)

    brk = law.breaks() if hasattr(law, "breaks") else None
    split = on = brk_left = brk_right = None
    if brk is not None:                                    # the cell holding a jump is split there
        k_brk = nx.count_below(s2, brk) - 1                # s2 (1, m) broadcasts over the rows
        on = (k_brk >= 0) & (k_brk < s2.shape[1] - 1) & (brk < whi)
        k_brk = nx.clip(k_brk, 0, s2.shape[1] - 2)
        split = (on, k_brk)
        brk_left, brk_right = pick(k_brk[:, None])[:, 0], pick(k_brk[:, None] + 1)[:, 0]
    cell, valid, is_dip = _scan_events(nx, h, pos, s2, whi, split, C)
    return (cell, pick(cell), pick(cell + 1), pick(nx.maximum(cell - 1, 0)), nx.gather(h, cell),
            nx.gather(h, cell + 1), valid, is_dip, nx.gather(pos, cell), pos[:, 0],
            on, brk_left, brk_right)


def _scan_events(nx, h, pos, s2, whi, split, C):
    """The first ``C`` grid cells per row that hold a crossing candidate, and which are dips.

    A cell is an event when its left end lies in the row's window and either ``h`` changes sign
    across it or its left end is a dip: a discrete local minimum of ``|h|`` without a sign
    change, within eight times the depth a parabola through the three values can reach below it
    (the only way the grid can step over a pair of crossings).  ``split = (on, k)``: row ``i``'s
    cell ``k[i]`` holds a jump of ``g`` and is no event where ``on[i]`` (it is searched apart).

    Returns ``(cell, valid, dip)``, each ``(r, C)``: the event cells in column order, whether
    the slot holds an event (padding slots hold cell 0) and whether it is a dip.

    Where indexing is free the dip and window conditions are evaluated only at the sign
    changes and the local minima of ``|h|`` (a few per row), not on the whole grid; on an
    accelerator every cell is evaluated (no host synchronisation).  Both give the same events.
    """
    change = pos[:, 1:] != pos[:, :-1]
    ah = nx.abs(h)
    gl, gm, gr = ah[:, :-2], ah[:, 1:-1], ah[:, 2:]
    local_min = (gm < gl) & (gm <= gr)
    cand = nx.concat([change[:, :1], change[:, 1:] | local_min], 1)
    idx = nx.rows_where(cand.reshape(-1))
    if idx is None:
        inside = s2[:, :-1] < whi[:, None]                 # cells whose left end is in the window
        with np.errstate(invalid="ignore"):
            dip = (pos[:, 1:-1] == pos[:, :-2]) & (pos[:, 1:-1] == pos[:, 2:]) & local_min \
                & (gm <= gl - 2.0 * gm + gr) & inside[:, 1:]
        dip = nx.concat([dip[:, :1] & False, dip], 1)      # dip at point k -> cell k (k >= 1)
        events = (change & inside) | dip
        if split is not None:
            on, k_brk = split
            col = nx.arange(s2.shape[1] - 1, whi)
            events = events & ~(on[:, None] & (col[None, :] == k_brk[:, None]))
        cell = nx.first_true(events, C)
        valid = nx.gather(events, cell)
        return nx.where(valid, cell, 0 * cell), valid, nx.gather(dip, cell) & valid
    m1 = change.shape[1]
    i, k = idx // m1, idx % m1
    left = s2[0][k] if s2.shape[0] == 1 else s2[i, k]
    is_change = change.reshape(-1)[idx]
    km = nx.maximum(k, 1)                                  # k = 0 is a sign change (no dip there)
    a_l, a_m, a_r = ah[i, km - 1], ah[i, km], ah[i, km + 1]
    with np.errstate(invalid="ignore"):
        is_dip = ~is_change & (k >= 1) & (pos[i, km - 1] == pos[i, km]) & (pos[i, km] == pos[i, km + 1]) \
            & (a_m <= a_l - 2.0 * a_m + a_r)
    keep = (left < whi[i]) & (is_change | is_dip)
    if split is not None:
        on, k_brk = split
        keep = keep & ~(on[i] & (k == k_brk[i]))
    return nx.row_slots(i[keep], k[keep], h.shape[0], C, is_dip[keep])


def _break_brackets(nx, delta, brk, on, left, right, hfun):
    """The grid cell ``[left, right]`` that holds a jump of ``g`` at ``brk``: the brackets
    ``(a, b, rows, mask, h(a), h(b))`` of the crossing left of the jump and of the one right of it
    (``mask`` where ``h`` changes sign there); the jump itself is a crossing where ``h`` changes
    sign across it."""
    rows = nx.arange(delta.shape[0], delta)
    t = nx.where(on, brk, left)
    below = nx.maximum(nx.next_below(t), left)
    h_l, h_b, h_t, h_r = (hfun(x, rows) for x in (left, below, t, right))
    return [(left, below, rows, on & ((h_l > 0) != (h_b > 0)), h_l, h_b),
            (t, right, rows, on & ((h_t > 0) != (h_r > 0)), h_t, h_r)]


def _dip_pieces(nx, break_brackets, on, rows, lo, a, hi, sign):
    """The continuous piece of each dip's search interval ``[lo, hi]`` (the dip point ``a`` and
    its grid neighbours) where ``g`` jumps inside it, and whether the dip is searched at all.

    The jump at ``t`` splits ``[lo, hi]``: for ``lo < t <= a`` the piece is ``[t, hi]``, for
    ``a < t < hi`` it is ``[lo, t-]``.  The grid values there straddle the jump, so the dip test
    mixed two functions; a hidden pair on the piece needs ``h`` at the jump's side (``h(t)``,
    respectively ``h(t-)``, from the break brackets) to have the dip's sign, otherwise the one
    crossing there is the break bracket's (searching it again listed ``t`` and that crossing twice).
    """
    (_, below, _, _, _, h_below), (t, _, _, _, h_t, _) = break_brackets
    t_f, below_f, on_f = t[rows], below[rows], on[rows]
    right = on_f & (lo < t_f) & (t_f <= a)
    left = on_f & (a < t_f) & (t_f < hi)
    same = lambda h: (h[rows] > 0) == (sign > 0)             # noqa: E731
    ok = nx.where(right, same(h_t), nx.where(left, same(h_below), right | True))
    return nx.where(right, t_f, lo), nx.where(left, below_f, hi), ok


def _where_rows(nx, mask, fn, args, defaults):
    """``fn(*args)`` (a tuple of arrays) where ``mask`` (1-d), ``defaults`` elsewhere: evaluated on
    the masked elements only where indexing is free, on every element and merged with ``where``
    on an accelerator (no host synchronisation)."""
    idx = nx.rows_where(mask)
    if idx is None:
        return tuple(nx.where(mask, v, d) for v, d in zip(fn(*args), defaults))
    out = tuple(nx.copy(d) for d in defaults)
    if idx.shape[0]:
        for o, v in zip(out, fn(*(x[idx] for x in args))):
            o[idx] = v
    return out


def _solve_sets(nx, fun, brackets, tol):
    """Roots of ``fun(x, rows)`` for several sets of brackets ``(a, b, rows, mask, fun(a), fun(b))``
    (1-d; values ``None`` where unknown) in one root-finder call: per set the roots where
    ``mask``, ``a`` elsewhere.

    Known values save the root finder two evaluations.  The brackets are grid cells (``<= 0.4``
    wide): on torch 4 bisections and 12 Illinois steps (superlinear, from ``< 0.025``) reach the
    tolerance."""
    sizes = [x[0].shape[0] for x in brackets]
    a, b, rows, mask = (nx.concat([x[i] for x in brackets], 0) for i in range(4))
    values = None
    if all(x[4] is not None for x in brackets):
        values = tuple(nx.concat([x[i] for x in brackets], 0) for i in (4, 5))
    opts = dict(bisections=4, steps=12) if tol is None else dict(xrtol=tol, xatol=tol, bisections=4, steps=12)

    def solve(a, b, rows, *values):
        return (nx.find_root(fun, a, b, args=(rows,), values=values or None, **opts),)

    (roots,) = _where_rows(nx, mask, solve, (a, b, rows) + (values or ()), (a,))
    out, start = [], 0
    for n in sizes:
        out.append(roots[start:start + n])
        start += n
    return out


@functools.lru_cache(maxsize=None)
def increasing_delta(K: int) -> float:
    """``delta`` from which ``h = log f - log g`` increases on the whole window, for every rank law.

    ``g/phi`` is a Bernstein sum ``sum_j c_j p^j q^(K-1-j)`` (``c_j >= 0``, ``p = Phi(s)``,
    ``q = Phi(-s)``), and ``d/ds [p^j q^(K-1-j)] <= j (phi/p) p^j q^(K-1-j)``, so
    ``d/ds log(g/phi) <= (K-1) phi(s)/Phi(s)``, which decreases in ``s``.  On ``s >= -L(K)``,
    ``h' = delta - d/ds log(g/phi) > 0`` once ``delta > (K-1) phi(-L)/Phi(-L)``
    (``proofs/P7-selected-law.md``, P7.5).  Returned with a relative margin of ``1e-9``.
    """
    from scipy.special import log_ndtr

    L = half_width(K)
    mills = math.exp(-0.5 * L * L - _LOG_SQRT_2PI - float(log_ndtr(-L)))
    return (K - 1) * mills * (1.0 + 1e-9)


def _far_rows(law, delta):
    """``(far, near)`` row indices: crossings found without the grid (:func:`_monotone_crossings`)
    and by it; ``None`` when no row is far.

    A rank law (RASS, or the threshold policy) on the host, at ``delta >= max(2 L(K),
    increasing_delta(K))``: beyond ``2 L`` the sampler draws from ``f`` itself (:func:`sample`),
    so only the exact acceptance and the optimiser read these crossings; there the grid would
    need ``delta / spacing`` points (``1e12`` of them at ``delta = 1e11``).
    """
    if not isinstance(law, RankLaw):
        return None
    far = delta >= max(2.0 * half_width(law.K), increasing_delta(law.K))
    if not law.nx.maybe_any(far):
        return None
    return law.nx.rows_where(far), law.nx.rows_where(~far)


def _monotone_crossings(law, delta, precise):
    """The crossings of rows whose ``h`` increases on the window (:func:`increasing_delta`).

    ``h(s_cut) > 0`` at ``s_cut = delta/2 + (log K + margin)/delta`` (:func:`_scan_widths`).  A
    RASS law has one root on ``[-L, s_cut]`` if ``h(-L) < 0`` and none in the window otherwise
    (``f > g`` there).  A threshold law's ``h`` increases on each side of its jump at ``t``: a
    root on ``[-L, t)`` and one on ``[t, s_cut]`` where ``h`` changes sign there, and ``t`` itself
    where ``h`` changes sign across the jump (``proofs/P7-selected-law.md``, P7.5).
    ``h = delta (s - delta/2) - log(g/phi)``, a form that does not overflow for ``delta`` up to
    the float range.  Returns ``(points (r, c), first_positive (r,))``, ``c = 1`` or ``3``.
    """
    nx = law.nx
    lo = nx.zeros_like(delta) - half_width(law.K)
    hi = 0.5 * delta + (law.log_ratio_max + _CUT_MARGIN) / delta
    rows = nx.arange(delta.shape[0], delta)
    inf = nx.zeros_like(delta) + math.inf

    def h(x, j):
        with np.errstate(over="ignore", invalid="ignore"):
            return delta[j] * (x - 0.5 * delta[j]) - law.take(j).log_ratio(x[:, None])[:, 0]

    opts = {} if precise else dict(xrtol=_CROSSING_TOL, xatol=_CROSSING_TOL)

    def root(a, b, f_a, f_b, mask):
        """The root on ``[a, b]`` where ``mask`` (``h`` rises through 0 there), ``inf`` elsewhere."""
        x = nx.find_root(h, a, nx.maximum(b, a), args=(rows,), values=(f_a, f_b), **opts)
        return nx.where(mask, x, inf)

    f_lo, f_hi = h(lo, rows), h(hi, rows)
    first_positive = ~(f_lo < 0)
    if law.t is None:
        return root(lo, hi, f_lo, f_hi, ~first_positive)[:, None], first_positive
    t = nx.minimum(nx.maximum(law.t, lo), hi)             # the jump, clipped to [-L, s_cut]
    inside = (law.t > lo) & (law.t < hi)
    below = nx.maximum(nx.next_below(t), lo)
    f_below, f_t = h(below, rows), h(t, rows)
    left = root(lo, below, f_lo, f_below, (law.t > lo) & (f_lo < 0) & (f_below > 0))
    jump = nx.where(inside & ((f_below > 0) != (f_t > 0)), t, inf)
    right = root(t, hi, f_t, f_hi, (f_t < 0) & (law.t < hi))
    # t <= -L: one piece from -L, the law of the maximum; t >= s_cut: one piece below t
    return nx.sort(nx.stack([left, jump, right], 1), 1), first_positive


def _crossings(law, delta, whi, precise):
    """``(points, first_positive)``: the law's closed form, else the grid scan, except for the
    rows :func:`_far_rows` picks, whose crossings are solved directly (:func:`_monotone_crossings`)."""
    if hasattr(law, "crossings"):
        return law.crossings(delta)
    split = _far_rows(law, delta)
    if split is None or split[0] is None:                 # no far row, or an accelerator
        return _grid_crossings(law, delta, whi, precise)
    nx = law.nx
    far, near = split
    far_pts, far_pos = _monotone_crossings(law.take(far), delta[far], precise)
    if near.shape[0] == 0:
        return far_pts, far_pos
    near_pts, near_pos = _grid_crossings(law.take(near), delta[near], whi[near], precise)
    width = max(near_pts.shape[1], far_pts.shape[1])
    pts = nx.full((delta.shape[0], width), math.inf, delta)
    pts[near, :near_pts.shape[1]], pts[far, :far_pts.shape[1]] = near_pts, far_pts
    first_positive = nx.zeros_like(delta) > 1.0
    first_positive[near], first_positive[far] = near_pos, far_pos
    return pts, first_positive


def _intervals(law, delta, whi, precise=False):
    """``(bounds (r, J + 1), positive (r, J), mass (r, J))`` of the residual per row."""
    nx = law.nx
    pts, first_positive = _crossings(law, delta, whi, precise)
    r, c = pts.shape
    inf = nx.full((r, 1), math.inf, delta)
    bounds = nx.concat([-inf, pts, inf], 1)                 # (r, c + 2)
    parity = nx.constant(np.arange(c + 1) % 2 == 1, delta) > 0.5
    positive = first_positive[:, None] != parity[None, :]
    finite = nx.isfinite(bounds)
    idx = nx.rows_where(finite.reshape(-1))
    if idx is None:
        D = shift_difference(nx, bounds, delta[:, None]) - law.cdf_excess(bounds)   # D = F - G
    else:                                                  # D(+-inf) = 0: evaluate the crossings only
        D = nx.zeros_like(bounds)
        flat_rows = idx // (c + 2)
        x = bounds.reshape(-1)[idx]
        D = D.reshape(-1)
        D[idx] = cdf_difference(law.take(flat_rows), x, delta[flat_rows])
        D = D.reshape(r, c + 2)
    mass = nx.where(positive, nx.maximum(D[:, 1:] - D[:, :-1], 0.0), nx.zeros_like(D[:, 1:]))
    return bounds, positive, mass, D


def _sample_block(law, delta, u):
    nx, K = law.nx, law.K
    L = half_width(K)
    wlo = nx.zeros_like(delta) - L
    whi = _window_top(K, delta)
    keys = law.keys()
    col = delta[:, None]
    key = col if keys is None else nx.concat([keys if keys.ndim == 2 else keys[:, None], col], 1)
    # rows with distinct deltas have distinct laws: no grouping to look for (a sort, not a
    # row-wise unique; an accelerator cannot tell and skips grouping anyway)
    sd = nx.sort(delta, 0)
    distinct = delta.shape[0] < 2 or not nx.maybe_any(sd[1:] == sd[:-1])
    groups = None if distinct else nx.unique_rows(key)
    if groups is not None and int(groups[0].shape[0]) < delta.shape[0]:
        first, inverse = groups
        bounds, positive, mass, Dv = _intervals(law.take(first), delta[first], whi[first])
        bounds, mass, Dv = bounds[inverse], mass[inverse], Dv[inverse]
    else:
        bounds, positive, mass, Dv = _intervals(law, delta, whi)
    cum = nx.cumsum(mass, 1)
    total = cum[:, -1]
    target = u * total
    J = mass.shape[1]
    # never a zero-mass interval: between the first and the last interval that has mass
    seen = nx.cumsum(nx.cast(mass > 0, nx.float64), 1)
    first_pos = nx.count_true(seen == 0, 1)
    last_pos = J - nx.count_true(seen == seen[:, -1:], 1)
    k = nx.count_below(cum, target)
    k = nx.maximum(nx.minimum(nx.minimum(k, last_pos), J - 1), nx.minimum(first_pos, J - 1))[:, None]
    rest = target - (nx.gather(cum, k) - nx.gather(mass, k))[:, 0]
    a = nx.gather(bounds, k)[:, 0]
    b = nx.gather(bounds, k + 1)[:, 0]
    Da = nx.gather(Dv, k)[:, 0]
    a = nx.minimum(nx.maximum(a, wlo), whi)
    b = nx.minimum(nx.maximum(b, a), whi)
    def excess(x, j):
        return cdf_difference(law.take(j), x, delta[j]) - Da[j] - rest[j]

    rows = nx.arange(delta.shape[0], delta)
    # a narrow bracket: f - g <= f, so the residual CDF grows slower than F and the root is at
    # least x_f = F^{-1}(F(a) + rest).  The first probe x_g >= x_f spreads the interval's mass
    # evenly over F's, x_g = F^{-1}(F(a) + rest (F(b) - F(a)) / mass): a guess, not a bound
    # (on the last interval, where most rows fall, f - g is a fraction of f that grows towards
    # b, so x_g stays below the root and is the bracket's lower end); above the lower end, the
    # first of a few steps where the excess turns >= 0
    x_f = _f_quantile(nx, delta, a, rest)
    x_f = x_f - 1e-9 * (1.0 + nx.abs(x_f))
    x_f = nx.where(x_f == x_f, nx.minimum(nx.maximum(x_f, a), b), a)
    m_k = nx.gather(mass, k)[:, 0]
    upper_a = a > delta
    F_ab = nx.where(upper_a, nx.ndtr(delta - a) - nx.ndtr(delta - b), nx.ndtr(b - delta) - nx.ndtr(a - delta))
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = nx.where(m_k > 0, rest * (F_ab / m_k), rest)
    x_g = _f_quantile(nx, delta, a, spread)
    x_g = nx.where(x_g == x_g, nx.minimum(nx.maximum(x_g, x_f), b), x_f)
    e_g = excess(x_g, rows)
    steps = (0.125, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    over = e_g > 0                                 # the guess lies above the root: [x_f, x_g]
    open_rows = nx.rows_where(~over)
    values = None
    if open_rows is None:                      # accelerator: every row at every step, merged
        e_f = excess(x_f, rows)
        hi = nx.where(over, x_g, b)
        lo = nx.where(over, nx.where(e_f <= 0, x_f, a), x_g)
        found = over
        for step in steps:
            p = nx.minimum(lo + step, b)
            up = (excess(p, rows) >= 0) & ~found
            hi = nx.where(up, p, hi)
            found = found | up
            lo = nx.where(found, lo, p)
    else:                                      # the steps on the rows still open only
        lo, hi = nx.copy(x_g), nx.copy(b)
        # the excess at the bracket ends, kept for the root finder (two evaluations fewer)
        f_lo, f_hi = nx.copy(e_g), nx.zeros_like(e_g)
        have_lo, have_hi = ~over, nx.copy(over)
        hi[over], f_hi[over] = x_g[over], e_g[over]
        back = nx.rows_where(over)                 # their lower end: x_f (a if x_f is not below)
        if back.shape[0]:
            e_f = excess(x_f[back], back)
            below = e_f <= 0
            lo[back] = nx.where(below, x_f[back], a[back])
            f_lo[back] = e_f
            have_lo[back] = below
        for step in steps:
            if open_rows.shape[0] == 0:
                break
            p = nx.minimum(lo[open_rows] + step, b[open_rows])
            e = excess(p, open_rows)
            up = e >= 0
            hi[open_rows[up]], f_hi[open_rows[up]], have_hi[open_rows[up]] = p[up], e[up], True
            lo[open_rows[~up]], f_lo[open_rows[~up]], have_lo[open_rows[~up]] = p[~up], e[~up], True
            open_rows = open_rows[~up]
        for x, f, have in ((lo, f_lo, have_lo), (hi, f_hi, have_hi)):
            miss = nx.rows_where(~have)
            if miss.shape[0]:
                f[miss] = excess(x[miss], miss)
        values = (f_lo, f_hi)
    out = nx.find_root(excess, lo, hi, args=(rows,), bisections=6, steps=18, values=values)
    # no residual mass (g = f): the residual is never used; the draw is then from f itself
    return nx.where(total > 0, out, delta + nx.ndtri(nx.clip(u, 1e-300, 1.0 - 2.0 ** -53)))


def _f_quantile(nx, delta, a, mass):
    """``F^{-1}(F(a) + mass)`` for ``F = Phi(. - delta)``, from the tail that does not cancel."""
    lower = nx.ndtr(a - delta) + mass
    upper = nx.ndtr(delta - a) - mass
    return delta + nx.where(lower <= 0.5, nx.ndtri(nx.minimum(lower, 0.5)), -nx.ndtri(nx.clip(upper, 0.0, 0.5)))


def residual_intervals(law, delta, *, precise: bool = True):
    """Where ``f = phi(. - delta) > g`` and the mass of ``(f - g)_+`` there, per row.

    The one crossing search of :mod:`rass_theory.exact`: :func:`sample`, :func:`residual_mass`,
    ``exact.batch.residual_intervals``, ``exact.selected.residual_law`` and the optimiser's
    RASS certificate (``exact.segments.RankSegment``) all read their crossings from here.

    Parameters
    ----------
    law : SelectedLaw
        ``g`` per row (or one shared law).
    delta : array (r,)
        Per-row displacement.
    precise : bool
        Refine the crossings to machine precision (``~8 eps (1 + |x|)``, the default: the
        optimiser's certificate and the reported crossings need it) or only to the sampler's
        ``1e-9`` (``False``; an error ``e`` moves a mass by ``O(e^2)`` only).

    Returns
    -------
    bounds : array (r, c + 2)
        ``-inf, x_1, ..., x_k, +inf, +inf, ...``: the crossings of each row, ascending, padded
        with ``+inf``; interval ``j`` is ``[bounds[:, j], bounds[:, j + 1]]``.
    positive : bool array (r, c + 1)
        Whether ``f > g`` on interval ``j`` (false on padding intervals).
    mass : array (r, c + 1)
        ``int (f - g)`` over each positive interval (0 elsewhere); ``mass.sum(1) = TV(f, g)``.

    Notes
    -----
    The crossings come from the law's closed form when it has one, else from the sign scan of
    ``h = log f - log g`` on one grid over the window ``[-L(K), max(delta, sqrt(2 log K)) +
    L(K)]`` (:mod:`rass_theory.exact._window`), refined by ``nx.find_root`` (sign changes) and
    a golden-section split of hidden pairs (:func:`sample`, note 2).  The masses are
    ``D(b) - D(a)``, ``D = F - G = [Phi(x - delta) - Phi(x)] - [G(x) - Phi(x)]`` (relative
    accuracy in both tails; proof ``proofs/P7-selected-law.md``).
    """
    nx = get_backend(delta)
    delta = nx.cast(delta, nx.float64)
    bounds, positive, mass, _ = _intervals(law, delta, _window_top(law.K, delta), precise)
    k = nx.count_true(nx.isfinite(bounds), 1)                      # crossings per row
    col = nx.arange(positive.shape[1], delta)
    return bounds, positive & (col[None, :] <= k[:, None]), mass


def _window_top(K: int, delta):
    """Upper end ``max(delta, sqrt(2 log K)) + L(K)`` of the window, per row."""
    return get_backend(delta).maximum(delta, math.sqrt(2.0 * math.log(max(K, 2)))) + half_width(K)


def residual_mass(law, delta):
    """``TV(f, g) = int (f - g)_+`` per row: the closed-form masses of :func:`residual_intervals`."""
    return residual_intervals(law, delta, precise=False)[2].sum(1)


def sample(law, delta, u):
    """Inverse-CDF draws from the residual ``(f - g)_+ / TV(f, g)``, one per row.

    Parameters
    ----------
    law : SelectedLaw
        ``g`` per row (or one shared law).
    delta : array (n,)
        Per-row displacement, ``> 0`` (callers substitute 1 on degenerate rows).
    u : array (n,)
        Uniforms in ``[0, 1]``.

    Returns
    -------
    array (n,)
        ``s' = R^{-1}(u TV)``, ``R`` the residual's CDF (non-decreasing in ``u``).

    Notes
    -----
    1. Rows sharing one ``(law, delta)`` are grouped (where reading values costs no device
       synchronisation), so crossings are found once per distinct law.
    2. Crossings: a law's closed form when it has one, else a scan of the sign of
       ``h = log f - log g`` on one grid of spacing :func:`grid_spacing` on absolute ``s``,
       shared by every row and covering the truncation window
       ``[-L(K), max(delta, sqrt(2 log K)) + L(K)]`` (:mod:`rass_theory.exact._window`); cells
       beyond a row's window are ignored.  A sign change is refined by ``nx.find_root``; an
       interior local minimum of ``|h|`` without a sign change (a hidden pair of crossings
       inside one cell) is split at the extremum of ``h`` (golden section) and, when the
       extremum changes sign, refined on both sides.
    3. Closed-form masses ``D(b) - D(a)`` per positive interval, ``D = F - G`` with
       ``F(s) = Phi(s - delta)`` (:func:`shift_difference` and ``cdf_excess``).
    4. Pick the interval by ``u TV`` against the cumulative masses and solve
       ``D(x) - D(a) = rest`` inside it (clipped to the window) by ``nx.find_root``.

    Truncation costs at most ``(K + 1) Phi(-L) <= 1e-27`` in total variation (``_window``).
    Rows with ``delta >= 2 L(K)`` draw from ``f`` itself: there ``int min(f, g) <=
    Phi(-delta/2) + K Phi(-delta/2) <= (K + 1) Phi(-L)``, the same bound.
    """
    nx = get_backend(delta)
    delta = nx.cast(delta, nx.float64)
    u = nx.cast(u, nx.float64)
    # far rows (delta >= 2 L(K)): f and g overlap by at most (K + 1) Phi(-L) <= 1e-27, so the
    # residual is f to that accuracy in total variation (g <= K phi); draw from f directly
    far_delta = 2.0 * half_width(law.K)
    from_f = delta + nx.ndtri(nx.clip(u, 1e-300, 1.0 - 2.0 ** -53))
    far = delta >= far_delta
    if nx.maybe_any(far):
        near = nx.rows_where(~far)
        if near is None:
            inner = _sample_rows(nx, law, nx.minimum(delta, far_delta), u)
        else:
            inner = nx.copy(from_f)
            if near.shape[0]:
                inner[near] = _sample_rows(nx, law.take(near), delta[near], u[near])
        return nx.where(far, from_f, inner)
    return _sample_rows(nx, law, delta, u)


def _sample_rows(nx, law, delta, u):
    n = delta.shape[0]
    # an accelerator works on larger blocks (fewer kernel launches; its memory is larger); a law
    # whose take() costs as much as all its rows (exact.batch.RowLaw: callables on every row) says so
    block = RESIDUAL_BLOCK if nx.rows_where(delta[:1] > 0) is not None else 2 * RESIDUAL_BLOCK
    if n <= block or getattr(law, "unblocked", False):
        return _sample_block(law, delta, u)
    parts = []
    for start in range(0, n, block):
        rows = nx.arange(min(n, start + block) - start, delta) + start
        parts.append(_sample_block(law.take(rows), delta[rows], u[rows]))
    return nx.concat(parts, 0)


# ---------------------------------------------------------------------------------------------
# D-GRS: one level recursion for the per-child acceptance and the final residual

#: below this delta the levels are their delta -> 0 limit, ``P_k = delta p_k`` (relative error
#: O(delta), far below rounding); this keeps subnormal deltas away from the recursion
TINY_DELTA = 1e-100
#: the series of :func:`centered_mass` is used when ``2 h max(1, |m|) < SERIES_WIDTH``
SERIES_WIDTH = 0.1
_SERIES_TERMS = 6
#: the final residual's bracket ends this far beyond ``max(c_K, delta)``
_DGRS_SPAN = 12.0


@functools.lru_cache(maxsize=None)
def limit_levels(K: int) -> tuple:
    """``delta -> 0`` limit of the D-GRS levels: ``(t_k, p_k)`` for ``k = 1..K``, Python floats.

    ``t_k = lim c_k`` and ``p_k = lim P_k / delta``: ``p_k = phi(t_k) - t_k Q(t_k)`` with
    ``t_1 = 0`` and ``t_{k+1} = t_k + p_k`` (``proofs/P3-dgrs-closed-form.md``).
    """
    ts, ps = [], []
    t = 0.0
    for _ in range(K):
        p = _INV_SQRT_2PI * math.exp(-0.5 * t * t) - t * 0.5 * math.erfc(t * _SQRT1_2)
        ts.append(t)
        ps.append(p)
        t += p
    return tuple(ts), tuple(ps)


def centered_mass(nx, m, h):
    """``Phi(m + h) - Phi(m - h)`` with relative accuracy, from the midpoint and half-width.

    Notes
    -----
    Where ``2 h max(1, |m|) < 0.1``: the Hermite series
    ``2 phi(m) sum_j He_{2j}(m) h^(2j+1) / (2j+1)!`` with six terms (omitted tail below
    ``1e-20`` relative, ``P3.6``); elsewhere a difference of ``erfc`` upper tails (an interval
    left of 0 mirrored to the right), which does not cancel.  Passing ``(m, h)`` avoids the rounding of
    ``b - a`` for tiny ``h``.
    """
    a, b = m - h, m + h
    # by symmetry an interval left of 0 is the mirrored one right of 0: upper tails then, and
    # erfc(a) - erfc(b) across 0 (one value above 1, one below: no cancellation)
    left = b <= 0.0
    lo, hi = nx.where(left, -b, a), nx.where(left, -a, b)
    closed = 0.5 * (nx.erfc(lo * _SQRT1_2) - nx.erfc(hi * _SQRT1_2))
    series_ok = 2.0 * h * nx.maximum(nx.abs(m), 1.0) < SERIES_WIDTH
    if not nx.maybe_any(series_ok):
        return closed
    idx = nx.rows_where(series_ok.reshape(-1))
    if idx is None:
        return nx.where(series_ok, _hermite_series(nx, nx.where(series_ok, m, nx.zeros_like(m)),
                                                   h + nx.zeros_like(m)), closed)
    out = nx.copy(closed).reshape(-1)
    out[idx] = _hermite_series(nx, m.reshape(-1)[idx], (h + nx.zeros_like(m)).reshape(-1)[idx])
    return out.reshape(closed.shape)


def _hermite_series(nx, m, h):
    """``2 phi(m) sum_{j < 6} He_{2j}(m) h^(2j+1) / (2j+1)!`` (:func:`centered_mass`)."""
    he_even, he_odd = nx.zeros_like(m) + 1.0, m
    coef = h
    total = coef
    h2 = h * h
    for j in range(1, _SERIES_TERMS):
        n = 2 * j
        he_even = m * he_odd - (n - 1) * he_even
        coef = coef * h2 / (n * (n + 1))
        total = total + he_even * coef
        he_odd = m * he_even - n * he_odd
    return 2.0 * _INV_SQRT_2PI * nx.exp(-0.5 * m * m) * total


class DGRSLaw:
    """The D-GRS residual levels of every row, computed once (one recursion, both back ends).

    Parameters
    ----------
    K : int
        Number of children.
    delta : array (r,)
        Per-row displacement, ``>= 0`` (rows below :data:`TINY_DELTA` use the limit forms).

    Attributes
    ----------
    c, P, T : arrays (r, K + 1)
        Crossing ``c_k`` (``c_0 = -inf``), rejection probability ``P_k = Z_1 ... Z_k``
        (``P_0 = 1``) and ``T_k = P_1 + ... + P_{k-1}`` (``T_0 = -1``, so ``S_0 = 1 + T_0 = 0``).

    Notes
    -----
    ``P_k r_k = (f - S_k phi)_+`` on ``[c_k, inf)``, ``c_k = delta/2 + log1p(T_k)/delta``,
    ``P_1 = erf(delta / (2 sqrt 2))`` and ``P_k = [Phi(c_k) - Phi(c_k - delta)] - T_k Q(c_k)``
    (:func:`centered_mass`, relative accuracy as ``delta -> 0``); ``proofs/P3-dgrs-closed-form.md``.
    Child ``k`` is accepted w.p. ``min(1, (expm1(delta (s - delta/2)) - T_{k-1}) / P_{k-1})``
    and the last residual ``r_K`` has survival function
    ``([Phi(s) - Phi(s - delta)] - T_K Q(s)) / P_K`` for ``s >= c_K`` (its one crossing is
    ``c_K``, in closed form), inverted by ``nx.find_root``.
    """

    def __init__(self, K: int, delta, _levels=None):
        self.nx = get_backend(delta)
        nx = self.nx
        self.K = int(K)
        self.delta = nx.cast(delta, nx.float64)
        #: the levels are computed on first use (a batch whose rows all accept the first child,
        #: or a take of the open rows, never computes them for the others)
        self._levels = _levels

    @property
    def c(self):
        return self._computed()[0]

    @property
    def P(self):
        return self._computed()[1]

    @property
    def T(self):
        return self._computed()[2]

    def _computed(self):
        if self._levels is None:
            self._levels = self._recursion()
        return self._levels

    def _recursion(self):
        nx = self.nx
        d0 = self.delta
        tiny = d0 < TINY_DELTA
        d = nx.where(tiny, nx.zeros_like(d0) + 1.0, d0)
        half = 0.5 * d
        P = nx.erf(half * _SQRT1_2)
        c = half
        T = nx.zeros_like(d)
        ts, ps = limit_levels(self.K)
        cs, Ps, Ts = [c], [P], [T]
        for _ in range(1, self.K):
            T = T + P
            m = nx.log1p(T) / d
            c = half + m
            p_new = centered_mass(nx, m, half) - T * 0.5 * nx.erfc(c * _SQRT1_2)
            P = nx.minimum(nx.maximum(p_new, 0.0), P)
            cs.append(c)
            Ps.append(P)
            Ts.append(T)
        acc = 0.0
        for k in range(self.K):
            cs[k] = nx.where(tiny, ts[k] + 0.5 * d0, cs[k])
            Ps[k] = nx.where(tiny, ps[k] * d0, Ps[k])
            Ts[k] = nx.where(tiny, acc * d0, Ts[k])
            acc += ps[k]
        ones = nx.zeros_like(d0) + 1.0
        return (nx.stack([ones * -math.inf] + cs, 1), nx.stack([ones] + Ps, 1), nx.stack([-ones] + Ts, 1))

    def take(self, rows) -> "DGRSLaw":
        """The levels of ``rows`` (computed only when this law's are)."""
        if self._levels is None:
            return DGRSLaw(self.K, self.delta[rows])
        return DGRSLaw(self.K, self.delta[rows], tuple(x[rows] for x in self._levels))

    def accept(self, k: int, s):
        """``min(1, r_{k-1}(s) / phi(s))`` for child ``k`` (1-based, ``k <= K + 1``), per row."""
        nx, d = self.nx, self.delta
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            x = d * (s - 0.5 * d)                       # -inf where it overflows (f/phi = 0)
            if k == 1:
                ratio = nx.exp(nx.minimum(x, 0.0))
            else:
                ratio = (nx.expm1(x) - self.T[:, k - 1]) / self.P[:, k - 1]
                ts, ps = limit_levels(k - 1)
                ratio = nx.where(d < TINY_DELTA, (s - 0.5 * d - ts[-1]) / ps[-1], ratio)
        ratio = nx.where(ratio != ratio, nx.zeros_like(ratio), ratio)   # inf - inf far left
        return nx.clip(ratio, 0.0, 1.0)

    def final_sf(self, s, level: int | None = None):
        """Survival function ``int_s^inf r_k`` of the residual at ``level`` (default ``K``)."""
        k = self.K if level is None else int(level)
        return _dgrs_sf(self.nx, s, self.delta, self.c[:, k], self.P[:, k], self.T[:, k], k)

    def sample(self, u, level: int | None = None):
        """Inverse-CDF draws from ``r_k`` (default ``k = K``): the ``s`` with ``sf(s) = 1 - u``.

        ``u`` in ``[0, 1)``; ``u = 0`` gives ``c_k``.  The bracket is
        ``[c_k, max(c_k, delta) + 12]`` (beyond it ``sf <= Phi(-12)``-sized, below the smallest
        ``1 - u``), solved by ``nx.find_root``.
        """
        nx = self.nx
        k = self.K if level is None else int(level)
        y = 1.0 - nx.cast(u, nx.float64)
        c, P, T, d = self.c[:, k], self.P[:, k], self.T[:, k], self.delta
        # the bracket: the first of c + 1/4, 1/2, 1, 2, 4, 8 and max(c, delta) + 12 where sf <= 1 - u
        # (sf is flat at c, where the density vanishes: a narrow bracket saves iterations)
        ends = [c + w for w in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)] + [nx.maximum(c, d) + _DGRS_SPAN]
        lo, hi = c, ends[-1]
        found = nx.zeros_like(c) > 1.0
        for e in ends[:-1]:
            below = (_dgrs_sf(nx, e, d, c, P, T, k) <= y) & ~found
            hi = nx.where(below, nx.minimum(e, ends[-1]), hi)
            found = found | below
            lo = nx.where(found, lo, nx.minimum(e, ends[-1]))
        rows = nx.arange(d.shape[0], d)

        def excess(x, j):
            return _dgrs_sf(nx, x, d[j], c[j], P[j], T[j], k) - y[j]

        return nx.find_root(excess, lo, hi, args=(rows,), bisections=5, steps=14)


def _dgrs_sf(nx, s, d0, c, P, T, k):
    """``([Phi(x) - Phi(x - delta)] - T_k Q(x)) / P_k`` at ``x = max(s, c_k)`` (limit form below
    :data:`TINY_DELTA`), 1 at ``s <= c_k``."""
    tiny = d0 < TINY_DELTA
    d = nx.where(tiny, nx.zeros_like(d0) + 1.0, d0)
    x = nx.maximum(s, c)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        sf = (centered_mass(nx, x - 0.5 * d, 0.5 * d) - T * 0.5 * nx.erfc(x * _SQRT1_2)) / P
        if nx.maybe_any(tiny):
            ts, ps = limit_levels(max(k, 1))
            xt = x - 0.5 * d0
            sf_tiny = (_INV_SQRT_2PI * nx.exp(-0.5 * xt * xt) - ts[-1] * 0.5 * nx.erfc(xt * _SQRT1_2)) / ps[-1]
            sf = nx.where(tiny, sf_tiny, sf)
    return nx.where(s <= c, nx.zeros_like(s) + 1.0, nx.clip(sf, 0.0, 1.0))
