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
from .node import (DTYPES, PERMUTATION_KEY, TARGET_KEY, ChunkSpec, SyntheticNode, chunk_plan, n_chunks_of,
                   stream_seed, sub_seed)
from .power import detectable_ks_distance
from .report import ExactnessReport, StatisticalTest
from .rowstats import counts_from_rows, tail_probability
from .streaming import INDEP_STATS, MAX_MESSAGES, SEQUENCE_KINDS, TAILS, VIOLATION_KINDS, ExactnessCounts

__all__ = ["check_exactness", "certify", "run_chunk_numpy", "HarnessConfig", "DEFAULT_N_SAMPLES",
           "DEFAULT_CHUNK_SIZE", "BACKENDS", "DEFAULT_DTYPES"]

#: Rows per dtype pass of one cell.  The default grid (6 cells x 2 dtypes) of an exact rule runs
#: in under a minute on two cores (``bench/harness_mutants.py`` prints the time per cell) and
#: rejects every mutant of :mod:`rass_theory.mutants`.
DEFAULT_N_SAMPLES = 200_000
DEFAULT_CHUNK_SIZE = 100_000
DEFAULT_N_BINS = 4096
DEFAULT_TWO_SAMPLE_SIZE = 400
DEFAULT_DTYPES = ("float64", "float32")
N_CHI2_BINS = 32
BACKENDS = ("numpy", "torch", "dask")
_WHOLE_ARRAY_KINDS = {"missing_field", "not_an_array", "shape", "dtype"}


# ---------------------------------------------------------------------------------------------
# configuration
@dataclass(frozen=True)
class HarnessConfig:
    """Validated arguments of one harness cell (see :func:`check_exactness`).

    ``expected`` and ``bounds`` hold one value per delta group (``deltas``; NaN: not tested).
    """

    K: int
    delta: float
    dim: int
    n_samples: int
    alpha: float
    seed: int
    expected: tuple
    sigma: float | None
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
    dtypes: tuple = DEFAULT_DTYPES
    deltas: tuple = ()
    bounds: tuple = ()
    regime: object = None

    @property
    def expected_acceptance(self):
        """Declared exact acceptance at the named delta (``None``: not declared)."""
        return None if not self.expected or math.isnan(self.expected[0]) else self.expected[0]

    def fingerprint(self) -> dict:
        """Everything that determines the counts (stored in checkpoints)."""
        return {"format_version": FORMAT_VERSION, "K": self.K, "delta": repr(self.delta), "dim": self.dim,
                "sigma": repr(self.sigma), "seed": str(self.seed), "n_samples": self.n_samples,
                "chunk_size": self.chunk_size, "n_directions": self.n_directions, "n_bins": self.n_bins,
                "two_sample_size": self.two_sample_size, "backend": self.backend, "dtypes": list(self.dtypes),
                "device": None if self.device is None else str(self.device),
                "verifier": self.verifier_name,
                "regime": "default" if self.regime is None else self.regime.fingerprint()}


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


def _probability_or_nan(value, name):
    if value is None:
        return float("nan")
    return check_probability(float(value), name, open_interval=False)


def resolve_expected_acceptance(verifier, K, deltas, expected_acceptance) -> tuple:
    """The exact acceptance of every delta group (NaN where not declared).

    ``expected_acceptance`` may be a float (the acceptance at the named delta, ``deltas[0]``;
    the other groups are then untested) or a callable ``(K, delta) -> float``.  Without it, a
    verifier's own ``expected_acceptance(K, delta)`` method is used for every group (``None``
    from it means "no closed form"), or its ``expected_acceptance`` number for the named delta.
    """
    source = expected_acceptance if expected_acceptance is not None else getattr(verifier, "expected_acceptance", None)
    name = "expected_acceptance" if expected_acceptance is not None else "verifier.expected_acceptance(K, delta)"
    if source is None:
        return tuple(float("nan") for _ in deltas)
    if callable(source):
        return tuple(_probability_or_nan(source(K, d), name) for d in deltas)
    if isinstance(source, bool) or not isinstance(source, numbers.Real):
        raise TypeError(f"{name} must be a number or a callable (K, delta) -> float, got {type(source).__name__}")
    return (_probability_or_nan(source, name),) + tuple(float("nan") for _ in deltas[1:])


def check_dtypes(dtype, backend) -> tuple:
    """Validate the ``dtype`` argument: one name or a sequence of names from ``DTYPES``."""
    names = (dtype,) if isinstance(dtype, str) else dtype
    try:
        names = tuple(names)
    except TypeError:
        raise TypeError(f"dtype must be a dtype name or a sequence of them, got {dtype!r}") from None
    if not names:
        raise ValueError("dtype must name at least one dtype")
    for nm in names:
        if nm not in DTYPES:
            raise ValueError(f"dtype must be among {DTYPES}, got {nm!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"dtype lists a dtype twice: {names}")
    if "bfloat16" in names and backend == "numpy":
        raise ValueError("dtype='bfloat16' needs backend='torch' (NumPy has no bfloat16)")
    return names


def _bound(K, delta):
    from ..exact.bound import acceptance_bound

    return float(acceptance_bound(K, delta)) if delta > 0 else 1.0


def check_regime(regime):
    """``None`` or the :class:`~rass_theory.stats.regime.Regime` of ``regime`` (a trace, run, mapping or Regime)."""
    if regime is None:
        return None
    from .regime import regime_from_trace

    return regime_from_trace(regime)


def check_detect(detect, n_bins=DEFAULT_N_BINS):
    """Validate ``detect``: a KS distance in ``(1/n_bins, 1)``, or ``None``."""
    if detect is None:
        return None
    if isinstance(detect, bool) or not isinstance(detect, numbers.Real):
        raise TypeError(f"detect must be a KS distance (a float), got {type(detect).__name__}")
    detect = float(detect)
    floor = 1.0 / int(n_bins)
    if not (math.isfinite(detect) and floor < detect < 1.0):
        raise ValueError(f"detect must be a KS distance in (1/n_bins, 1) = ({floor:.3g}, 1), got {detect!r}")
    return detect


def _config(verifier, K, delta, dim, n_samples, alpha, rng, expected_acceptance, sigma, chunk_size,
            n_directions, n_bins, two_sample_size, n_permutations, false_pass_rate, backend, device,
            backend_options, checkpoint, checkpoint_every, progress, dtype=DEFAULT_DTYPES, *,
            regime=None) -> HarnessConfig:
    if not callable(verifier):
        raise TypeError(f"verifier must be callable (children, mu_draft, mu_target, sigma, rng), "
                        f"got {type(verifier).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if device is not None and backend == "numpy":
        raise ValueError("device is only used by backend='torch' or 'dask'; got device with backend='numpy'")
    dtypes = check_dtypes(dtype, backend)
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    alpha = check_probability(alpha, "alpha")
    node_probe = SyntheticNode.build(K, delta, dim, sigma=sigma, n_directions=n_directions, n_bins=n_bins,
                                     entropy=0, regime=regime)  # validates K, delta, dim, sigma, n_directions, n_bins
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
    deltas = node_probe.deltas
    expected = resolve_expected_acceptance(verifier, node_probe.K, deltas, expected_acceptance)
    bounds = tuple(_bound(node_probe.K, d) for d in deltas)
    return HarnessConfig(node_probe.K, node_probe.delta, node_probe.dim, n_samples, alpha, seed, expected,
                         node_probe.sigma, chunk_size, node_probe.n_directions, node_probe.n_bins,
                         two_sample_size, n_permutations, false_pass_rate, backend, device,
                         dict(backend_options or {}), checkpoint, checkpoint_every, bool(progress),
                         verifier_name(verifier), dtypes, deltas, bounds, regime)


def build_node(cfg: HarnessConfig) -> SyntheticNode:
    return SyntheticNode.build(cfg.K, cfg.delta, cfg.dim, sigma=cfg.sigma, n_directions=cfg.n_directions,
                               n_bins=cfg.n_bins, entropy=cfg.seed, regime=cfg.regime)


# ---------------------------------------------------------------------------------------------
# one chunk (numpy)
def _check_contract(result, children):
    from rass_theory.verifiers import check_contract

    return check_contract(result, children)


def _numpy_dtype(name):
    if name == "float64":
        return np.float64
    if name == "float32":
        return np.float32
    raise ValueError(f"dtype {name!r} needs backend='torch' (NumPy has no bfloat16)")


def call_batches(spec):
    """``[(start, stop), ...]``: the chunk's verifier calls (small batches first, then the rest)."""
    bounds, a = [], 0
    for m in spec.small_batches:
        bounds.append((a, a + m))
        a += m
    bounds.append((a, spec.n))
    return [(a, b) for a, b in bounds if b > a]


def _raised_kind(exc) -> str:
    text = str(exc).lower()
    return "mutated_input" if ("read-only" in text or "not writeable" in text or "read only" in text) else "raised"


#: Smallest dimension at which the ``uncorrected_copy`` clause is checked, per dtype.  An honest
#: correction coincides with a child bit for bit with probability about ``K (eps (1 + rho))^dim``
#: per row (``eps`` the dtype's, ``rho = ||mu_draft||/sigma <= 1e4``): below 1e-11 for float64 at any
#: dim, for float32 from dim 4 on, for bfloat16 (whose nodes have ``rho <= 1``) from dim 8 on.
COPY_CHECK_MIN_DIM = {"float64": 1, "float32": 4, "bfloat16": 8}


def copy_check_applies(dtype_name, dim) -> bool:
    """Whether the ``uncorrected_copy`` clause is checked for a pass (:data:`COPY_CHECK_MIN_DIM`)."""
    return dim >= COPY_CHECK_MIN_DIM.get(dtype_name, 1)


class CallChecker:
    """Contract check of one verifier call, with the harness's extra clauses.

    Records per-row validity, acceptance and the committed states of a chunk whose rows are
    verified in several calls.  A call that raises, or whose output has a whole-array problem,
    invalidates its rows; row problems invalidate the row.  Beyond ``check_contract``: a row
    marked not accepted whose state equals one of its children bit for bit is an
    ``uncorrected_copy`` (an exact rule's correction is a continuous draw).
    """

    def __init__(self, n, dim, dtype_name):
        self.dim = dim
        self.states = np.zeros((n, dim))
        self.valid = np.zeros(n, bool)
        self.accepted = np.zeros(n, bool)
        self.violations = np.zeros(len(VIOLATION_KINDS), np.int64)
        self.messages = []
        self.dtype_name = dtype_name
        self.returned = False   # some call returned a result

    def _note(self, kind, rows, message):
        self.violations[VIOLATION_KINDS.index(kind)] += int(rows)
        if len(self.messages) < MAX_MESSAGES and message not in self.messages:
            self.messages.append(message)

    def raised(self, a, b, exc, kind=None, where=""):
        kind = kind or _raised_kind(exc)
        what = "wrote into its read-only inputs" if kind == "mutated_input" else "raised"
        self._note(kind, b - a, f"[{kind}] verifier {what} on a batch of {b - a} row(s) ({self.dtype_name} "
                                f"inputs){where}: {type(exc).__name__}: {exc}")

    def record(self, a, b, result, children, expected_dtype=None):
        """Check ``result`` of the call on rows ``a:b`` against ``children`` (NumPy, the dtype given).

        ``expected_dtype``: the inputs' dtype, which ``states`` must have (``states_dtype``
        otherwise; the torch runner checks the tensor's dtype itself and passes ``None``).
        """
        n = b - a
        self.returned = True
        try:
            issues = _check_contract(result, children)
        except Exception as exc:  # noqa: BLE001 - a malformed result fails the run, not the harness
            self._note("other", n, f"[other] contract check failed on a batch of {n} row(s): {exc}")
            return
        for issue in issues:
            kind = issue.kind if issue.kind in VIOLATION_KINDS else "other"
            self._note(kind, issue.n_rows, f"{issue} (batch of {n} row(s), {self.dtype_name})")
        if any(i.kind in _WHOLE_ARRAY_KINDS for i in issues):
            return
        states = np.asarray(result.states)
        if expected_dtype is not None and states.dtype != np.dtype(expected_dtype):
            self._note("states_dtype", n, f"[states_dtype] result.states has dtype {states.dtype} for "
                                          f"{np.dtype(expected_dtype)} inputs: states must keep the inputs' dtype "
                                          f"(batch of {n} row(s))")
            return
        accepted = np.asarray(result.accepted, dtype=bool)
        index = np.asarray(result.child_index)
        K = children.shape[1]
        valid = np.isfinite(states).all(axis=1) & (index >= -1) & (index < K) & (accepted == (index != -1))
        rows = np.flatnonzero(valid & accepted)
        same = (states[rows] == children[rows, index[rows]]).all(axis=1)
        valid[rows[~same]] = False
        rej = np.flatnonzero(valid & ~accepted) if copy_check_applies(self.dtype_name, self.dim) else []
        if len(rej):   # a cheap first-coordinate screen, then the full comparison on the candidates only
            cand = rej[(states[rej, None, 0] == children[rej, :, 0]).any(axis=1)]
            copy = np.zeros(len(rej), bool)
            if cand.size:
                copy[np.searchsorted(rej, cand)] = (states[cand, None, :] == children[cand]).all(axis=2).any(axis=1)
            if copy.any():
                self._note("uncorrected_copy", int(copy.sum()),
                           f"[uncorrected_copy] {int(copy.sum())} row(s) marked not accepted return one of "
                           f"their children unchanged (batch of {n} row(s), {self.dtype_name})")
                valid[rej[copy]] = False
        self.states[a:b] = states
        self.valid[a:b] = valid
        self.accepted[a:b] = accepted


def draw_chunk(node, spec):
    """The chunk's nodes and children (float64): ``(RowNodes, children (n, K, dim))``.

    Nodes from stream ``sub_seed(spec.seed, 2)``, children ``mu_draft + sigma N(0, I)`` from
    ``sub_seed(spec.seed, 0)``.  Rows of each small batch share one ``sigma`` (it is passed to the
    verifier as a Python float there, exercising the scalar form of the contract).
    """
    rows = node.draw(np.random.default_rng(sub_seed(spec.seed, 2)), spec.n, spec.dtype)
    for a, b in call_batches(spec)[:-1]:
        ratio = rows.sigma[a] / rows.sigma[a:b]
        rows.sigma[a:b] = rows.sigma[a]
        rows.mu_target[a:b] = rows.mu_draft[a:b] + ratio[:, None] * (rows.mu_target[a:b] - rows.mu_draft[a:b])
    children = np.random.default_rng(sub_seed(spec.seed, 0)).standard_normal((spec.n, node.K, node.dim))
    children *= rows.sigma[:, None, None]
    children += rows.mu_draft[:, None, :]
    return rows, children


def _fallback_e(rows, node):
    """The drawn unit directions of the rows selected by a mask (only computed for rows whose cast
    means coincide: ``mask -> (k, d)``)."""

    def directions(mask):
        diff = rows.mu_target[mask] - rows.mu_draft[mask]
        norm = np.linalg.norm(diff, axis=1)
        e = np.zeros_like(diff)
        e[:, 0] = 1.0
        nz = norm > 0
        e[nz] = diff[nz] / norm[nz, None]
        return e

    return directions


#: Regimes a failing batch is split into to say where a verifier raises (``failure_regimes``).
REGIME_SPLITS = (("tiny delta (< 0.01)", lambda d, r: d < 0.01), ("large delta (>= 4.5)", lambda d, r: d >= 4.5),
                 ("||mu_draft||/sigma >= 1000 (ordinary delta)", lambda d, r: (r >= 1000) & (d >= 0.01) & (d < 4.5)),
                 ("||mu_draft||/sigma = 0 (ordinary delta)", lambda d, r: (r == 0) & (d >= 0.01) & (d < 4.5)),
                 ("ordinary rows (0.01 <= delta < 4.5, 0 < ||mu_draft||/sigma < 1000)",
                  lambda d, r: (d >= 0.01) & (d < 4.5) & (r > 0) & (r < 1000)))


def failure_regimes(call, delta, rho, dim) -> str:
    """Where a verifier raises: re-run ``call(index_array)`` on each regime's rows of a failing batch.

    Returns ``" (raises on <regimes>; not on <regimes>; dim <d>)"`` for the message, so that a
    verifier that breaks only on tiny deltas, huge draft means or a large dimension says so.
    The verifier's exceptions are caught here as well (never crash the harness).
    """
    bad, good = [], []
    for label, select in REGIME_SPLITS:
        idx = np.flatnonzero(select(delta, rho))
        if idx.size == 0:
            continue
        try:
            call(idx)
        except Exception:  # noqa: BLE001 - a diagnosis, not a verdict
            bad.append(label)
        else:
            good.append(label)
    if not bad and not good:
        return ""
    text = f" (raises on {', '.join(bad) or 'no single regime'}"
    return text + (f"; not on {', '.join(good)}" if good else "") + f"; dim {dim})"


#: Rows of each of the two calls of the calls-in-sequence probe (per chunk).
PROBE_ROWS = 1000


def probe_children(node, rows, spec, m, j):
    """Fresh float64 children of the chunk's first ``m`` nodes for probe call ``j`` (stream ``sub_seed(seed, 3 + j)``)."""
    noise = np.random.default_rng(sub_seed(spec.seed, 3 + j)).standard_normal((m, node.K, node.dim))
    noise *= rows.sigma[:m, None, None]
    noise += rows.mu_draft[:m, None, :]
    return noise


def _numpy_rng_state(rng):
    bg = getattr(rng, "bit_generator", None)
    if bg is None:
        return None
    seq = getattr(bg, "seed_seq", None)
    return (repr(bg.state), getattr(seq, "n_children_spawned", None))


def _snapshot(result):
    return {k: np.array(getattr(result, k), copy=True) for k in ("states", "accepted", "child_index")
            if hasattr(result, k)}


def _unchanged(result, snap) -> bool:
    return all(np.array_equal(np.asarray(getattr(result, k)), v, equal_nan=True) for k, v in snap.items())


def sequence_probe(call, checker, m, state_of, snapshot, unchanged, states_of):
    """Two consecutive verifier calls on the same ``m`` nodes with fresh children and one generator.

    ``call(j)`` makes probe call ``j`` (0 or 1) and returns its result; ``state_of()`` reads the
    generator's state, ``snapshot``/``unchanged`` copy a result and compare it with its copy,
    ``states_of(result)`` returns its states as a float64 NumPy array (``None`` if unusable).
    Named contract failures (counted once per probe): ``rng_not_advanced`` (the generator's state,
    spawn count included, is the same before and after call 0: the verifier reseeded or drew from
    a copy), ``result_aliased`` (call 0's result changed when call 1 ran: a view of a reused
    buffer), ``sequence_raised``.  Returns the two calls' states, or ``None``.
    """
    outs = []
    for j in range(2):
        before = state_of()
        try:
            res = call(j)
        except Exception as exc:  # noqa: BLE001 - the verifier's failure is a verdict
            checker._note("sequence_raised", 1, f"[sequence_raised] verifier raised on the second of two consecutive "
                                                f"calls ({checker.dtype_name}): {type(exc).__name__}: {exc}")
            return None
        if j == 0:
            if before is not None and state_of() == before:
                checker._note("rng_not_advanced", 1,
                              f"[rng_not_advanced] the caller's generator is in the same state after a call on "
                              f"{m} rows ({checker.dtype_name}): the verifier must draw from the rng it is given "
                              f"(not reseed, not draw from a copy)")
            try:
                snap = snapshot(res)
            except Exception:  # noqa: BLE001 - malformed results are counted by the main calls
                return None
        outs.append(res)
    try:
        if not unchanged(outs[0], snap):
            checker._note("result_aliased", 1, f"[result_aliased] a call's result changed when the next call ran "
                                               f"({checker.dtype_name}): results must not share memory with the "
                                               f"verifier's buffers")
        return [states_of(r) for r in outs]
    except Exception:  # noqa: BLE001
        return None


def _probe_states(result, m, dim):
    try:
        st = np.asarray(result.states, dtype=np.float64)
    except Exception:  # noqa: BLE001
        return None
    return st if st.shape == (m, dim) else None


def probe_sums(node, frame, probe_states):
    """:func:`~rass_theory.stats.rowstats.sequence_sums` of the probe's two calls (``(0, zeros)`` if unusable)."""
    from .rowstats import sequence_sums

    if probe_states is None or any(s is None for s in probe_states):
        return 0, np.zeros(len(INDEP_STATS))
    a, b = probe_states
    ok = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    return sequence_sums(node, frame.take(slice(0, a.shape[0])), a, b, ok)


def run_chunk_numpy(verifier, node: SyntheticNode, spec: ChunkSpec) -> ExactnessCounts:
    """Run one chunk on the CPU with NumPy.

    Draws the chunk (:func:`draw_chunk`), casts children and means to ``spec.dtype``, makes them
    read-only, and calls ``verifier(children, mu_draft, mu_target, sigma, rng)`` on each batch of
    :func:`call_batches` with one ``rng = default_rng(sub_seed(spec.seed, 1))``; ``sigma`` is an
    ``(m,)`` array on the main batch and a Python float on the small ones.  Exceptions raised by the
    verifier are recorded as violations naming the batch size and dtype (``KeyboardInterrupt``
    propagates).  Returns the chunk's :func:`~rass_theory.stats.rowstats.counts_from_rows`.
    """
    dt = _numpy_dtype(spec.dtype)
    rows, children64 = draw_chunk(node, spec)
    children = children64.astype(dt, copy=False)
    md, mt, sig = rows.mu_draft.astype(dt), rows.mu_target.astype(dt), rows.sigma.astype(dt)
    for arr in (children, md, mt, sig):
        arr.setflags(write=False)
    rng = np.random.default_rng(sub_seed(spec.seed, 1))
    checker = CallChecker(spec.n, node.dim, spec.dtype)
    calls = call_batches(spec)
    for j, (a, b) in enumerate(calls):
        sigma = sig[a:b] if j == len(calls) - 1 else float(sig[a])
        try:
            result = verifier(children[a:b], md[a:b], mt[a:b], sigma, rng)
        except Exception as exc:  # noqa: BLE001 - the verifier's failure is a verdict, not a crash
            where = ""
            if j == len(calls) - 1 and _raised_kind(exc) == "raised" and b - a > 1:
                delta = np.asarray(node.deltas)[rows.group[a:b]]
                rho = np.sqrt(np.einsum("nd,nd->n", rows.mu_draft[a:b], rows.mu_draft[a:b])) / rows.sigma[a:b]
                where = failure_regimes(lambda i: verifier(children[a:b][i], md[a:b][i], mt[a:b][i], sig[a:b][i],
                                                           np.random.default_rng(0)), delta, rho, node.dim)
            checker.raised(a, b, exc, where=where)
            continue
        checker.record(a, b, result, children[a:b], dt)
    m = min(PROBE_ROWS, spec.n) if checker.returned else 0   # no probe of a verifier that always raises
    probe = [probe_children(node, rows, spec, m, j).astype(dt) for j in range(2)]
    for arr in probe:
        arr.setflags(write=False)
    states = None if m == 0 else sequence_probe(lambda j: verifier(probe[j], md[:m], mt[:m], sig[:m], rng), checker, m,
                            lambda: _numpy_rng_state(rng), _snapshot, _unchanged,
                            lambda r: _probe_states(r, m, node.dim))
    frame = node.frame(md, mt, sig, _fallback_e(rows, node))
    return counts_from_rows(node, frame, checker.states, checker.valid, checker.accepted, rows.group,
                            checker.violations, checker.messages, spec.keep, calls[-1:],
                            probe_sums(node, frame, states))


def numpy_chunk_stream(verifier, node, specs, cfg: HarnessConfig):
    """The NumPy chunk stream: :func:`run_chunk_numpy` on every spec, in order.

    A chunk stream is ``(verifier, node, specs, cfg) -> iterator of ExactnessCounts``, one per
    spec in spec order.  The torch and Dask streams live above this package
    (:func:`rass_theory.torch.harness.torch_chunk_stream`,
    :func:`rass_theory.scale.dask_backend.dask_chunk_stream`) and are picked by backend name in
    :mod:`rass_theory.scale.check` (``rt.check_exactness``), which hands them down here.
    """
    for spec in specs:
        yield run_chunk_numpy(verifier, node, spec)


#: the chunk stream of the running :func:`certify` call (``stats/certify.py`` calls
#: :func:`collect_counts` without one)
def resolve_chunk_stream(cfg: HarnessConfig, chunk_stream=None):
    """``chunk_stream`` if given, else the NumPy stream; a ``"torch"``/``"dask"`` config needs its
    stream from :mod:`rass_theory.scale.check` (this package does not import those backends)."""
    if chunk_stream is not None:
        if not callable(chunk_stream):
            raise TypeError(f"chunk_stream must be callable (verifier, node, specs, cfg), "
                            f"got {type(chunk_stream).__name__}")
        return chunk_stream
    if cfg.backend != "numpy":
        raise ValueError(f"backend={cfg.backend!r} runs through rass_theory.check_exactness / rass_theory.certify "
                         f"(rass_theory.scale.check), which supplies its chunk runner; rass_theory.stats runs "
                         f"backend='numpy' only")
    return numpy_chunk_stream


def run_plan(cfg: HarnessConfig, start: int = 0) -> list:
    """Every chunk of every dtype pass, in run order, from global position ``start`` on."""
    specs = []
    for p, dt in enumerate(cfg.dtypes):
        specs += chunk_plan(cfg.n_samples, cfg.chunk_size, cfg.seed, cfg.two_sample_size if p == 0 else 0,
                            dtype=dt, pass_index=p)
    return specs[start:]


def collect_counts(verifier, cfg: HarnessConfig, node: SyntheticNode | None = None, chunk_stream=None):
    """Run (or resume) every chunk of every pass; return ``(counts per pass, first position run here)``.

    ``chunk_stream`` runs the chunks (:func:`resolve_chunk_stream`; default: NumPy).

    With ``cfg.checkpoint`` set, the merged counts are saved atomically every
    ``cfg.checkpoint_every`` chunks, at the end, and when the loop is interrupted by any exception
    (``KeyboardInterrupt`` included), which is then re-raised.
    """
    chunk_stream = resolve_chunk_stream(cfg, chunk_stream)
    node = node or build_node(cfg)
    total = len(cfg.dtypes) * n_chunks_of(cfg.n_samples, cfg.chunk_size)
    fingerprint = cfg.fingerprint()
    counts, start = [ExactnessCounts.empty(node) for _ in cfg.dtypes], 0
    if cfg.checkpoint is not None:
        loaded = load_checkpoint(cfg.checkpoint, fingerprint, node, len(cfg.dtypes))
        if loaded is not None:
            counts, start, complete = loaded
            if complete or start >= total:
                return counts, total
    specs = run_plan(cfg, start)
    position, since_save = start, 0
    stream = chunk_stream(verifier, node, specs, cfg)
    t0 = time.perf_counter()
    try:
        for spec, part in zip(specs, stream):
            if part.n_rows != spec.n:
                raise RuntimeError(f"chunk runner returned {part.n_rows} rows for chunk {spec.index} of {spec.n}")
            counts[spec.pass_index] = counts[spec.pass_index].merge(part)
            position += 1
            since_save += 1
            if cfg.checkpoint is not None and since_save >= cfg.checkpoint_every and position < total:
                save_checkpoint(cfg.checkpoint, counts, position, fingerprint)
                since_save = 0
            if cfg.progress:
                rate = sum(c.n_rows for c in counts) / max(time.perf_counter() - t0, 1e-9)
                print(f"\rchunk {position}/{total}  {rate:,.0f} samples/s", end="", file=sys.stderr)
    except BaseException:
        if cfg.checkpoint is not None and position > start:
            save_checkpoint(cfg.checkpoint, counts, position, fingerprint)
        raise
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        if cfg.progress:
            print(file=sys.stderr)
    if position != total:
        raise RuntimeError(f"chunk runner stopped after chunk {position} of {total}")
    if cfg.checkpoint is not None:
        save_checkpoint(cfg.checkpoint, counts, total, fingerprint, complete=True)
    return counts, start


# ---------------------------------------------------------------------------------------------
# evaluation
def _prefix(p: int, cfg: HarnessConfig) -> str:
    return "" if p == 0 else f"{cfg.dtypes[p]}:"


def test_names(cfg: HarnessConfig) -> list:
    """Names of the Holm family's tests, in order (``raw_tests`` returns exactly these)."""
    names = []
    has_expected = any(not math.isnan(x) for x in cfg.expected)
    for p in range(len(cfg.dtypes)):
        pre = _prefix(p, cfg)
        hist = ["s"]
        if cfg.dim > 1:
            hist += ["rperp"] + [f"dir{j}" for j in range(cfg.n_directions)] + (["diag"] if cfg.n_directions else [])
        for h in hist:
            names += [f"{pre}{h}_ks", f"{pre}{h}_chi2", f"{pre}{h}_chi2_fine"]
        if cfg.dim > 1:
            names.append(f"{pre}joint_chi2")
            if cfg.n_directions:
                names.append(f"{pre}joint_s_dir0_chi2")
            names += [f"{pre}xcov_s", f"{pre}xcov_s2"]
        names.append(f"{pre}proj_ks")
        names += [f"{pre}indep_half", f"{pre}indep_next", f"{pre}indep_calls", f"{pre}repeats"]
        if has_expected:
            names.append(f"{pre}acceptance_binomial")
        names.append(f"{pre}acceptance_bound")
        if p == 0 and cfg.two_sample_size:
            names.append("energy_two_sample")
    return names


def _tails_apply(stat, dim, n_directions) -> bool:
    return stat == "t" or (dim > 1 and (stat == "r" or n_directions > 0))


def tail_test_names(dim, n_directions, prefix="") -> list:
    """Names of the far-tail tests (pooled over every pass of the run)."""
    return [f"{prefix}{sel}{name}" for sel in ("", "large_delta:") for name, stat, _, _ in TAILS
            if _tails_apply(stat, dim, n_directions)]


def tail_tests(counts, dim, n_directions, prefix="") -> list:
    """Exact binomial tests of the far-tail counts, pooled over ``counts`` (any passes and cells).

    Every valid row's statistic has the same null law whatever its node, so the pooled count is
    ``Binomial(rows, p)`` with ``p`` from :func:`~rass_theory.stats.rowstats.tail_probability`; the
    ``large_delta:`` tests count only rows with ``delta >= 2``.
    """
    total = sum(c.tail_counts for c in counts)
    rows = sum(c.tail_rows for c in counts)
    out = []
    for col, sel in enumerate(("", "large_delta:")):
        for k, (name, stat, side, thr) in enumerate(TAILS):
            if not _tails_apply(stat, dim, n_directions):
                continue
            p = tail_probability(side, thr)
            kk, nn = int(total[k, col]), int(rows[col])
            t = T.binomial_test(kk, nn, p) if nn else T.TestStatistic(float("nan"), float("nan"), "no rows")
            out.append((f"{prefix}{sel}{name}", T.TestStatistic(t.statistic, t.pvalue,
                                                                f"{kk} of {nn} rows beyond, expected {nn * p:.3g}")))
    return out


def _family_size(cfg: HarnessConfig, with_tails: bool = True) -> int:
    return len(test_names(cfg)) + (len(tail_test_names(cfg.dim, cfg.n_directions)) if with_tails else 0)


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
            (f"{prefix}_chi2_fine", T.binned_chisquare_test(counts, n_bins, min_expected=5, min_rows=T.MIN_FINE_ROWS))]


def _pass_tests(c: ExactnessCounts, node: SyntheticNode, cfg: HarnessConfig, pre: str) -> list:
    B = node.n_bins
    out = _histogram_tests(f"{pre}s", c.s_counts, B)
    if node.dim > 1:
        out += _histogram_tests(f"{pre}rperp", c.r_counts, B)
        for j in range(node.n_directions):
            out += _histogram_tests(f"{pre}dir{j}", c.dir_counts[j], B)
        if node.n_directions:
            out += _histogram_tests(f"{pre}diag", c.diag_counts, B)
        out.append((f"{pre}joint_chi2", T.joint_chisquare_test(c.joint_counts, B)))
        if node.n_directions:
            out.append((f"{pre}joint_s_dir0_chi2", T.joint_chisquare_test(c.joint_sd_counts, B)))
        out.append((f"{pre}xcov_s", T.studentised_form_test(c.xcov_sums[0], c.xcov_matrix[0], "sum t P z_perp: ")))
        out.append((f"{pre}xcov_s2", T.studentised_form_test(c.xcov_sums[1], c.xcov_matrix[1],
                                                              "sum (t^2-1) P z_perp: ")))
    out.append((f"{pre}proj_ks", T.projection_ks_test(c.proj_counts)))
    for p, label in enumerate(("half", "next")):
        active = [q for q, nm in enumerate(INDEP_STATS) if nm == "s" or node.dim > 1 and
                  (nm == "rperp" or node.n_directions)]
        out.append((f"{pre}indep_{label}", T.independence_test(c.indep_sums[p, active], int(c.indep_pairs[p]), B,
                                                               [INDEP_STATS[q] for q in active])))
    out.append((f"{pre}indep_calls", T.independence_test(c.seq_sums[active], int(c.seq_pairs[0]), B,
                                                          [INDEP_STATS[q] for q in active])))
    if pre.startswith("bfloat16"):  # bfloat16 nodes and states live on a lattice: repeats are expected
        repeats = T.TestStatistic(float("nan"), float("nan"), "not run on the bfloat16 lattice")
    else:
        repeats = T.poisson_excess_test(int(c.repeat_counts.sum()), float(c.repeat_expected.sum()),
                                        "values closer than 1e-11 within a call: ")
    out.append((f"{pre}repeats", repeats))
    labels = [f"{d:g}" for d in cfg.deltas]
    k, n = c.group_accepted.tolist(), c.group_rows.tolist()
    if any(not math.isnan(x) for x in cfg.expected):
        out.append((f"{pre}acceptance_binomial", T.grouped_binomial_test(k, n, list(cfg.expected), labels)))
    out.append((f"{pre}acceptance_bound", T.bound_exceedance_test(k, n, list(cfg.bounds), labels)))
    return out


def raw_tests(counts, node: SyntheticNode, cfg: HarnessConfig) -> list:
    """``[(name, TestStatistic)]`` of every statistical test of the family, raw p-values."""
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    out = []
    for p, c in enumerate(counts):
        out += _pass_tests(c, node, cfg, _prefix(p, cfg))
        if p == 0 and cfg.two_sample_size:
            m = c.subsample.shape[0]
            target = np.random.default_rng(stream_seed(cfg.seed, TARGET_KEY)).standard_normal((max(m, 2), node.dim))
            perm_rng = np.random.default_rng(stream_seed(cfg.seed, PERMUTATION_KEY))
            out.append(("energy_two_sample", T.energy_test(c.subsample, target[:m], _n_permutations(cfg), perm_rng)))
    return out


def _sequence_failures(counts) -> int:
    idx = [VIOLATION_KINDS.index(k) for k in SEQUENCE_KINDS]
    return int(sum(int(c.violations[idx].sum()) for c in counts))


def contract_violated(counts) -> bool:
    """Some row broke the contract, or the calls-in-sequence probe found a named failure."""
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    return any(c.n_rows != c.n_valid for c in counts) or _sequence_failures(counts) > 0


def contract_test(counts) -> StatisticalTest:
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    rows = sum(c.n_rows for c in counts)
    bad = sum(c.n_rows - c.n_valid for c in counts)
    ok = bad == 0 and rows > 0 and _sequence_failures(counts) == 0
    if ok:
        detail = "all rows satisfy the verifier contract"
    else:
        viol, msgs = {}, []
        for c in counts:
            for k, v in c.violation_dict().items():
                viol[k] = viol.get(k, 0) + v
            msgs += [m for m in c.messages if m not in msgs]
        detail = (f"{bad} of {rows} rows broke the contract, {_sequence_failures(counts)} sequence probe(s) failed: "
                  f"{viol}; " + " | ".join(msgs[:MAX_MESSAGES]))
    return StatisticalTest("contract", float(bad), 1.0 if ok else 0.0, 1.0 if ok else 0.0, ok, detail)


def make_report(counts, node, cfg, raw, p_adjusted, reject, elapsed, start_chunk, n_family=None) -> ExactnessReport:
    """Assemble the report from raw tests and their (family-wise) adjusted p-values.

    ``n_family`` is the size of the Holm family (default ``len(raw)``; the grid's for ``certify``).
    """
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    tests = []
    for (name, t), p_adj, rej in zip(raw, p_adjusted, reject):
        ran = not math.isnan(t.pvalue)
        # a test that could not run (too few rows, nothing declared) does not fail the run by itself;
        # no valid rows at all means every row broke the contract, which fails it
        tests.append(StatisticalTest(name, t.statistic, t.pvalue, float(p_adj), bool(not ran or not rej), t.detail))
    tests.append(contract_test(counts))
    c0 = counts[0]
    n_named, k_named = int(c0.group_rows[0]), int(c0.group_accepted[0])
    rate = k_named / n_named if n_named else float("nan")
    ci = T.clopper_pearson(k_named, n_named, 1 - cfg.alpha)
    detectable = (detectable_ks_distance(c0.n_valid, cfg.alpha, max(n_family or len(raw), 1), cfg.false_pass_rate,
                                         node.n_bins)
                  if c0.n_valid else float("inf"))
    valid = sum(c.n_valid for c in counts)
    corrections = 1.0 - sum(c.n_accepted for c in counts) / valid if valid else float("nan")
    groups = tuple((d, int(n), (int(k) / int(n)) if n else float("nan"), e)
                   for d, n, k, e in zip(cfg.deltas, c0.group_rows, c0.group_accepted, cfg.expected))
    passed = all(t.passed for t in tests)
    violations = {}
    messages = []
    for c in counts:
        for k, v in c.violation_dict().items():
            violations[k] = violations.get(k, 0) + v
        messages += [m for m in c.messages if m not in messages]
    return ExactnessReport(passed, tuple(tests), rate, ci, cfg.expected_acceptance, c0.n_rows, c0.n_valid,
                           cfg.alpha, detectable, cfg.false_pass_rate, elapsed, cfg.seed, cfg.K, cfg.delta,
                           cfg.dim, cfg.sigma, cfg.backend, cfg.verifier_name, violations,
                           tuple(messages[:MAX_MESSAGES]), start_chunk, c0, dtypes=cfg.dtypes,
                           correction_fraction=corrections, groups=groups,
                           named_share=float(node.group_probs[0]), pass_counts=tuple(counts),
                           regime=node.describe_regime())


# ---------------------------------------------------------------------------------------------
# public entry points
def check_exactness(verifier, K=None, delta=None, dim=None, n_samples=None, alpha=1e-3, rng=None,
                    expected_acceptance=None, *, sigma=None, chunk_size=DEFAULT_CHUNK_SIZE, n_directions=None,
                    n_bins=DEFAULT_N_BINS, two_sample_size=DEFAULT_TWO_SAMPLE_SIZE, n_permutations=None,
                    false_pass_rate=0.01, backend="numpy", device=None, backend_options=None,
                    checkpoint=None, checkpoint_every=5, progress=False, dtype=None, chunk_stream=None,
                    regime=None, detect=None, stop_early=True):
    """The exactness harness behind ``rt.check_exactness``, with its chunk runner as a parameter.

    The public entry is :func:`rass_theory.scale.check.check_exactness` (``rt.check_exactness``),
    whose docstring gives the parameters, the result and the tests: it picks the chunk stream of
    ``backend`` and calls this function.  Called directly (``chunk_stream=None``) this runs
    ``backend="numpy"``; ``backend="torch"`` or ``"dask"`` needs the backend's ``chunk_stream``
    (``(verifier, node, specs, cfg) -> iterator of ExactnessCounts``, see
    :func:`resolve_chunk_stream`) and raises ``ValueError`` without one.  The arguments are
    validated (with the same errors) before the chunk stream is looked at.
    """
    if K is None or delta is None:
        from .certify import default_cells

        regime = check_regime(regime)
        cells = default_cells(verifier, K=K, delta=delta, dim=dim, regime=regime)
        return certify(verifier, cells, n_samples=n_samples, alpha=alpha, rng=rng,
                       expected_acceptance=expected_acceptance, sigma=sigma, chunk_size=chunk_size,
                       n_directions=n_directions, n_bins=n_bins, two_sample_size=two_sample_size,
                       n_permutations=n_permutations, false_pass_rate=false_pass_rate, backend=backend,
                       device=device, backend_options=backend_options, checkpoint=checkpoint,
                       checkpoint_every=checkpoint_every, progress=progress, dtype=dtype, show=False,
                       chunk_stream=chunk_stream, regime=regime, detect=detect, stop_early=stop_early)
    t0 = time.perf_counter()
    regime = check_regime(regime)
    detect = check_detect(detect, n_bins)
    dim = 8 if dim is None else dim
    cfg = _config(verifier, K, delta, dim, DEFAULT_N_SAMPLES if n_samples is None else n_samples, alpha, rng,
                  expected_acceptance, sigma, chunk_size, n_directions, n_bins, two_sample_size, n_permutations,
                  false_pass_rate, backend, device, backend_options, checkpoint, checkpoint_every, progress,
                  DEFAULT_DTYPES if dtype is None else dtype, regime=regime)
    if detect is not None:
        from dataclasses import replace

        from .power import samples_for_distance

        m = _family_size(cfg)
        n_design = max(2, samples_for_distance(detect, cfg.alpha, m, cfg.false_pass_rate, cfg.n_bins))
        cfg = replace(cfg, n_samples=n_design)
        print(f"check_exactness: detect={detect:g} -> n = {n_design:,} rows per dtype pass: detects a pooled KS "
              f"distance >= {detectable_ks_distance(n_design, cfg.alpha, m, cfg.false_pass_rate, cfg.n_bins):.4g} "
              f"with probability >= {1 - cfg.false_pass_rate:g} at family-wise false-fail rate {cfg.alpha:g} "
              f"(Holm over m = {m} tests)", file=sys.stderr)
    chunk_stream = resolve_chunk_stream(cfg, chunk_stream)
    if rng is None:
        print(f"check_exactness: random seed {cfg.seed} (pass rng={cfg.seed} to reproduce)", file=sys.stderr)
    node = build_node(cfg)
    counts, start = collect_counts(verifier, cfg, node, chunk_stream)
    raw = raw_tests(counts, node, cfg) + tail_tests(counts, node.dim, node.n_directions)
    reject, p_adj = T.holm([t.pvalue for _, t in raw], cfg.alpha)
    return make_report(counts, node, cfg, raw, p_adj, reject, time.perf_counter() - t0, start)


def certify(verifier, cells=None, *, chunk_stream=None, **kwargs):
    """Run :func:`check_exactness` over a grid with the family-wise error held across it.

    See :func:`rass_theory.stats.certify.certify`; the public entry, which picks the chunk
    stream of ``backend``, is :func:`rass_theory.scale.check.certify` (``rt.certify``).
    ``chunk_stream`` as for :func:`check_exactness` (``None``: NumPy), used for every cell.
    """
    from .certify import certify as _certify

    return _certify(verifier, cells, chunk_stream=chunk_stream, **kwargs)
