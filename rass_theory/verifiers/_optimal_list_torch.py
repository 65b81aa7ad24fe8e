"""Torch twin of the optimal list verifier (acceptance = the list-coupling bound).

Same rule as :mod:`rass_theory.verifiers.optimal_list` (``proofs/P10-optimal-list-rule.md``):
children with ``s >= t_a`` keep their score as key, a child below ``t_a`` gets with probability
``q(s)`` a fake key drawn from ``nu ~ phi q`` on ``(-inf, t_a)``, the largest key is selected,
accepted w.p. ``min(1, f/g*)`` and otherwise corrected by an inverse-CDF draw from
``(f - g*)_+`` on ``[t*, inf)``.

Device work: projection, selection, acceptance, the residual draw (fixed-iteration bisection)
and the rebuild run on the inputs' device, all scalar decisions in float64 whatever the input
dtype.  Two things synchronise with the host, unlike the RASS twin: the per-row constants
(``t_a``, ``t_lo``, ``t*``; root finding) are solved and certified on the host by
:func:`rass_theory.verifiers.optimal_list.rule_params` from the batch's deltas (one copy of
``n`` floats; every check of ``proofs/P10-optimal-list-rule.md`` P10.6, a ``ValueError`` naming
``K``, ``delta`` and the check if one fails), and the fake keys are drawn by rejection sampling,
whose loop checks on the host whether every key is done (one check per round, plus one for
whether any proposal needs the far-tail Newton inverse).  The residual's ``log D`` and its
bisection are elementwise with a fixed number of iterations (no host synchronisation).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .._validation import check_delta, check_K  # noqa: F401
from ._tensors import finish, prepare

__all__ = ["run_torch"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_F64 = torch.float64


def _log_ndtr(x):
    return torch.special.log_ndtr(x)


def _ndtri_exp_far(lp: torch.Tensor) -> torch.Tensor:
    """Newton on ``log Phi(x) = lp`` from ``-sqrt(-2 lp - log(-2 lp) - log 2 pi)`` (for ``lp < log 1e-300``).

    8 steps; quadratic convergence in the far tail.
    """
    y = -2.0 * lp.clamp(max=-690.0)
    x = -torch.sqrt(y - torch.log(y) - 2 * _LOG_SQRT_2PI)
    for _ in range(8):
        lpx = _log_ndtr(x)
        x = x - (lpx - lp) * torch.exp(lpx + 0.5 * x * x + _LOG_SQRT_2PI)
    return x


def _ndtri_exp(lp: torch.Tensor, *, sparse: bool = False) -> torch.Tensor:
    """``Phi^{-1}(exp(lp))`` for ``lp <= 0``: ``ndtri`` where ``exp(lp) > 1e-300``, else Newton.

    ``sparse=False``: Newton on every entry, selected by ``torch.where`` (no host sync).
    ``sparse=True``: Newton only on the far-tail entries (one host check of whether any exist);
    for callers that synchronise anyway (the fake-key loop).
    """
    direct = torch.special.ndtri(torch.exp(lp).clamp(min=1e-300))
    far = lp < math.log(1e-300)
    if not sparse:
        return torch.where(far, _ndtri_exp_far(lp), direct)
    if bool(far.any()):
        direct = direct.clone()
        direct[far] = _ndtri_exp_far(lp[far])
    return direct


class _Params:
    """Per-row rule constants on the device (float64 tensors; shape (n,) or (1,) when shared)."""

    def __init__(self, host, device):
        def t(name):
            return torch.as_tensor(np.asarray(getattr(host, name), dtype=np.float64), device=device)

        self.K, self.delta, self.t_keep, self.t_star = t("K"), t("delta"), t("t_keep"), t("t_star")
        self.log_c, self.log_M, self.log_rejection = t("log_c"), t("log_M"), t("log_rejection")

    def take(self, rows):
        out = object.__new__(_Params)
        for k, v in vars(self).items():
            setattr(out, k, v if v.shape[0] == 1 else v[rows])
        return out

    def column(self):
        out = object.__new__(_Params)
        for k, v in vars(self).items():
            setattr(out, k, v[:, None])
        return out


def _fake_probability(p, s):
    """``q(s) = (m - a)/(M - a)`` below ``t_a`` (``0`` above); see ``optimize.list_rule.fake_probability``."""
    K, delta, lc = p.K, p.delta, p.log_c
    big_M = torch.exp(p.log_M)
    m = torch.exp(delta * s - (0.5 * delta * delta + torch.log(K) + (K - 1) * lc))
    lcdf = _log_ndtr(s)
    a = torch.exp((K - 1) * (lcdf - lc))            # one exp: no underflow x overflow product
    den = big_M - a
    q = (m - a) / den
    limit = 1.0 - delta * torch.exp(lcdf + 0.5 * s * s + _LOG_SQRT_2PI) / torch.clamp(K - 1, min=1.0)
    q = torch.where(den.abs() < 1e-7 * big_M, limit, q)
    q = torch.where(delta == 0, torch.ones_like(q), q)
    q = torch.nan_to_num(q, nan=0.0).clamp(0.0, 1.0)
    return torch.where(s < p.t_keep, q, torch.zeros_like(q))


def _proposal(p):
    """Fake-key envelope constants per row (``optimize.list_rule._proposal``): ``b``, ``log_m0``,
    ``log Phi(b)``, ``log Phi(b - delta)``, ``log(c - Phi(b))``, ``P(low part)``."""
    K, delta, lc, lM = p.K, p.delta, p.log_c, p.log_M
    pos = delta > 0
    log_m0 = math.log(2.0) - torch.log(K) - (K - 1) * lc - lM
    b = torch.where(pos, (0.5 * delta * delta - log_m0) / torch.where(pos, delta, torch.ones_like(delta)),
                    torch.full_like(delta, -math.inf))
    b = torch.minimum(b, p.t_keep)
    lpb, lpbd = _log_ndtr(b), _log_ndtr(b - delta)
    log_w_low = torch.where(pos, log_m0 + lpbd, torch.full_like(delta, -math.inf))
    log_w_mid = lc + torch.log(-torch.expm1(lpb - lc))
    p_low = torch.nan_to_num(torch.sigmoid(log_w_low - log_w_mid), nan=0.0)
    return b, log_m0, lpb, lpbd, log_w_mid, p_low


def _fake_keys(p, gen, size: int, device, rounds: int = 4, max_loops: int = 100_000):
    """``size`` draws from ``nu ~ phi q`` on ``(-inf, t_a)`` by rejection (``rounds`` proposals per loop).

    Same envelope as :func:`rass_theory.optimize.list_rule.draw_fake_scores`: a mixture of
    ``phi(. - delta)`` below ``b`` and ``phi`` on ``[b, t_a)``, accepted w.p. ``q / env``.
    """
    out = torch.empty(size, dtype=_F64, device=device)
    pending = torch.arange(size, device=device)
    shared = p.delta.shape[0] == 1
    consts = _proposal(p)
    for _ in range(max_loops):
        m = pending.numel()
        if m == 0:
            return out
        if shared:
            pp, (b, m0, lpb, lpbd, lwm, p_low) = p, consts
        else:
            pp = p.take(pending)
            b, m0, lpb, lpbd, lwm, p_low = (v[pending][:, None] for v in consts)
        col = pp.column() if not shared else pp
        u = 1.0 - torch.rand((3, m, rounds), generator=gen, dtype=_F64, device=device)   # (0, 1]
        lu = torch.log(u[0])
        low = (1.0 - u[2]) < p_low
        # low part: delta + Phi^{-1}(U Phi(b - delta)); mid part: Phi^{-1}(Phi(b) + U (c - Phi(b)))
        lp = torch.where(low, lpbd + lu, torch.logaddexp(lpb, lu + lwm))
        x = _ndtri_exp(lp, sparse=True) + torch.where(low, col.delta, torch.zeros_like(lp))
        env = torch.where(x < b, torch.exp(m0 + col.delta * x - 0.5 * col.delta * col.delta), torch.ones_like(x))
        q = _fake_probability(col, x)
        ok = ((1.0 - u[1]) * env < q) & (x < col.t_keep)           # P = q / env
        first = torch.argmax(ok.to(torch.int8), dim=1)
        got = ok.any(dim=1)
        out[pending[got]] = x[got, first[got]]
        pending = pending[~got]
    raise RuntimeError(f"fake-key rejection sampler did not finish in {max_loops} loops")


def _psi(x):
    """``log(-log Phi(x))`` without underflow (``optimize.list_rule._psi``).

    Right of 0: ``-log Phi = Q r``, ``r = -log1p(-Q)/Q`` (``1`` once ``Q < 1e-300``), so
    ``psi = log Q + log r`` with ``log Q = log_ndtr(-x)``.
    """
    lq = _log_ndtr(-x.abs())
    left = torch.log(-_log_ndtr(torch.clamp(x, max=0.0)))
    return torch.where(x > 0, lq + _log_r(x), left)


def _log_r(x):
    """``log(-log1p(-Q(x)) / Q(x))`` (``0`` once ``Q < 1e-300``; ``optimize.list_rule._log_r``)."""
    q = torch.special.ndtr(-x.abs())
    tiny = q < 1e-300
    one = torch.ones_like(q)
    return torch.where(tiny, torch.zeros_like(q), torch.log(-torch.log1p(-q) / torch.where(tiny, one, q)))


def _S_tail(x, K, delta):
    """``psi(x - delta) - log K - psi(x)`` for ``x - delta > 0`` via ``erfcx`` (``optimize.list_rule._S_tail``)."""
    a, b = torch.clamp(x - delta, min=0.0), torch.clamp(x, min=0.0)
    r2 = math.sqrt(0.5)
    return (delta * x - 0.5 * delta * delta - torch.log(K)
            + torch.log(torch.special.erfcx(a * r2) / torch.special.erfcx(b * r2)) + _log_r(a) - _log_r(b))


def _log_E(x, K, delta):
    """``log(Phi(x)^K - Phi(x - delta))``, the form chosen by the size of ``Phi(x)^K``.

    Same arithmetic as ``optimize.list_rule._log_E_parts``: for ``Phi(x)^K < 1/2`` the difference
    of ``exp(K log Phi(x))`` and ``Phi(x - delta)``; otherwise ``Q(x - delta) - (1 - Phi(x)^K)``
    with ``log(1 - Phi^K) = log(-y) + log(expm1(y)/y)``, ``y = K log Phi(x) = -exp(log K + psi(x))``,
    and right of ``delta`` the log ratio of the two terms taken analytically (``_S_tail``).
    ``torch.special.log_ndtr`` is ``log1p(-erfc(x/sqrt 2)/2)`` right of ``-1``, so relatively
    accurate where ``Phi`` is near 1.  Elementwise, no host synchronisation.
    """
    L1a = K * _log_ndtr(x)
    small = L1a < -math.log(2.0)
    direct = _log_ndtr(x - delta) - L1a
    LQ = _log_ndtr(delta - x)
    y_log = torch.log(K) + _psi(x)
    y = -torch.exp(y_log)
    tiny = y.abs() < 1e-300
    one = torch.ones_like(y)
    l_ratio = torch.log(torch.where(tiny, one, torch.expm1(y) / torch.where(tiny, -one, y)))
    comp = torch.where(x - delta > 0, -_S_tail(x, K, delta) + _log_r(x - delta) + l_ratio, y_log + l_ratio - LQ)
    L1 = torch.where(small, L1a, LQ)
    return L1 + torch.log(-torch.expm1(torch.where(small, direct, comp)))


def _residual(p, u):
    """Inverse-CDF draws from ``(f - g*)_+ / (1 - alpha*)``: bisection on ``log E(x) = log(1-u) + log E(t*)``."""
    target = torch.log1p(-u.clamp(max=1.0 - 2.0 ** -53)) + p.log_rejection
    lo = p.t_star.expand_as(u).clone()
    hi = torch.maximum(p.delta - _ndtri_exp(target), lo)
    for _ in range(64 + 12):                         # bracket width <= 2^12 -> below one ulp
        mid = 0.5 * (lo + hi)
        v = torch.nan_to_num(_log_E(mid, p.K, p.delta) - target, nan=-1e3)
        up = v > 0                                   # log E decreasing: root lies above mid
        lo = torch.where(up, mid, lo)
        hi = torch.where(up, hi, mid)
    return 0.5 * (lo + hi)


def run_torch(children, mu_draft, mu_target, sigma, rng=None):
    """The optimal list rule on tensors (see :class:`rass_theory.verifiers.OptimalListVerifier`)."""
    from ..optimize.list_rule import rule_params

    batch = prepare(children, mu_draft, mu_target, sigma, rng)
    n, K, device, gen = batch.n, batch.K, batch.device, batch.generator
    u = torch.rand((n, 2 + K), generator=gen, dtype=_F64, device=device)
    delta = torch.where(batch.degenerate, torch.zeros_like(batch.delta), batch.delta).to(_F64)
    host = rule_params(K, delta.detach().cpu().numpy()) if n else None
    s = batch.s.to(_F64)
    chosen = torch.zeros(n, dtype=torch.int64, device=device)
    if n == 0:
        return finish(batch, chosen, torch.ones(0, dtype=torch.bool, device=device), s[:, 0])
    p = _Params(host, device)
    col = p if p.delta.shape[0] == 1 else p.column()
    fake = u[:, 2:] < _fake_probability(col, s)
    keys = s.clone()
    idx = torch.nonzero(fake)
    if idx.numel():
        keys[idx[:, 0], idx[:, 1]] = _fake_keys(p.take(idx[:, 0]), gen, idx.shape[0], device)
    child = torch.argmax(keys, dim=1)
    child = torch.where(batch.degenerate, chosen, child)                  # degenerate: child 0
    s_sel = s.gather(1, child[:, None])[:, 0]
    above = s_sel >= p.t_keep
    log_ratio = torch.where(above, p.delta * s_sel - 0.5 * p.delta ** 2 - torch.log(p.K)
                            - (p.K - 1) * _log_ndtr(s_sel), torch.zeros_like(s_sel))
    accepted = (torch.log(u[:, 0]) < log_ratio) | batch.degenerate
    if device.type == "cpu":
        rows = torch.nonzero(~accepted)[:, 0]
        new_s = s_sel.clone()
        if rows.numel():
            new_s[rows] = _residual(p.take(rows), u[rows, 1])
    else:
        new_s = torch.where(accepted, s_sel, _residual(p, u[:, 1]))
    return finish(batch, child, accepted, new_s)

