"""Independent high-precision reference values (mpmath, 40 significant digits).

Nothing here reuses the project's closed forms: every quantity is computed from its definition.

- RMC: ``2 Phi(-delta / 2)``.
- D-GRS: the residuals ``r_k = (r_{k-1} - phi)_+ / Z_k`` are evaluated by literally running the
  recursion at each point; crossings of ``r_{k-1} - phi`` are located on a grid and refined with
  ``mp.findroot``; each ``Z_k`` is an ``mp.quad`` of the positive part, split at the crossings.
  The grid scan also checks (rather than assumes) that the positive part is one half-line.
- RASS: ``TV(f, g_w) = int (f - g_w)_+`` by ``mp.quad`` between all sign changes of ``f - g_w``,
  with ``g_w`` built from the order-statistic densities (binomial sums).
- Bound: every stationary point of ``J(t) = Phi(t - delta) + 1 - Phi(t)^K`` (sign changes of its
  derivative on a grid, refined by ``mp.findroot``) plus the limits ``J(+-inf) = 1``.

Each function returns mpf values; the "rejection" forms (``1 - acceptance``) are returned too,
because at small ``delta`` they carry the relative accuracy the tests check.
"""
from __future__ import annotations

import mpmath as mp

DPS = 40

__all__ = ["DPS", "rmc", "dgrs", "rass_tv", "bound"]


def _refine(func, a, b):
    """Root of ``func`` in the bracket ``[a, b]`` (signs differ).

    Bisection shrinks the bracket to ``1e-30 (1 + |a|)`` (robust even when ``func`` is tiny, which
    defeats ``findroot``'s residual test), then ``mp.findroot`` (secant) polishes the root to
    working precision; the polished root is kept only if it stays inside the bracket.
    """
    fa, fb = func(a), func(b)
    if fa == 0:
        return a
    if fb == 0:
        return b
    while b - a > mp.mpf(10) ** -30 * (1 + abs(a)):
        m = (a + b) / 2
        fm = func(m)
        if fm == 0:
            return m
        if (fm > 0) == (fa > 0):
            a, fa = m, fm
        else:
            b = m
    try:
        root = mp.findroot(func, (a, b), solver="secant", verify=False)
        if a <= root <= b:
            return root
    except (ValueError, ZeroDivisionError):
        pass
    return (a + b) / 2


def _sign_changes(func, grid):
    """Brackets ``(a, b)`` of consecutive grid points where ``func`` changes sign."""
    out = []
    prev_x, prev_v = grid[0], func(grid[0])
    for x in grid[1:]:
        v = func(x)
        if (v > 0) != (prev_v > 0) and not (v == 0 and prev_v == 0):
            out.append((prev_x, x))
        prev_x, prev_v = x, v
    return out


def _phi(s):
    """Standard normal density (``exp`` directly: several times faster than ``mp.npdf``)."""
    return mp.exp(-s * s / 2) / mp.sqrt(2 * mp.pi)


def _Phi(s):
    """Standard normal CDF via ``erfc`` (relatively accurate in the lower tail)."""
    return mp.erfc(-s / mp.sqrt(2)) / 2


def _linspace(a, b, n):
    a, b = mp.mpf(a), mp.mpf(b)
    return [a + (b - a) * i / (n - 1) for i in range(n)]


def rmc(delta):
    """RMC acceptance ``2 Phi(-delta/2)`` and rejection ``1 - 2 Phi(-delta/2) = erf(delta/(2 sqrt 2))``."""
    with mp.workdps(DPS):
        d = mp.mpf(delta)
        return 2 * mp.ncdf(-d / 2), mp.erf(d / (2 * mp.sqrt(2)))


def dgrs(K, delta, scan_width=20, scan_points=81):
    """D-GRS by running the residual recursion numerically.

    Returns ``(acceptance, rejection, Z, crossings)`` with ``Z`` and ``crossings`` lists of mpf.
    """
    with mp.workdps(DPS):
        d = mp.mpf(delta)
        Z, inv_Z, crossings = [], [], []

        def residual(k, s):
            """``r_k(s)`` by applying ``r_j = (r_{j-1} - phi)_+ / Z_j`` k times to ``f``."""
            val = _phi(s - d)
            ph = _phi(s)
            for j in range(k):
                val = val - ph
                if val <= 0:
                    return mp.mpf(0)
                val = val * inv_Z[j]
            return val

        lo = mp.mpf(-40)
        for k in range(1, K + 1):
            def excess(s, k=k):
                return residual(k - 1, s) - _phi(s)

            if crossings:
                grid = _linspace(crossings[-1], crossings[-1] + scan_width + d, scan_points)
            else:
                grid = _linspace(lo, -lo + d, 2 * scan_points)
            brackets = _sign_changes(excess, grid)
            if len(brackets) != 1 or excess(grid[-1]) <= 0:
                raise AssertionError(f"D-GRS level {k}: expected one crossing, found {brackets}")
            c = _refine(excess, *brackets[0])
            crossings.append(c)
            z = mp.quad(excess, [c, c + 1, c + 4, c + 12, mp.inf], method="gauss-legendre")
            Z.append(z)
            inv_Z.append(1 / z)
        rejection = mp.fprod(Z)
        return 1 - rejection, rejection, Z, crossings


def _selected_density(weights):
    """``g_w(s) = phi(s) sum_j w_j K C(K-1, j) Phi^j (1 - Phi)^(K-1-j)`` with ``w`` normalised.

    The weights are converted exactly (``mpf(float)``) and divided by their sum, as the project
    does, so that e.g. ``[1/3] * 3`` is exactly uniform.
    """
    K = len(weights)
    w = [mp.mpf(float(x)) for x in weights]
    total = mp.fsum(w)
    coeffs = [w[j] / total * mp.binomial(K - 1, j) * K for j in range(K)]

    def g(s):
        F = _Phi(s)
        G = _Phi(-s)
        G_pow = [mp.mpf(1)]
        for _ in range(K - 1):
            G_pow.append(G_pow[-1] * G)
        acc = mp.mpf(0)
        F_pow = mp.mpf(1)
        for j in range(K):  # sum_j coeff_j F^j G^(K-1-j), term by term
            if coeffs[j] != 0:
                acc += coeffs[j] * F_pow * G_pow[K - 1 - j]
            F_pow *= F
        return _phi(s) * acc

    return g


def _scan_grid(lo, hi, dense=(-8, 8), dense_step="0.005", coarse_step="0.1"):
    """Grid on ``[lo, hi]``: step 0.005 on ``dense`` (where the order statistics live and the
    crossings of optimal weights can be 0.02 apart), 0.1 elsewhere."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    d0, d1 = max(lo, mp.mpf(dense[0])), min(hi, mp.mpf(dense[1]))
    pieces = []
    for a, b, step in ((lo, d0, coarse_step), (d0, d1, dense_step), (d1, hi, coarse_step)):
        if b > a:
            n = int(mp.ceil((b - a) / mp.mpf(step))) + 1
            pieces.append(_linspace(a, b, max(n, 2)))
    grid = []
    for piece in pieces:
        grid.extend(piece if not grid else piece[1:])
    return grid


def rass_tv(weights, delta, scan=(-40, 40)):
    """``TV(f, g_w) = int (f - g_w)_+`` for rank weights ``w`` (ascending ranks).

    Sign changes of ``f - g_w`` are located on :func:`_scan_grid` (resolution 0.005 on
    ``[-8, 8]``) and refined; each positive stretch is integrated with ``mp.quad``.
    Returns ``(acceptance, tv)``.
    """
    with mp.workdps(DPS):
        d = mp.mpf(delta)
        g = _selected_density(weights)

        def diff(s):
            return _phi(s - d) - g(s)

        grid = _scan_grid(scan[0], scan[1] + d)
        roots = [_refine(diff, a, b) for a, b in _sign_changes(diff, grid)]
        edges = [-mp.inf] + roots + [mp.inf]
        tv = mp.mpf(0)
        for a, b in zip(edges[:-1], edges[1:]):
            if a == -mp.inf:
                probe = b - 1
            elif b == mp.inf:
                probe = a + 1
            else:
                probe = (a + b) / 2
            if diff(probe) <= 0:
                continue
            if a == -mp.inf:
                pts = [-mp.inf, b - 12, b - 4, b - 1, b]
            elif b == mp.inf:
                pts = [a, a + 1, a + 4, a + 12, mp.inf]
            else:
                pts = [a, b]
            tv += mp.quad(diff, pts, method="gauss-legendre")
        return 1 - tv, tv


def bound(K, delta, scan_points=801):
    """List-coupling bound ``alpha* = inf_t [Phi(t - delta) + 1 - Phi(t)^K]``.

    Returns ``(alpha, rho, t_star)``: ``alpha = Phi(t - delta) + (1 - Phi(t)^K)`` and
    ``rho = 1 - alpha = Q(t - delta) + expm1(K log Phi(t))`` at the minimiser, each computed in
    its own form so that it keeps relative accuracy when it is tiny.
    """
    with mp.workdps(DPS):
        d = mp.mpf(delta)
        K = int(K)

        def deriv(t):
            return _phi(t - d) - K * _phi(t) * _Phi(t) ** (K - 1)

        def log_Phi(t):
            # log1p of the upper tail: at t = 25, Phi(t) = 1 - 3e-138 is 1 to 40 digits
            return mp.log1p(-_Phi(-t)) if t > 0 else mp.log(_Phi(t))

        def rho(t):  # 1 - J(t)
            return _Phi(-(t - d)) + mp.expm1(K * log_Phi(t))

        def J(t):  # two positive terms
            return _Phi(t - d) - mp.expm1(K * log_Phi(t))

        grid = _linspace(-40, 40, scan_points)
        if d > 0:  # stationary points can sit far right when delta is small: add a geometric tail
            far = 2 * (d / 2 + mp.log(K) / d) + 2
            x = mp.mpf(40)
            while x < far:
                x *= mp.mpf("1.05")
                grid.append(x)
        candidates = [(mp.mpf(1), mp.mpf(0), None)]  # J(+-inf) = 1, i.e. rho = 0
        for a, b in _sign_changes(deriv, grid):
            t = _refine(deriv, a, b)
            candidates.append((J(t), rho(t), t))
        return min(candidates, key=lambda x: (x[0], -x[1]))


# ---------------------------------------------------------------------------------------------
# comparison against the project's closed forms (the only place this module touches them)
# ---------------------------------------------------------------------------------------------

GRID_K = (1, 2, 3, 4, 5, 8, 16, 32, 64)
GRID_DELTA = (1e-8, 1e-4, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: relative errors of a rejection probability are compared only above this (float64 normal range)
REL_FLOOR = 1e-300


def fixed_random_weights(K, seed=0):
    """A reproducible random weight vector on the simplex (Dirichlet(1), seed derived from K)."""
    import numpy as np

    return np.random.default_rng([seed, K]).dirichlet(np.ones(K))


def weight_vectors(K):
    """``name -> weights`` for the RASS checks: uniform, top rank, one fixed random vector."""
    import numpy as np

    top = np.zeros(K)
    top[-1] = 1.0
    return {"uniform": np.full(K, 1.0 / K), "top": top, "random": fixed_random_weights(K)}


def _errors(acc, rej, ref_acc, ref_rej):
    abs_err = abs(mp.mpf(acc) - ref_acc)
    if ref_rej > REL_FLOOR:
        rel_err = abs(mp.mpf(rej) - ref_rej) / ref_rej
    else:  # the reference underflows float64: the closed form must report (almost) zero
        rel_err = mp.mpf(0) if rej <= 1e-290 else mp.mpf(1)
    return float(abs_err), float(rel_err)


def compare(rule, K, delta, weights=None):
    """``(abs error of acceptance, rel error of rejection)`` of the closed form vs the reference.

    ``rule`` in ``{"rmc", "dgrs", "bound", "rass"}`` (``"rass"`` needs ``weights``).
    """
    import rass_theory as rt
    from rass_theory.exact import bound as bound_module
    from rass_theory import rejection_probability

    if rule == "rmc":
        ref = rmc(delta)
        return _errors(rt.acceptance("rmc", 1, delta), rejection_probability("rmc", 1, delta), *ref)
    if rule == "dgrs":
        ref_acc, ref_rej, _, _ = dgrs(K, delta)
        return _errors(rt.acceptance("dgrs", K, delta), rejection_probability("dgrs", K, delta), ref_acc, ref_rej)
    if rule == "bound":
        ref_acc, ref_rej, _ = bound(K, delta)
        res = bound_module.list_coupling_bound(K, delta)
        return _errors(res.acceptance, res.rejection_probability, ref_acc, ref_rej)
    if rule == "rass":
        ref_acc, ref_tv = rass_tv(weights, delta)
        return _errors(rt.acceptance("rass", K, delta, weights=weights),
                       rejection_probability("rass", K, delta, weights=weights), ref_acc, ref_tv)
    raise ValueError(f"unknown rule {rule!r}")


def top_rank_acceptance(K, delta, dps=400):
    """``int min(f, K phi Phi^(K-1))`` (RASS at the top-rank vertex) for large ``delta``: one crossing
    ``c`` near ``delta/2`` (``f < g`` left of it in the window), so ``Phi(c - delta) + 1 - Phi(c)^K``;
    ``dps`` digits because ``1 - Phi(c)^K`` cancels to ``~K Phi(-c)``."""
    with mp.workdps(dps):
        f = lambda s: mp.npdf(s - delta)                             # noqa: E731
        g = lambda s: K * mp.npdf(s) * mp.ncdf(s) ** (K - 1)         # noqa: E731
        c = mp.findroot(lambda s: mp.log(f(s)) - mp.log(g(s)), delta / 2)
        return mp.ncdf(c - delta) + (1 - mp.ncdf(c) ** K)
