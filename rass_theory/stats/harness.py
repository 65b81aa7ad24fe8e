"""``check_exactness``: is a verifier exact?  A streaming, mergeable test with stated power.

One synthetic node (:class:`~rass_theory.stats.node.SyntheticNode`) is verified ``n_samples``
times, chunk by chunk.  Each chunk draws ``children ~ N(mu_draft, sigma^2 I)`` of shape
``(n, K, dim)``, calls the verifier, checks the contract, and bins the committed states'
probability-integral transforms (:class:`~rass_theory.stats.streaming.ExactnessCounts`).  The
merged counts are then tested (:mod:`rass_theory.stats.tests`):

==========================  =================================================================
``s_*``                     ``s - delta ~ N(0, 1)``: ``_ks`` binned KS (smooth shifts),
                            ``_chi2`` Pearson on 32 bins, ``_chi2_fine`` Pearson on every fine
                            bin (atoms, lattices: precision bugs)
``rperp_*``                 ``||z_perp||^2 ~ chi^2(dim - 1)``, same three tests
``dir{j}_*``                ``<v_j, z> ~ N(0, 1)`` on fixed random unit ``v_j`` orthogonal to ``e``
``joint_chi2``              ``(s, ||z_perp||^2)`` PITs independent uniform, 8 x 8 cells
``acceptance_binomial``     accepted count ~ Binomial(n, exact acceptance) (when known)
``energy_two_sample``       first ``two_sample_size`` states vs direct ``N(mu_target, sigma^2 I)``
                            draws, energy distance, permutation p-value
``contract``                no row broke the verifier contract (not a statistical test)
==========================  =================================================================

The statistical tests form one Holm family at level ``alpha`` (``statsmodels.multipletests``);
the run passes when none is rejected and the contract held on every row.
"""
from __future__ import annotations

import math
import numbers
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int, check_probability
from . import tests as T
from .checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint
from .node import PERMUTATION_KEY, TARGET_KEY, ChunkSpec, SyntheticNode, chunk_plan, n_chunks_of, stream_seed, sub_seed
from .power import detectable_ks_distance
from .report import ExactnessReport, StatisticalTest
from .streaming import VIOLATION_KINDS, ExactnessCounts

__all__ = ["check_exactness", "certify", "run_chunk_numpy", "counts_from_result", "HarnessConfig",
           "DEFAULT_N_SAMPLES", "DEFAULT_CHUNK_SIZE", "BACKENDS"]

#: Default sample size: for K = 4, dim = 8 it runs in well under 30 s on two cores and rejects
#: every mutant of :mod:`rass_theory.mutants` (``tests/stats/test_mutants.py``).
DEFAULT_N_SAMPLES = 1_000_000
DEFAULT_CHUNK_SIZE = 100_000
DEFAULT_N_BINS = 4096
DEFAULT_TWO_SAMPLE_SIZE = 400
N_CHI2_BINS = 32
BACKENDS = ("numpy", "torch", "dask")
_WHOLE_ARRAY_KINDS = {"missing_field", "not_an_array", "shape", "dtype"}


# ---------------------------------------------------------------------------------------------
# configuration
@dataclass(frozen=True)
class HarnessConfig:
    """Validated arguments of one harness run (see :func:`check_exactness`)."""

    K: int
    delta: float
    dim: int
    n_samples: int
    alpha: float
    seed: int
    expected_acceptance: float | None
    sigma: float
    chunk_size: int
    n_directions: int
    n_bins: int
    two_sample_size: int
    n_permutations: int | None
    false_pass_rate: float
    backend: str
    device: object
    backend_options: dict
    checkpoint: object
    checkpoint_every: int
    progress: bool
    verifier_name: str

    def fingerprint(self) -> dict:
        """Everything that determines the counts (stored in checkpoints)."""
        return {"format_version": FORMAT_VERSION, "K": self.K, "delta": repr(self.delta), "dim": self.dim,
                "sigma": repr(self.sigma), "seed": str(self.seed), "n_samples": self.n_samples,
                "chunk_size": self.chunk_size, "n_directions": self.n_directions, "n_bins": self.n_bins,
                "two_sample_size": self.two_sample_size, "backend": self.backend,
                "device": None if self.device is None else str(self.device),
                "verifier": self.verifier_name}


def verifier_name(verifier) -> str:
    """A stable name: ``verifier.name`` if it is a string, else ``module.qualname`` of it or its type."""
    name = getattr(verifier, "name", None)
    if isinstance(name, str) and name:
        return name
    target = verifier if hasattr(verifier, "__qualname__") else type(verifier)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(verifier).__name__)}"


def _seed_entropy(rng) -> int:
    if isinstance(rng, bool):
        raise TypeError("rng must be None, an int, a SeedSequence or a numpy Generator, got a bool")
    if isinstance(rng, numbers.Integral):
        if rng < 0:
            raise ValueError(f"rng must be a non-negative integer seed, got {rng}")
        return int(rng)
    if rng is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(rng, np.random.SeedSequence):
        words = rng.generate_state(2, np.uint64)
        return int(words[0]) << 64 | int(words[1])
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(0, 2**63 - 1))
    raise TypeError(f"rng must be None, an int, a SeedSequence or a numpy Generator, got {type(rng).__name__}")


def resolve_expected_acceptance(verifier, K, delta, expected_acceptance):
    """The exact acceptance to test against, or ``None``.

    An explicit ``expected_acceptance`` wins; otherwise a built-in verifier's
    ``expected_acceptance(K, delta)`` method (``None`` when it has no closed form).
    """
    if expected_acceptance is not None:
        return check_probability(expected_acceptance, "expected_acceptance", open_interval=False)
    attr = getattr(verifier, "expected_acceptance", None)
    if attr is None:
        return None
    value = attr(K, delta) if callable(attr) else attr
    if value is None:
        return None
    return check_probability(float(value), "verifier.expected_acceptance(K, delta)", open_interval=False)


def _config(verifier, K, delta, dim, n_samples, alpha, rng, expected_acceptance, sigma, chunk_size,
            n_directions, n_bins, two_sample_size, n_permutations, false_pass_rate, backend, device,
            backend_options, checkpoint, checkpoint_every, progress) -> HarnessConfig:
    if not callable(verifier):
        raise TypeError(f"verifier must be callable (children, mu_draft, mu_target, sigma, rng), "
                        f"got {type(verifier).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if device is not None and backend == "numpy":
        raise ValueError("device is only used by backend='torch' or 'dask'; got device with backend='numpy'")
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    alpha = check_probability(alpha, "alpha")
    node_probe = SyntheticNode.build(K, delta, dim, sigma=sigma, n_directions=n_directions, n_bins=n_bins,
                                     entropy=0)  # validates K, delta, dim, sigma, n_directions, n_bins
    chunk_size = check_positive_int(chunk_size if chunk_size is not None else DEFAULT_CHUNK_SIZE, "chunk_size")
    two_sample_size = check_positive_int(two_sample_size, "two_sample_size", minimum=0)
    if n_permutations is not None:
        n_permutations = check_positive_int(n_permutations, "n_permutations", minimum=99)
    false_pass_rate = check_probability(false_pass_rate, "false_pass_rate")
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    if backend_options is not None and not isinstance(backend_options, dict):
        raise TypeError(f"backend_options must be a dict, got {type(backend_options).__name__}")
    if checkpoint is not None:
        try:
            path = os.fspath(checkpoint)
        except TypeError:
            raise TypeError(f"checkpoint must be a path, got {type(checkpoint).__name__}") from None
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise ValueError(f"checkpoint directory {parent!r} does not exist")
        if os.path.isdir(path):
            raise ValueError(f"checkpoint {path!r} is a directory, expected a file path")
    seed = _seed_entropy(rng)
    exp = resolve_expected_acceptance(verifier, node_probe.K, node_probe.delta, expected_acceptance)
    return HarnessConfig(node_probe.K, node_probe.delta, node_probe.dim, n_samples, alpha, seed, exp,
                         node_probe.sigma, chunk_size, node_probe.n_directions, node_probe.n_bins,
                         two_sample_size, n_permutations, false_pass_rate, backend, device,
                         dict(backend_options or {}), checkpoint, checkpoint_every, bool(progress),
                         verifier_name(verifier))


def build_node(cfg: HarnessConfig) -> SyntheticNode:
    return SyntheticNode.build(cfg.K, cfg.delta, cfg.dim, sigma=cfg.sigma, n_directions=cfg.n_directions,
                               n_bins=cfg.n_bins, entropy=cfg.seed)


# ---------------------------------------------------------------------------------------------
# one chunk (numpy)
def _check_contract(result, children):
    from rass_theory.verifiers import check_contract

    return check_contract(result, children)


def counts_from_result(node: SyntheticNode, result, children, keep: int = 0) -> ExactnessCounts:
    """Check one verifier output against the contract and bin its valid rows.

    Rows that break the contract (non-finite state, index out of range, ``accepted`` inconsistent
    with ``child_index``, or a claimed child that is not a bit-for-bit copy) are counted by kind and
    excluded from every statistic; a whole-array problem (missing field, wrong shape or dtype)
    excludes the whole chunk.
    """
    n = children.shape[0]
    violations = np.zeros(len(VIOLATION_KINDS), np.int64)
    try:
        issues = _check_contract(result, children)
    except Exception as exc:  # noqa: BLE001 - a malformed result must fail the run, not crash it
        violations[VIOLATION_KINDS.index("other")] = n
        return ExactnessCounts.from_chunk(node, np.zeros((n, node.dim)), np.zeros(n, bool), np.zeros(n, bool),
                                          violations, (f"[other] contract check failed: {exc}",), keep)
    messages = tuple(str(i) for i in issues)
    for issue in issues:
        kind = issue.kind if issue.kind in VIOLATION_KINDS else "other"
        violations[VIOLATION_KINDS.index(kind)] += int(issue.n_rows)
    if any(i.kind in _WHOLE_ARRAY_KINDS for i in issues):
        return ExactnessCounts.from_chunk(node, np.zeros((n, node.dim)), np.zeros(n, bool), np.zeros(n, bool),
                                          violations, messages, keep)
    states = np.asarray(result.states)
    accepted = np.asarray(result.accepted)
    index = np.asarray(result.child_index)
    valid = np.ones(n, dtype=bool)
    if issues:
        K = children.shape[1]
        finite = np.isfinite(states).all(axis=1)
        in_range = (index >= -1) & (index < K)
        valid = finite & in_range & (accepted == (index != -1))
        rows = np.flatnonzero(valid & accepted)
        same = (states[rows] == children[rows, index[rows]]).all(axis=1)
        valid[rows[~same]] = False
    z = node.standardise(states)
    return ExactnessCounts.from_chunk(node, z, valid, accepted, violations, messages, keep)


def run_chunk_numpy(verifier, node: SyntheticNode, spec: ChunkSpec) -> ExactnessCounts:
    """Run one chunk on the CPU with NumPy.

    Draws ``children = mu_draft + sigma * N(0, I)`` of shape ``(spec.n, K, dim)`` from the stream
    ``sub_seed(spec.seed, 0)``, calls ``verifier(children, mu_draft, mu_target, sigma, rng)`` with
    ``(n, dim)`` copies of the means, the scalar ``sigma`` and ``rng = default_rng(sub_seed(spec.seed, 1))``,
    and returns :func:`counts_from_result`.  Exceptions raised by the verifier propagate.
    """
    n = spec.n
    children = np.random.default_rng(sub_seed(spec.seed, 0)).standard_normal((n, node.K, node.dim))
    children *= node.sigma
    children += node.mu_draft
    mu_draft = np.tile(node.mu_draft, (n, 1))
    mu_target = np.tile(node.mu_target, (n, 1))
    rng = np.random.default_rng(sub_seed(spec.seed, 1))
    result = verifier(children, mu_draft, mu_target, node.sigma, rng)
    return counts_from_result(node, result, children, spec.keep)


def _chunk_stream(verifier, node, specs, cfg: HarnessConfig):
    if cfg.backend == "numpy":
        for spec in specs:
            yield run_chunk_numpy(verifier, node, spec)
    elif cfg.backend == "torch":
        from rass_theory.torch.harness import run_chunk_torch

        for spec in specs:
            yield run_chunk_torch(verifier, node, spec, cfg.device)
    else:
        from rass_theory.scale.dask_backend import run_chunks_dask

        options = dict(cfg.backend_options)
        if cfg.device is not None:
            options.setdefault("device", cfg.device)
        yield from run_chunks_dask(verifier, node, list(specs), **options)


def collect_counts(verifier, cfg: HarnessConfig, node: SyntheticNode | None = None):
    """Run (or resume) every chunk and return ``(counts, first_chunk_run_here)``.

    With ``cfg.checkpoint`` set, the merged counts are saved atomically every
    ``cfg.checkpoint_every`` chunks, at the end, and when the loop is interrupted by any exception
    (``KeyboardInterrupt`` included), which is then re-raised.
    """
    node = node or build_node(cfg)
    n_chunks = n_chunks_of(cfg.n_samples, cfg.chunk_size)
    fingerprint = cfg.fingerprint()
    counts, start = ExactnessCounts.empty(node), 0
    if cfg.checkpoint is not None:
        loaded = load_checkpoint(cfg.checkpoint, fingerprint)
        if loaded is not None:
            counts, start, complete = loaded
            if complete or start >= n_chunks:
                return counts, n_chunks
    specs = chunk_plan(cfg.n_samples, cfg.chunk_size, cfg.seed, cfg.two_sample_size, start=start)
    next_chunk, since_save = start, 0
    stream = _chunk_stream(verifier, node, specs, cfg)
    t0 = time.perf_counter()
    try:
        for spec, part in zip(specs, stream):
            if part.n_rows != spec.n:
                raise RuntimeError(f"chunk runner returned {part.n_rows} rows for chunk {spec.index} of {spec.n}")
            counts = counts.merge(part)
            next_chunk = spec.index + 1
            since_save += 1
            if cfg.checkpoint is not None and since_save >= cfg.checkpoint_every and next_chunk < n_chunks:
                save_checkpoint(cfg.checkpoint, counts, next_chunk, fingerprint)
                since_save = 0
            if cfg.progress:
                rate = (counts.n_rows - (start * cfg.chunk_size)) / max(time.perf_counter() - t0, 1e-9)
                print(f"\rchunk {next_chunk}/{n_chunks}  {rate:,.0f} samples/s", end="", file=sys.stderr)
    except BaseException:
        if cfg.checkpoint is not None and next_chunk > start:
            save_checkpoint(cfg.checkpoint, counts, next_chunk, fingerprint)
        raise
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        if cfg.progress:
            print(file=sys.stderr)
    if next_chunk != n_chunks:
        raise RuntimeError(f"chunk runner stopped after chunk {next_chunk} of {n_chunks}")
    if cfg.checkpoint is not None:
        save_checkpoint(cfg.checkpoint, counts, n_chunks, fingerprint, complete=True)
    return counts, start


# ---------------------------------------------------------------------------------------------
# evaluation
def _family_size(cfg: HarnessConfig) -> int:
    per_histogram = 3  # ks, chi2 (32 bins), chi2 (fine bins)
    m = per_histogram + (1 if cfg.two_sample_size else 0)  # s, energy
    if cfg.dim > 1:
        m += per_histogram * (1 + cfg.n_directions) + 1  # rperp, directions, joint
    if cfg.expected_acceptance is not None:
        m += 1
    return m


def _n_permutations(cfg: HarnessConfig) -> int:
    """Enough permutations that the energy test alone can pass Holm's first threshold ``alpha / m``."""
    if cfg.n_permutations is not None:
        return cfg.n_permutations
    return permutations_for(_family_size(cfg), cfg.alpha)


def permutations_for(m: int, alpha: float) -> int:
    """``ceil(1.5 m / alpha)`` clipped to ``[999, 100000]``: the smallest attainable permutation
    p-value ``1 / (P + 1)`` is then below Holm's first threshold ``alpha / m``."""
    return int(min(100_000, max(999, math.ceil(1.5 * m / alpha))))


def _histogram_tests(prefix, counts, n_bins) -> list:
    """KS at the bin edges, chi-square on 32 coarse bins, chi-square on the fine bins."""
    return [(f"{prefix}_ks", T.binned_ks_test(counts)),
            (f"{prefix}_chi2", T.binned_chisquare_test(counts, N_CHI2_BINS)),
            (f"{prefix}_chi2_fine", T.binned_chisquare_test(counts, n_bins, min_expected=5))]


def raw_tests(counts: ExactnessCounts, node: SyntheticNode, cfg: HarnessConfig) -> list:
    """``[(name, TestStatistic)]`` of every statistical test of the family, raw p-values."""
    out = _histogram_tests("s", counts.s_counts, node.n_bins)
    if node.dim > 1:
        out += _histogram_tests("rperp", counts.r_counts, node.n_bins)
        for j in range(node.n_directions):
            out += _histogram_tests(f"dir{j}", counts.dir_counts[j], node.n_bins)
        out.append(("joint_chi2", T.joint_chisquare_test(counts.joint_counts, node.n_bins)))
    if cfg.expected_acceptance is not None:
        out.append(("acceptance_binomial", T.binomial_test(counts.n_accepted, counts.n_valid, cfg.expected_acceptance)))
    if not cfg.two_sample_size:  # the two-sample test was switched off
        return out
    m = counts.subsample.shape[0]
    target = np.random.default_rng(stream_seed(cfg.seed, TARGET_KEY)).standard_normal((max(m, 2), node.dim))
    target += node.delta * node.direction
    perm_rng = np.random.default_rng(stream_seed(cfg.seed, PERMUTATION_KEY))
    out.append(("energy_two_sample", T.energy_test(counts.subsample, target[:m], _n_permutations(cfg), perm_rng)))
    return out


def contract_test(counts: ExactnessCounts) -> StatisticalTest:
    bad = counts.n_rows - counts.n_valid
    ok = bad == 0 and counts.n_rows > 0
    detail = "all rows satisfy the verifier contract" if ok else (
        f"{bad} of {counts.n_rows} rows broke the contract: {counts.violation_dict()}; "
        + " | ".join(counts.messages))
    return StatisticalTest("contract", float(bad), 1.0 if ok else 0.0, 1.0 if ok else 0.0, ok, detail)


def make_report(counts, node, cfg, raw, p_adjusted, reject, elapsed, start_chunk, n_family=None) -> ExactnessReport:
    """Assemble the report from raw tests and their (family-wise) adjusted p-values.

    ``n_family`` is the size of the Holm family (default ``len(raw)``; the grid's for ``certify``).
    """
    tests = []
    for (name, t), p_adj, rej in zip(raw, p_adjusted, reject):
        ran = not math.isnan(t.pvalue)
        tests.append(StatisticalTest(name, t.statistic, t.pvalue, float(p_adj), bool(ran and not rej), t.detail))
    contract = contract_test(counts)
    tests.append(contract)
    n_valid = counts.n_valid
    rate = counts.n_accepted / n_valid if n_valid else float("nan")
    ci = T.clopper_pearson(counts.n_accepted, n_valid, 1 - cfg.alpha)
    detectable = (detectable_ks_distance(n_valid, cfg.alpha, max(n_family or len(raw), 1), cfg.false_pass_rate,
                                         node.n_bins)
                  if n_valid else float("inf"))
    passed = all(t.passed for t in tests)
    return ExactnessReport(passed, tuple(tests), rate, ci, cfg.expected_acceptance, counts.n_rows, n_valid,
                           cfg.alpha, detectable, cfg.false_pass_rate, elapsed, cfg.seed, cfg.K, cfg.delta,
                           cfg.dim, cfg.sigma, cfg.backend, cfg.verifier_name, counts.violation_dict(),
                           counts.messages, start_chunk, counts)


# ---------------------------------------------------------------------------------------------
# public entry points
def check_exactness(verifier, K=4, delta=0.5, dim=8, n_samples=DEFAULT_N_SAMPLES, alpha=1e-3, rng=0,
                    expected_acceptance=None, *, sigma=1.0, chunk_size=DEFAULT_CHUNK_SIZE, n_directions=None,
                    n_bins=DEFAULT_N_BINS, two_sample_size=DEFAULT_TWO_SAMPLE_SIZE, n_permutations=None,
                    false_pass_rate=0.01, backend="numpy", device=None, backend_options=None,
                    checkpoint=None, checkpoint_every=5, progress=False) -> ExactnessReport:
    """Test whether ``verifier`` is exact on a synthetic node, with stated power.

    Parameters
    ----------
    verifier : callable
        ``verifier(children (n, K, dim), mu_draft (n, dim), mu_target (n, dim), sigma, rng)`` returning
        an object with ``states``, ``accepted``, ``child_index`` (DESIGN section 4).  Any callable
        works; built-in verifiers also provide ``expected_acceptance(K, delta)``.
    K, delta, dim : node parameters (``delta = 0`` and tiny ``delta`` are allowed).
    n_samples : int, default 1_000_000
        Nodes verified.
    alpha : float, default 1e-3
        Family-wise false-fail rate of the run (Holm over all statistical tests).
    rng : int, SeedSequence, Generator or None, default 0
        Source of the run's seed; every draw descends from it (see :mod:`rass_theory.stats.node`).
    expected_acceptance : float, optional
        Exact acceptance probability to test the accepted count against; defaults to
        ``verifier.expected_acceptance(K, delta)`` when the verifier provides it, else untested.
    sigma : float, default 1.0
        Shared kernel scale.
    chunk_size : int, default 100_000
        Rows per chunk (memory is ``O(chunk_size * K * dim)``, independent of ``n_samples``).
    n_directions : int, optional
        Orthogonal test directions, default ``min(2, dim - 1)``.
    n_bins : int, default 4096
        Equiprobable PIT bins of each histogram.
    two_sample_size : int, default 400
        States (and direct target draws) in the energy two-sample test; 0 leaves the test out.
    n_permutations : int, optional
        Largest number of permutations of the energy test (Besag-Clifford sequential stopping
        under the null); default ``ceil(1.5 m / alpha)`` clipped to [999, 1e5], so the test can
        reject on its own inside a Holm family of ``m`` tests.
    false_pass_rate : float, default 0.01
        ``beta`` of the reported ``detectable_ks_distance``.
    backend : {"numpy", "torch", "dask"}
    device : torch device for ``backend="torch"`` (or the Dask workers' torch device).
    backend_options : dict, optional
        Passed to ``run_chunks_dask`` (``address``, ``n_workers``, ``inner``).
    checkpoint : path, optional
        ``.npz`` checkpoint file: resumed from when it exists and matches this configuration
        (``ValueError`` otherwise; never overwritten then), written every ``checkpoint_every``
        chunks, at the end and on interruption.
    checkpoint_every : int, default 5
    progress : bool
        Print chunk progress to stderr.

    Returns
    -------
    ExactnessReport

    Notes
    -----
    Under an exact rule the committed state is ``N(mu_target, sigma^2 I)`` (DESIGN section 2,
    proof ``P1-rank1-reduction``): ``s - delta ~ N(0,1)``, ``||z_perp||^2 ~ chi^2(dim-1)`` independent of ``s``,
    and ``<v, z> ~ N(0, 1)`` for unit ``v`` orthogonal to ``e``.  Each is tested by a binned KS test
    (p-value conservative, :func:`rass_theory.stats.tests.binned_ks_test`) and a Pearson
    chi-square; the accepted count by an exact binomial test; the whole state by an energy
    two-sample test against direct target draws.  Holm's procedure keeps the family-wise error
    at ``alpha``.  Power: any tested one-dimensional statistic whose law is at KS distance
    ``>= eps = sqrt(log(2m/alpha)/(2n)) + sqrt(log(2/beta)/(2n)) + 1/n_bins`` from its null is
    rejected with probability ``>= 1 - beta`` (:func:`rass_theory.stats.power.detectable_ks_distance`).
    """
    t0 = time.perf_counter()
    cfg = _config(verifier, K, delta, dim, n_samples, alpha, rng, expected_acceptance, sigma, chunk_size,
                  n_directions, n_bins, two_sample_size, n_permutations, false_pass_rate, backend, device,
                  backend_options, checkpoint, checkpoint_every, progress)
    node = build_node(cfg)
    counts, start = collect_counts(verifier, cfg, node)
    raw = raw_tests(counts, node, cfg)
    reject, p_adj = T.holm([t.pvalue for _, t in raw], cfg.alpha)
    return make_report(counts, node, cfg, raw, p_adj, reject, time.perf_counter() - t0, start)


def certify(verifier, cells=None, **kwargs):
    """Run :func:`check_exactness` over a grid with the family-wise error held across it.

    See :func:`rass_theory.stats.certify.certify`.
    """
    from .certify import certify as _certify

    return _certify(verifier, cells, **kwargs)
