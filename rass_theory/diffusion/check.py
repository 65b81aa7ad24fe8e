"""Step-by-step check of a whole sampler: standardised residuals of every committed transition.

Under an exact speculative sampler every committed state is an exact draw of the plain kernel
given the past (``proofs/P9-tree-exactness.md`` section 3), so

    r_t = (x_{t+1} - m_t(x_t)) / sigma_t,      t = 0 .. S - 2,

is iid ``N(0, I_d)`` and independent of everything before step ``t``, whatever tree, prefetch
or verifier produced the state.  :func:`check_trajectories` tests that from the recorded
trajectories alone (the target model is called at the committed states);
:func:`check_sampler` runs a user's sampler and checks it.  Proof of the tests' nulls:
``proofs/P9-tree-exactness.md`` section 7.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from .._validation import as_generator, check_positive_int, check_probability
from ..stats.tests import holm
from ..stats.two_sample import marginal_ks_test
from .kernel import PlainKernel, is_tensor
from .residual_tests import (
    cross_correlation_test,
    detectable_correlation,
    detectable_cross_correlation,
    detectable_ks,
    ks_normal_test,
    ks_uniform_test,
    lag_correlation_test,
)

__all__ = ["TrajectoryTest", "TrajectoryCheckResult", "check_trajectories", "check_sampler", "FAMILIES"]

#: test families and the discrepancy each one's ``detectable`` is stated in
FAMILIES = {
    "norm": "KS distance of the PIT of ||r||^2 under chi-square(d) from U(0, 1)",
    "projection": "KS distance of <r, e> from N(0, 1) along a predictable unit direction e",
    "lag": "correlation of a projection (or of the standardised ||r||^2) with itself 1 or 2 steps later",
    "cross": "correlation of residual coordinates of two trajectories at the same step",
    "final": "two-sample KS distance, in one coordinate, of the final states from plain sampling",
}
_MIN_TRAJECTORIES = 20
_N_RANDOM_DIRECTIONS = 3


@dataclass(frozen=True)
class TrajectoryTest:
    """One test of a trajectory check.

    Attributes
    ----------
    name : str
        E.g. ``"norm[step 5]"``, ``"projection[draft, depth 1]"``, ``"lag1[velocity]"``.
    family : str
        A key of :data:`FAMILIES`.
    statistic, pvalue : float
        The raw statistic and its p-value before the Holm correction.
    n : int
        Values (or pairs) the statistic was computed from.
    detectable : float
        Discrepancy (in the family's unit, :data:`FAMILIES`) detected with 80% power at the
        Bonferroni level ``alpha / m`` (``m`` tests; Holm rejects at least as often).
    pvalue_adjusted : float
        Holm-adjusted p-value within the check's one family of tests.
    """

    __test__ = False

    name: str
    family: str
    statistic: float
    pvalue: float
    n: int
    detectable: float
    pvalue_adjusted: float = float("nan")


@dataclass(frozen=True)
class TrajectoryCheckResult:
    """Outcome of :func:`check_trajectories` (scipy-style, frozen).

    Attributes
    ----------
    passed : bool
        No test rejected by Holm's step-down procedure at ``alpha``.
    tests : tuple of TrajectoryTest
    alpha : float
    detectable : dict
        Family -> the largest ``detectable`` over its tests (the weakest test's guarantee).
    n_trajectories, n_states, dim : int
    target_calls, target_evaluations : int
        Batched target calls and evaluated rows of the check itself (residual means and the
        plain reference); never part of a sampler's speedup.
    wall_time_s : float
    """

    passed: bool
    tests: tuple
    alpha: float
    detectable: dict
    n_trajectories: int
    n_states: int
    dim: int
    target_calls: int
    target_evaluations: int
    wall_time_s: float
    extra: dict = field(default_factory=dict)

    @property
    def failed(self) -> tuple:
        """The tests Holm rejected."""
        return tuple(t for t in self.tests if t.pvalue_adjusted <= self.alpha)

    @property
    def worst(self) -> TrajectoryTest:
        """The test with the smallest p-value."""
        return min(self.tests, key=lambda t: (np.inf if np.isnan(t.pvalue) else t.pvalue))

    @property
    def pvalue(self) -> float:
        """Smallest Holm-adjusted p-value (the family's p-value)."""
        return float(np.nanmin([t.pvalue_adjusted for t in self.tests]))

    def summary(self, top: int = 5) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        lines = [f"check_trajectories: {verdict} at alpha={self.alpha:g} ({len(self.tests)} tests, Holm), "
                 f"n={self.n_trajectories}, {self.n_states} states, d={self.dim}; "
                 f"{self.target_calls} target calls of its own"]
        for t in sorted(self.tests, key=lambda t: (np.inf if np.isnan(t.pvalue) else t.pvalue))[:top]:
            lines.append(f"  {t.name:<32} statistic={t.statistic:.4g}  p={t.pvalue:.3g}  "
                         f"(Holm {t.pvalue_adjusted:.3g}, n={t.n})")
        lines.append("  detectable (80% power): " + ", ".join(f"{k} {v:.3g}" for k, v in self.detectable.items()))
        return "\n".join(lines)

    def __str__(self):
        return self.summary()


# ---------------------------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------------------------

def _host(x) -> np.ndarray:
    if is_tensor(x):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _first_bad(arr, name: str, k0: int, skip_first: bool = False):
    bad = ~np.isfinite(arr)
    if skip_first:
        bad[:, 0] = False
    if bad.any():
        row, t = (int(v) for v in np.argwhere(bad.reshape(bad.shape[0], bad.shape[1], -1).any(axis=2))[0])
        what = "NaN" if np.isnan(arr[row, t]).any() else "an infinite value"
        raise ValueError(f"{name} must be finite: {what} in row {row} at step {k0 + t} "
                         f"({name}[{row}, {t}])")


def _check_iv(trajectories, kernel, draft_means, depths, alpha):
    if not isinstance(kernel, PlainKernel):
        raise TypeError(f"kernel must be a PlainKernel from diffusion.plain_kernel(...), got {type(kernel).__name__}")
    if not is_tensor(trajectories):
        trajectories = np.asarray(trajectories)
        if trajectories.dtype.kind not in "fiu":
            raise TypeError(f"trajectories must hold real numbers, got dtype {trajectories.dtype}")
    shape = tuple(trajectories.shape)
    S = kernel.n_states
    if len(shape) != 3:
        raise ValueError(f"trajectories must have shape (n, {S}, {kernel.dim}) = (n, kernel.stop - "
                         f"kernel.first_stochastic + 1, dim), got shape {shape}")
    n = shape[0]
    if shape[1] != S:
        raise ValueError(f"trajectories must hold {S} states per trajectory (kernel.stop - kernel.first_stochastic "
                         f"+ 1 = {kernel.stop} - {kernel.first_stochastic} + 1), got shape {shape}")
    if shape[2] != kernel.dim:
        raise ValueError(f"kernel does not match the trajectories: kernel.dim = {kernel.dim} but trajectories "
                         f"have dimension {shape[2]} (shape {shape})")
    if n < _MIN_TRAJECTORIES:
        raise ValueError(f"trajectories must hold at least {_MIN_TRAJECTORIES} trajectories, got {n}")
    X = _host(trajectories)
    _first_bad(X, "trajectories", kernel.first_stochastic)
    dm = None
    if draft_means is not None:
        dm = _host(draft_means)
        if dm.shape != shape:
            raise ValueError(f"draft_means must have the shape of trajectories {shape}, got {dm.shape}")
        _first_bad(dm, "draft_means", kernel.first_stochastic, skip_first=True)
    dep = None
    if depths is not None:
        dep = depths.detach().cpu().numpy() if is_tensor(depths) else np.asarray(depths)
        if dep.shape != shape[:2]:
            raise ValueError(f"depths must have shape {shape[:2]} (n, states), got {dep.shape}")
        if dep.dtype.kind not in "iu":
            if dep.dtype.kind == "f" and np.all(np.isfinite(dep)) and np.all(dep == np.round(dep)):
                dep = dep.astype(np.int64)
            else:
                raise ValueError(f"depths must hold integers, got dtype {dep.dtype}")
        if np.any(dep[:, 1:] < 0):
            row, t = (int(v) for v in np.argwhere(dep[:, 1:] < 0)[0])
            raise ValueError(f"depths must be >= 0 for every committed state: depths[{row}, {t + 1}] = "
                             f"{dep[row, t + 1]} (step {kernel.first_stochastic + t + 1})")
        dep = dep.astype(np.int64)
    alpha = check_probability(alpha, "alpha")
    return trajectories, X, dm, dep, alpha


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------

def _projection(r, v, floor):
    """``<r, v> / ||v||`` over the last axis; NaN (excluded) where ``||v|| <= floor``."""
    norm = np.linalg.norm(v, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.einsum("ntd,ntd->nt", r, v) / norm
    p[norm <= floor] = np.nan
    return p


def _plain_reference(kernel, like, n, rng):
    """Final states (step ``kernel.stop``) of ``n`` plain chains, in the array type of ``like``."""
    seed = int(rng.integers(0, 2 ** 63 - 1))
    if is_tensor(like):
        import torch

        gen = torch.Generator(device=like.device)
        gen.manual_seed(seed)
        x = torch.randn((n, kernel.dim), generator=gen, dtype=like.dtype, device=like.device)
        for k in range(kernel.first_stochastic, kernel.stop):
            x = kernel.mean(k, x) + kernel.std(k) * torch.randn(x.shape, generator=gen, dtype=x.dtype,
                                                                device=x.device)
        return _host(x)
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, kernel.dim))
    for k in range(kernel.first_stochastic, kernel.stop):
        x = kernel.mean(k, x) + kernel.std(k) * g.standard_normal(x.shape)
    return x


def check_trajectories(trajectories, kernel, draft_means=None, depths=None, alpha: float = 1e-3,
                       rng=None) -> TrajectoryCheckResult:
    """Test that recorded trajectories are the plain chain's, transition by transition.

    Parameters
    ----------
    trajectories : ndarray or torch.Tensor, shape (n, S, d)
        ``S = kernel.stop - kernel.first_stochastic + 1``; entry ``t`` is the committed state at
        step ``kernel.first_stochastic + t`` (entry 0 the ``N(0, I)`` start).  At least 20
        trajectories.  Torch tensors stay on their device for the target calls.
    kernel : PlainKernel
        From :func:`rass_theory.diffusion.plain_kernel`: the chain the sampler claims to be exact
        for.
    draft_means : array, shape (n, S, d), optional
        Entry ``t >= 1``: the draft mean in force when the state at entry ``t`` was committed
        (entry 0 is not read).  Adds the draft-to-target direction, the most sensitive one.
    depths : array of int, shape (n, S), optional
        Entry ``t >= 1``: the tree depth at which that state was committed (0 = a round's root;
        entry 0 is not read).  Adds per-depth tests.
    alpha : float
        Family-wise level (Holm over every test below).
    rng : seed or Generator
        Draws the fixed random directions and the plain reference of the final-state test.

    Returns
    -------
    TrajectoryCheckResult
        ``.passed``, ``.tests`` (each ``.name .statistic .pvalue``), ``.detectable``,
        ``.target_calls`` (the check's own).

    Raises
    ------
    ValueError
        Trajectories of the wrong shape, NaN or infinite states (the message names the row and
        the step), ``draft_means`` or ``depths`` that do not match, a kernel whose ``dim``
        differs from the trajectories', fewer than 20 trajectories.

    Notes
    -----
    With ``m_t = kernel.mean(k0 + t, x_t)`` and ``sigma_t = kernel.std(k0 + t)``, the residual
    ``r_t = (x_{t+1} - m_t) / sigma_t`` is iid ``N(0, I_d)`` given the past under an exact sampler
    (P9 section 3).  Tests, one Holm family:

    * ``norm``: KS of ``F_{chi2(d)}(||r_t||^2)`` against U(0, 1), per step and per depth;
    * ``projection``: KS of ``<r_t, e_t>`` against N(0, 1), pooled over steps and per depth, for
      predictable unit directions ``e_t``: draft-to-target ``m_t - draft_mean_{t+1}`` (when
      given), the velocity ``u(x_t, s_t)``, its increment ``u(x_t, s_t) - u(x_{t-1}, s_{t-1})``,
      and 3 fixed random directions;
    * ``lag``: lag-1 and lag-2 self-normalised correlation of each projection and of
      ``(||r_t||^2 - d) / sqrt(2 d)`` along every trajectory (martingale differences);
    * ``cross``: correlation between trajectories within a step (an exact F test: the squared
      mean residual against the within-step spread);
    * ``final``: per-coordinate two-sample KS of the final states against an independent plain
      run of the same kernel (Bonferroni over coordinates).

    Each p-value is valid under the null (exact KS law, or self-normalised CLT); the nulls are
    proved in ``proofs/P9-tree-exactness.md`` section 7.  Cost: ``2 (S - 1)`` batched target
    calls of ``n`` rows (residual means and the plain reference), counted in ``.target_calls``;
    memory about five float64 arrays of the trajectories' size (the states, the draft means, the
    residuals, the velocities and the draft displacements).
    """
    t0 = time.perf_counter()
    trajectories, X, dm, dep, alpha = _check_iv(trajectories, kernel, draft_means, depths, alpha)
    rng = as_generator(rng)
    n, S, d = X.shape
    T = S - 1
    k0 = kernel.first_stochastic
    calls0, evals0 = kernel.target_calls, kernel.target_evaluations

    # residuals and velocities, one batched target call per step
    r = np.empty((n, T, d))
    u = np.empty((n, T, d))
    disp = np.empty((n, T, d)) if dm is not None else None      # target mean - draft mean
    for t in range(T):
        k = k0 + t
        u[:, t] = _host(kernel.velocity(k, trajectories[:, t]))
        m = kernel.affine(k, X[:, t], u[:, t])
        r[:, t] = (X[:, t + 1] - m) / kernel.std(k)
        if disp is not None:
            disp[:, t] = m - dm[:, t + 1]
    sig = kernel.std(np.arange(k0, k0 + T))                         # (T,)

    raw = []                                                      # (name, family, statistic, pvalue, n)

    # norm family
    q = np.einsum("ntd,ntd->nt", r, r)
    pit = stats.chi2.cdf(q, d)
    for t in range(T):
        raw.append((f"norm[step {k0 + t}]", "norm") + ks_uniform_test(pit[:, t]))
    dep_t = dep[:, 1:] if dep is not None else None
    depth_values = np.unique(dep_t) if dep_t is not None else np.zeros(0, dtype=np.int64)
    if depth_values.size == 1:                 # one depth (plain sampling): per-depth tests repeat the pooled ones
        depth_values = depth_values[:0]
    for j in depth_values:
        raw.append((f"norm[depth {j}]", "norm") + ks_uniform_test(pit[dep_t == j]))

    # projection family: <r_t, v_t> / ||v_t|| for predictable v_t (no unit arrays are built)
    floor = 1e-12
    proj = {}
    if disp is not None:                   # rows whose draft mean is the target mean (delta <= 1e-9) drop out
        proj["draft"] = _projection(r, disp, 1e-9 * sig[None, :])
        del disp
    proj["velocity"] = _projection(r, u, floor)
    inc = np.full((n, T), np.nan)
    if T > 1:
        inc[:, 1:] = _projection(r[:, 1:], u[:, 1:] - u[:, :-1], floor)
    proj["increment"] = inc
    fixed = rng.standard_normal((_N_RANDOM_DIRECTIONS, d))
    fixed /= np.linalg.norm(fixed, axis=1, keepdims=True)
    for i in range(_N_RANDOM_DIRECTIONS):
        proj[f"random {i}"] = r @ fixed[i]
    for name, p in proj.items():
        raw.append((f"projection[{name}]", "projection") + ks_normal_test(p))
        for j in depth_values:
            if name in ("draft", "velocity", "increment"):
                raw.append((f"projection[{name}, depth {j}]", "projection") + ks_normal_test(p[dep_t == j]))

    # lag family
    series = dict(proj)
    series["norm"] = (q - d) / np.sqrt(2.0 * d)
    for lag in (1, 2):
        if T > lag:
            for name, p in series.items():
                raw.append((f"lag{lag}[{name}]", "lag") + lag_correlation_test(p, lag))

    # cross family
    raw.append(("cross[trajectories]", "cross") + cross_correlation_test(r))
    del r, u

    # final family: final committed states against an independent plain run of the same kernel
    ref = _plain_reference(kernel, trajectories, n, rng)
    m_final = marginal_ks_test(X[:, -1], ref, alpha=alpha)
    raw.append(("final[marginal KS]", "final", float(m_final.statistic), float(m_final.pvalue), n))

    # one Holm family, and the detectable discrepancy at the Bonferroni level alpha / m
    raw = [row for row in raw if row[4] >= 2]  # a direction with no defined values (no draft displacement)
    m = len(raw)
    pvals = np.array([row[3] for row in raw])
    reject, p_adj = holm(pvals, alpha)
    level = alpha / m
    tests = []
    for (name, family, statistic, pvalue, count), pa in zip(raw, p_adj):
        if family in ("norm", "projection"):
            det = detectable_ks(count, level)
        elif family == "lag":
            det = detectable_correlation(count, level)
        elif family == "cross":
            det = detectable_cross_correlation(n, T, d, level)
        else:
            det = float(marginal_ks_test_detectable(n, d, level))
        tests.append(TrajectoryTest(name, family, float(statistic), float(pvalue), int(count), float(det), float(pa)))
    detectable = {}
    for t in tests:
        if np.isfinite(t.detectable):
            detectable[t.family] = max(detectable.get(t.family, 0.0), t.detectable)
    return TrajectoryCheckResult(
        passed=not bool(np.any(reject)), tests=tuple(tests), alpha=alpha, detectable=detectable,
        n_trajectories=n, n_states=S, dim=d, target_calls=kernel.target_calls - calls0,
        target_evaluations=kernel.target_evaluations - evals0, wall_time_s=time.perf_counter() - t0,
    )


def marginal_ks_test_detectable(n: int, d: int, level: float) -> float:
    """Detectable per-coordinate KS distance of the final-state test (``MarginalTestResult``'s formula).

    ``sqrt(log(2 d / level) (n + m) / (2 n m)) + 2 sqrt(log(20) / (2 n))`` with ``m = n``.
    """
    c = np.sqrt(np.log(2 * d / level) * (2 * n) / (2 * n * n))
    return float(c + 2 * np.sqrt(np.log(2 / 0.1) / (2 * n)))


# ---------------------------------------------------------------------------------------------
# a user's sampler
# ---------------------------------------------------------------------------------------------

def _unpack(out):
    if isinstance(out, tuple):
        if not 1 <= len(out) <= 3:
            raise ValueError(f"sampler must return trajectories or (trajectories[, draft_means[, depths]]), "
                             f"got a tuple of {len(out)}")
        return tuple(out) + (None,) * (3 - len(out))
    if hasattr(out, "trajectories"):
        return out.trajectories, getattr(out, "draft_means", None), getattr(out, "depths", None)
    return out, None, None


def check_sampler(sampler, kernel, n_trajectories: int = 2000, rng=0, *, alpha: float = 1e-3) -> TrajectoryCheckResult:
    """Run a user's sampler from fresh starts and check its trajectories step by step.

    Parameters
    ----------
    sampler : callable
        ``sampler(kernel, x0, rng)``: ``x0`` (``(n_trajectories, dim)``, the ``N(0, I)`` starts at
        step ``kernel.first_stochastic``; a NumPy array, or a tensor on the model's device when
        ``kernel.backend == "torch"``) and ``rng`` (a NumPy Generator for the sampler's own
        draws).  Returns the trajectories ``(n, S, dim)`` that start at ``x0``, or a tuple
        ``(trajectories, draft_means[, depths])``, or an object with ``.trajectories`` (and
        optionally ``.draft_means``, ``.depths``).  Layout: :func:`check_trajectories`.
    kernel : PlainKernel
    n_trajectories : int
    rng : seed or Generator
        Split into the starts, the sampler's generator and the check's.
    alpha : float

    Returns
    -------
    TrajectoryCheckResult
        As :func:`check_trajectories`; ``extra["sampler_wall_time_s"]`` times the sampler.

    Notes
    -----
    See :func:`check_trajectories` for the tests and ``proofs/P9-tree-exactness.md`` section 7
    for their nulls.
    """
    if not callable(sampler):
        raise TypeError(f"sampler must be callable as sampler(kernel, x0, rng), got {type(sampler).__name__}")
    if not isinstance(kernel, PlainKernel):
        raise TypeError(f"kernel must be a PlainKernel from diffusion.plain_kernel(...), got {type(kernel).__name__}")
    n = check_positive_int(n_trajectories, "n_trajectories", minimum=_MIN_TRAJECTORIES)
    seeds = np.random.SeedSequence(rng if not isinstance(rng, np.random.Generator)
                                   else int(rng.integers(0, 2 ** 63 - 1))).spawn(3)
    x0 = np.random.default_rng(seeds[0]).standard_normal((n, kernel.dim))
    if kernel.backend == "torch":
        import torch

        tgt = kernel.target
        x0 = torch.as_tensor(x0, dtype=tgt.dtype or torch.float32, device=tgt.device or "cpu")
    t0 = time.perf_counter()
    traj, dm, dep = _unpack(sampler(kernel, x0, np.random.default_rng(seeds[1])))
    t_sampler = time.perf_counter() - t0
    if tuple(getattr(traj, "shape", ())) [:1] == (n,) and len(getattr(traj, "shape", ())) == 3 \
            and traj.shape[1] == kernel.n_states and traj.shape[2] == kernel.dim:
        start = _host(traj[:, 0])
        if not np.allclose(start, _host(x0), rtol=0, atol=1e-6 * (1 + np.abs(_host(x0)).max())):
            raise ValueError("sampler must return trajectories that start at x0 (trajectories[:, 0] == x0)")
    res = check_trajectories(traj, kernel, draft_means=dm, depths=dep, alpha=alpha,
                             rng=np.random.default_rng(seeds[2]))
    return TrajectoryCheckResult(**{**res.__dict__, "extra": {**res.extra, "sampler_wall_time_s": t_sampler}})
