"""A tree sampler written from the public pieces, and known-wrong variants of it (sampler mutants).

:func:`tree_sampler` is what a user would write: a plain kernel from
:func:`~rass_theory.diffusion.plain_kernel`, a verifier from :mod:`rass_theory.verifiers`, a
lazy walk down a draft tree with a frozen draft velocity and nearest-sibling prefetch.  It is
exact (``proofs/P9-tree-exactness.md`` section 3) and returns what
:func:`~rass_theory.diffusion.check_sampler` reads.  Each entry of :data:`SAMPLER_MUTANTS`
switches on one realistic sampler-level bug (the verifier itself stays exact except in
``frozen_generator``); :func:`check_sampler` must reject each at its defaults (``d = 16``,
2,000 trajectories), and ``bench/sampler_mutants.py`` measures how many trajectories the
final-sample tests need for the same verdict.

>>> from rass_theory import diffusion
>>> from rass_theory.diffusion.sampler_mutants import tree_sampler
>>> tgt = diffusion.GaussianMixture.random(dim=4, n_components=2, seed=0)
>>> kernel = diffusion.plain_kernel(tgt, protocol="paper")
>>> rep = diffusion.check_sampler(tree_sampler("dgrs", K=2, L=2), kernel, n_trajectories=200, rng=0)
>>> rep.passed
True
"""
from __future__ import annotations

import numpy as np

from .._validation import check_positive_int

__all__ = ["tree_sampler", "sampler_mutant", "frozen_generator", "SAMPLER_MUTANTS", "BUGS"]

#: bug name -> what the sampler gets wrong
BUGS = {
    "depth_sigma": "children below the root are drawn with the root's sigma while the verifier is told the sigma "
                   "of their depth",
    "stale_leaf_velocity": "a committed leaf reuses its parent's (stale) velocity as its exact target velocity, "
                           "so the next root's target mean is wrong",
    "best_sibling": "the next root's draft velocity is the sibling's that looks best for the next round's children, "
                    "chosen after they are drawn",
    "frozen_generator": "the verifier draws from a generator that never advances (re-created with one seed at "
                        "every call)",
    "peeking_prefetch": "the prefetched draft mean is moved halfway towards the next round's first child after "
                        "seeing its noise",
}


def frozen_generator(verifier, seed: int = 0):
    """Wrap ``verifier`` so that every call draws from ``numpy.random.default_rng(seed)`` (never advances)."""
    def wrapped(children, mu_draft, mu_target, sigma, rng):
        return verifier(children, mu_draft, mu_target, sigma, np.random.default_rng(seed))

    wrapped.name = f"frozen_generator({getattr(verifier, 'name', 'verifier')})"
    return wrapped


def _nearest(children, y):
    d2 = np.einsum("nkd,nkd->nk", children - y[:, None, :], children - y[:, None, :])
    return np.argmin(d2, axis=1)


def tree_sampler(verifier="rass", K: int = 4, L: int = 3, *, evaluate_leaves: bool = True, bug: str | None = None):
    """A lazy tree sampler ``sampler(kernel, x0, rng) -> (trajectories, draft_means, depths)``.

    Parameters
    ----------
    verifier : str or callable
        A rule name of :func:`rass_theory.verifiers.get_verifier` or a verifier callable.
    K, L : int
        Children per node and tree depth.
    evaluate_leaves : bool
        A committed leaf's velocity is evaluated (in the round's batch on hardware) and becomes
        the next round's exact root velocity.
    bug : str, optional
        One key of :data:`BUGS` (None: the exact sampler).

    Notes
    -----
    Round from ``x`` at step ``k`` with frozen velocity ``u_f``: the node ``y`` at depth ``j`` has
    draft mean ``kernel.affine(k + j, y, u_f)``, target mean ``kernel.mean(k + j, y)`` and
    children ``N(draft mean, kernel.std(k + j)^2 I)``; walk until a correction or a leaf.  The
    next ``u_f``: the velocity of the child nearest to a correction, of a committed leaf
    (``evaluate_leaves``), or of the last verified node.  Exact for every verifier that is
    (``proofs/P9-tree-exactness.md`` section 3); each ``bug`` breaks one predictability
    condition or the target mean.
    """
    from ..verifiers import get_verifier

    K = check_positive_int(K, "K")
    L = check_positive_int(L, "L")
    if bug is not None and bug not in BUGS:
        raise ValueError(f"bug must be None or one of {sorted(BUGS)}, got {bug!r}")
    if bug == "stale_leaf_velocity" and not evaluate_leaves:
        raise ValueError("bug='stale_leaf_velocity' needs evaluate_leaves=True (the leaf's velocity is what it skips)")
    base = get_verifier(verifier, K)
    verify = frozen_generator(base) if bug == "frozen_generator" else base

    def sampler(kernel, x0, rng):
        x = np.array(x0, dtype=np.float64)
        n, d = x.shape
        k0, stop = kernel.first_stochastic, kernel.stop
        S = kernel.n_states
        traj = np.empty((n, S, d))
        traj[:, 0] = x
        dmeans = np.zeros((n, S, d))
        depths = np.full((n, S), -1, dtype=np.int64)
        step = np.full(n, k0)
        u_f = kernel.velocity(k0, x)                   # the initial evaluation: an exact root velocity
        exact = np.ones(n, dtype=bool)
        cand = np.zeros((n, K, d))                     # siblings' velocities after a correction (best_sibling)
        has_cand = np.zeros(n, dtype=bool)
        while True:
            rows = np.flatnonzero(step < stop)
            if rows.size == 0:
                break
            y, kk = x[rows].copy(), step[rows]
            depth = np.minimum(L, stop - kk)
            v_node = u_f[rows].copy()
            if (~exact[rows]).any():
                need = np.flatnonzero(~exact[rows])
                v_node[need] = kernel.velocity(kk[need], y[need])
            u_d = u_f[rows].copy()
            committed = np.zeros(rows.size, dtype=np.int64)
            w = np.arange(rows.size)
            j = 0
            while w.size:
                k = kk[w] + j
                sig = kernel.std(k)
                mu_t = kernel.affine(k, y[w], v_node[w])
                mu_d = kernel.affine(k, y[w], u_d[w])
                z = rng.standard_normal((w.size, K, d))
                if j == 0 and bug == "best_sibling":
                    sel = np.flatnonzero(has_cand[rows[w]])
                    if sel.size:                           # pick, after drawing z, the sibling whose child 0 fits best
                        c_mu = kernel.affine(k[sel, None], y[w[sel], None, :], cand[rows[w[sel]]])   # (m, K, d)
                        fit = np.linalg.norm(c_mu + sig[sel, None, None] * z[sel, :1] - mu_t[sel, None], axis=2)
                        mu_d[sel] = c_mu[np.arange(sel.size), np.argmin(fit, axis=1)]
                sig_draw = kernel.std(kk[w]) if (bug == "depth_sigma" and j > 0) else sig
                children = mu_d[:, None, :] + sig_draw[:, None, None] * z
                told = mu_d
                if j == 0 and bug == "peeking_prefetch":
                    told = mu_d + 0.5 * (children[:, 0] - mu_d)
                res = verify(children, told, mu_t, sig, rng)
                states, acc = np.asarray(res.states), np.asarray(res.accepted)
                traj[rows[w], k + 1 - k0] = states
                dmeans[rows[w], k + 1 - k0] = told
                depths[rows[w], k + 1 - k0] = j
                y[w] = states
                committed[w] += 1
                cont = acc & (j + 1 < depth[w])
                ends = np.flatnonzero(~cont)
                if ends.size:
                    g = rows[w[ends]]                       # trajectories whose round ends here
                    leaf = acc[ends]
                    u_new = v_node[w[ends]].copy()          # default: the last verified node's velocity
                    ex_new = np.zeros(ends.size, dtype=bool)
                    if evaluate_leaves and leaf.any():
                        li = np.flatnonzero(leaf)
                        if bug == "stale_leaf_velocity":
                            ex_new[li] = True               # WRONG: the parent's velocity, called exact
                        else:
                            u_new[li] = kernel.velocity(k[ends[li]] + 1, states[ends[li]])
                            ex_new[li] = True
                    corr = np.flatnonzero(~leaf)
                    has_cand[g] = False
                    if corr.size:
                        ch = children[ends[corr]]
                        near = _nearest(ch, states[ends[corr]])
                        kc = k[ends[corr]] + 1
                        if bug == "best_sibling":
                            v_all = kernel.velocity(np.repeat(kc, K), ch.reshape(-1, d)).reshape(-1, K, d)
                            cand[g[corr]] = v_all
                            has_cand[g[corr]] = True
                            u_new[corr] = v_all[np.arange(corr.size), near]
                        else:
                            u_new[corr] = kernel.velocity(kc, ch[np.arange(corr.size), near])
                    u_f[g] = u_new
                    exact[g] = ex_new
                w = w[cont]
                if w.size:
                    v_node[w] = kernel.velocity(kk[w] + j + 1, y[w])
                j += 1
            x[rows] = y
            step[rows] += committed
        return traj, dmeans, depths

    sampler.name = f"tree_sampler({verifier}, K={K}, L={L}" + (f", bug={bug})" if bug else ")")
    return sampler


def sampler_mutant(name: str, verifier="rass", K: int = 4, L: int = 3):
    """The :func:`tree_sampler` with bug ``name`` (a key of :data:`BUGS`)."""
    if name not in BUGS:
        raise ValueError(f"name must be one of {sorted(BUGS)}, got {name!r}")
    return tree_sampler(verifier, K, L, evaluate_leaves=True, bug=name)


#: name -> factory of the mutant sampler (defaults: RASS, K = 4, L = 3)
SAMPLER_MUTANTS = {name: (lambda name=name: sampler_mutant(name)) for name in BUGS}
