"""The law of the selected child's ``s`` under RASS, and the residual law of the correction.

``selected_law(weights, delta)`` is the rank mixture ``g_w = sum_j w_j B_j`` of order-statistic
densities of ``K`` iid ``N(0, 1)`` draws (ascending ranks); ``residual_law(weights, delta)`` is
``(f - g_w)_+ / TV(g_w, f)`` with ``f = phi(. - delta)``, the law RASS draws from after a
rejection.  Both are frozen objects vectorised in ``s``.  Proofs: ``proofs/P7-selected-law.md``
(formulas, sampler) and ``proofs/P2-rass-exactness.md`` (why this makes RASS exact).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import betaincinv, ndtr, ndtri

from rass_theory._validation import as_generator, check_delta, check_positive_int, check_weights
from rass_theory.backend import NUMPY
from rass_theory.exact.batch import sample_residual_rejection
from rass_theory.exact.laws import cdf_difference, rank_law, residual_intervals, sample
from rass_theory.exact.normal import log_phi, quantile_from_tails
from rass_theory.exact.order_stats import (
    mixture_cdf_excess,
    mixture_density_excess,
    mixture_log_cdf,
    mixture_log_density_ratio,
    mixture_log_sf,
)

__all__ = ["selected_law", "residual_law", "SelectedLaw", "ResidualLaw"]


def _as_points(s, name="s"):
    arr = np.asarray(s, dtype=np.float64)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not contain NaN")
    return arr


def _as_probabilities(q, name="q"):
    arr = np.asarray(q, dtype=np.float64)
    if np.any(np.isnan(arr)) or np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{name} must lie in [0, 1]")
    return arr


def _size(size) -> tuple:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        return (check_positive_int(size, "size", minimum=0),)
    return tuple(check_positive_int(x, "size", minimum=0) for x in size)


@dataclass(frozen=True, eq=False)
class SelectedLaw:
    """Law of the selected child's ``s``: ``g_w(s) = sum_j w_j B_j(s)`` (proof P7).

    Attributes
    ----------
    weights : ndarray, shape (K,)
        Rank weights as given (clipped at 0), ascending ranks (``j = K - 1`` is the child
        furthest toward the target); they are used as ``weights / weights.sum()`` exactly.
    delta : float
        Displacement of the node; ``g_w`` does not depend on it, but :attr:`tv`,
        :attr:`acceptance` and :meth:`residual` do.
    K : int

    Notes
    -----
    ``B_j(s) = K!/(j!(K-1-j)!) phi(s) Phi(s)^j (1 - Phi(s))^(K-1-j)``;
    ``G_w(s) = sum_{k=0}^K C_k binom(K, k) Phi(s)^k (1 - Phi(s))^(K-k)`` with
    ``C_k = sum_{j<k} w_j``; ``1 - G_w`` uses the tail sums ``sum_{j>=k} w_j`` so both tails
    keep relative accuracy.
    """

    weights: np.ndarray
    delta: float
    K: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "K", int(self.weights.shape[0]))

    def logpdf(self, s):
        """``log g_w(s)``."""
        s = _as_points(s)
        x = np.clip(s, -1e10, 1e10)
        return log_phi(x) + mixture_log_density_ratio(self.weights, x)

    def pdf(self, s):
        """``g_w(s)``."""
        return np.exp(self.logpdf(s))

    def logcdf(self, s):
        """``log G_w(s)`` (relative accuracy in the lower tail)."""
        return mixture_log_cdf(self.weights, _as_points(s))

    def logsf(self, s):
        """``log(1 - G_w(s))`` (relative accuracy in the upper tail)."""
        return mixture_log_sf(self.weights, _as_points(s))

    def cdf(self, s):
        """``G_w(s)``."""
        return np.exp(self.logcdf(s))

    def sf(self, s):
        """``1 - G_w(s)`` without cancellation."""
        return np.exp(self.logsf(s))

    def density_excess(self, s):
        """``g_w(s)/phi(s) - 1`` with relative accuracy for nearly uniform weights."""
        return mixture_density_excess(self.weights, _as_points(s))

    def cdf_excess(self, s):
        """``G_w(s) - Phi(s)`` with relative accuracy for nearly uniform weights."""
        return mixture_cdf_excess(self.weights, _as_points(s))

    def ppf(self, q):
        """Quantile function ``G_w^{-1}(q)``; ``-inf``/``inf`` at ``q = 0``/``1``.

        Notes
        -----
        The mixture quantile lies between the smallest and largest component quantiles
        ``Phi^{-1}(I^{-1}(j+1, K-j; q))``; it is found by the engine's root finder on ``log G_w`` (``q <= 1/2``)
        or ``log(1 - G_w)`` (``q > 1/2``) to a relative bracket width of ``4 eps``.
        """
        q = _as_probabilities(q)
        shape = q.shape
        qf = q.ravel()
        out = np.empty(qf.shape)
        out[qf == 0] = -np.inf
        out[qf == 1] = np.inf
        inner = (qf > 0) & (qf < 1)
        if np.any(inner):
            qi = qf[inner]
            j = np.arange(self.K, dtype=np.float64)
            lower = np.where(qi[:, None] <= 0.5, betaincinv(j + 1, self.K - j, qi[:, None]), np.nan)
            # upper half: 1 - F_j(x) = I_{1-p}(K - j, j + 1) = 1 - q gives 1 - p directly
            upper = np.where(qi[:, None] > 0.5, betaincinv(self.K - j, j + 1, 1.0 - qi[:, None]), np.nan)
            p_low = np.where(qi[:, None] <= 0.5, lower, 1.0 - upper)
            p_up = np.where(qi[:, None] <= 0.5, 1.0 - lower, upper)
            with np.errstate(invalid="ignore"):
                comp = quantile_from_tails(p_low, p_up)
            comp = np.where(np.isfinite(comp), comp, np.nan)
            with np.errstate(invalid="ignore"):
                cmin, cmax = np.nanmin(comp, axis=1, initial=np.inf), np.nanmax(comp, axis=1, initial=-np.inf)
            # fall back to a wide bracket where the incomplete-beta inverse under/overflows
            a = np.where(np.isfinite(cmin), cmin - 1e-9 * (1 + np.abs(cmin)), -1e3)
            b = np.where(np.isfinite(cmax), cmax + 1e-9 * (1 + np.abs(cmax)), 1e3)
            use_sf = qi > 0.5
            with np.errstate(divide="ignore"):
                target = np.where(use_sf, np.log1p(-qi), np.log(qi))
            tgt = np.where(use_sf, -target, target)

            def excess(x, sf_side, t):  # increasing in x: log G_w(x) or -log(1 - G_w(x)), minus the target
                return np.where(sf_side, -self.logsf(x), self.logcdf(x)) - t

            out[inner] = NUMPY.find_root(excess, a, b, args=(use_sf, tgt))
        return out.reshape(shape)

    def rvs(self, size=None, rng=None):
        """Exact draws: rank ``j ~ w``, then the ``(j+1)``-th order statistic of ``K`` normals.

        Notes
        -----
        ``U_(j) ~ Beta(j + 1, K - j)`` drawn as ``X/(X + Y)`` with ``X ~ Gamma(j + 1)``,
        ``Y ~ Gamma(K - j)``; ``1 - U_(j) = Y/(X + Y)`` is formed directly, so
        ``s = Phi^{-1}(U)`` keeps its digits in the upper tail.
        """
        gen = as_generator(rng)
        shape = _size(size)
        n = int(np.prod(shape)) if shape else 1
        j = gen.choice(self.K, size=n, p=self.weights / self.weights.sum())
        x = gen.standard_gamma(j + 1.0)
        y = gen.standard_gamma(self.K - j + 0.0)
        total = x + y
        s = quantile_from_tails(x / total, y / total)
        return s.reshape(shape) if shape else float(s[0])

    @property
    def tv(self) -> float:
        """``TV(g_w, f)``, the RASS rejection probability at this node."""
        return self.residual().mass

    @property
    def acceptance(self) -> float:
        """RASS acceptance ``1 - TV(g_w, f)``."""
        return 1.0 - self.tv

    def residual(self) -> "ResidualLaw":
        """The residual law ``(f - g_w)_+ / TV``."""
        return residual_law(self.weights, self.delta)


@dataclass(frozen=True, eq=False)
class ResidualLaw:
    """Residual law ``r = (f - g_w)_+ / TV(g_w, f)`` of the RASS correction (proof P7).

    Attributes
    ----------
    weights, delta, K
        As in :class:`SelectedLaw`.
    mass : float
        ``TV(g_w, f) = int (f - g_w)_+``.
    crossings : ndarray
        Sorted points where ``f = g_w``.
    intervals : ndarray, shape (r, 2)
        The intervals where ``f > g_w`` (possibly with infinite ends).
    interval_masses : ndarray, shape (r,)

    Notes
    -----
    On ``[a, b]`` with ``f > g_w``: ``int_a^b (f - g_w) = [D(b) - D(a)] - [E(b) - E(a)]`` with
    ``D(x) = Phi(x - delta) - Phi(x)`` and ``E = G_w - Phi`` (both ``O(delta)`` for nearly
    uniform weights, computed with relative accuracy).  When ``mass == 0`` (``g_w = f``) the
    residual is never used by RASS; by convention it is then ``f`` itself.
    """

    weights: np.ndarray
    delta: float
    mass: float
    crossings: np.ndarray
    intervals: np.ndarray
    interval_masses: np.ndarray
    _law: object = field(repr=False)
    K: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "K", int(self.weights.shape[0]))

    def _diff_density(self, s):
        """``(f - g_w)(s) = phi(s) [expm1(delta s - delta^2/2) - (g_w/phi - 1)]``."""
        x = np.clip(s, -1e10, 1e10)
        d = self.delta
        with np.errstate(over="ignore", invalid="ignore"):
            val = np.exp(log_phi(x)) * (np.expm1(d * x - 0.5 * d * d) - mixture_density_excess(self.weights, x))
        return np.where(np.isfinite(val), val, 0.0)

    def pdf(self, s):
        """``(f - g_w)_+(s) / TV``."""
        s = _as_points(s)
        if self.mass == 0:
            return np.exp(log_phi(s - self.delta))
        return np.maximum(self._diff_density(s), 0.0) / self.mass

    def cdf(self, s):
        """``int_{-inf}^s (f - g_w)_+ / TV`` from the closed-form interval masses ``D(b) - D(a)``."""
        s = _as_points(s)
        if self.mass == 0:
            return ndtr(s - self.delta)
        a = self.intervals[:, 0]
        part = self._D(np.clip(s[..., None], a, self.intervals[:, 1])) - self._D(a)
        part = np.clip(part, 0.0, self.interval_masses)
        return np.clip(part.sum(axis=-1) / self.mass, 0.0, 1.0)

    def _D(self, x):
        """``D = F - G`` at ``x`` (any shape; 0 at ``+-inf``): :func:`rass_theory.exact.laws.cdf_difference`."""
        out = np.zeros(x.shape)
        fin = np.isfinite(x)
        out[fin] = cdf_difference(self._law, x[fin], np.full(int(fin.sum()), self.delta))
        return out

    def ppf(self, q):
        """Inverse CDF: the engine's draw (:func:`rass_theory.exact.laws.sample`) at ``u = q``;
        ``+inf`` at ``q = 1`` (the support's upper end; the engine's window stops at ``L(K)``)."""
        q = _as_probabilities(q)
        if self.mass == 0:                                  # g = f: the residual is f itself
            return self.delta + ndtri(q)
        qf = q.ravel()
        out = np.full(qf.size, np.inf)
        inner = qf < 1.0
        if inner.any():
            out[inner] = sample(self._law, np.full(int(inner.sum()), self.delta), qf[inner])
        return out.reshape(q.shape)

    def rvs(self, size=None, rng=None, method: str = "inverse"):
        """Exact draws from the residual law.

        Parameters
        ----------
        size : int or tuple, optional
        rng : numpy Generator, int, SeedSequence or None
        method : {"inverse", "rejection"}
            ``"inverse"``: :meth:`ppf` of uniforms.  ``"rejection"``: propose ``s ~ f`` and
            accept with probability ``(1 - g_w/f)_+`` (expected ``1/TV`` proposals per draw).
        """
        gen = as_generator(rng)
        shape = _size(size)
        n = int(np.prod(shape)) if shape else 1
        if method == "inverse":
            s = self.ppf(gen.random(n))
        elif method == "rejection":
            if self.mass == 0:
                s = self.delta + gen.standard_normal(n)
            else:
                s = sample_residual_rejection(self.weights, np.full(n, self.delta), gen)
        else:
            raise ValueError(f"method must be 'inverse' or 'rejection', got {method!r}")
        return s.reshape(shape) if shape else float(s[0])


def selected_law(weights, delta) -> SelectedLaw:
    """Law of the RASS-selected child's ``s`` for rank weights ``weights`` at displacement ``delta``.

    Parameters
    ----------
    weights : array_like, shape (K,)
        Rank weights on the simplex (tolerance ``1e-9``), ascending ranks.
    delta : float
        Standardised displacement ``>= 0``.

    Returns
    -------
    SelectedLaw
        Frozen; ``.pdf .logpdf .cdf .sf .ppf .rvs`` vectorised in ``s``.

    Notes
    -----
    ``g_w(s) = phi(s) sum_j w_j K!/(j!(K-1-j)!) Phi(s)^j (1-Phi(s))^(K-1-j)``; see
    ``proofs/P7-selected-law.md``.

    Examples
    --------
    >>> law = selected_law([0.25, 0.25, 0.25, 0.25], 1.0)
    >>> round(float(law.pdf(0.0)), 6)  # uniform weights give phi
    0.398942
    """
    w, d = check_weights(weights, renormalise=False), check_delta(delta)
    return SelectedLaw(w, d)


def residual_law(weights, delta, *, spacing: float | None = None) -> ResidualLaw:
    """Residual law ``(f - g_w)_+ / TV(g_w, f)`` of the RASS correction.

    Parameters
    ----------
    weights : array_like, shape (K,)
    delta : float
    spacing : float, optional
        Crossing-search grid spacing; default :func:`rass_theory.exact.laws.grid_spacing`.

    Returns
    -------
    ResidualLaw

    Notes
    -----
    Crossings of ``f`` and ``g_w`` are bracketed on a grid over ``[-L, L] U [delta - L, delta + L]``
    (``L = L(K)`` of :mod:`rass_theory.exact._window`) and refined
    to machine precision; masses are closed-form CDF differences (proof P7, and the accuracy
    statement in :mod:`rass_theory.exact.batch`).
    """
    w, d = check_weights(weights, renormalise=False), check_delta(delta)
    law = rank_law(w)
    if spacing is not None:
        law.spacing = float(spacing)
    bounds, positive, masses = residual_intervals(law, np.array([d]))
    r = int(np.count_nonzero(np.isfinite(bounds[0])))
    crossings = bounds[0, 1:r + 1].copy()
    pos = positive[0, : r + 1]
    intervals = np.stack([bounds[0, : r + 1][pos], bounds[0, 1: r + 2][pos]], axis=1)
    return ResidualLaw(w, d, float(masses[0].sum()), crossings, intervals, masses[0, : r + 1][pos], law)
