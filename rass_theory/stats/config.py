"""Configuration of the exactness harness: every option once, validated once.

:data:`OPTION_DEFAULTS` names every option of ``rt.check_exactness`` / ``rt.certify`` with its
default; :func:`harness_config` validates them for one cell ``(K, delta, dim)`` into a frozen
:class:`HarnessConfig`, which everything downstream (chunk running, test assembly, report
building, checkpoints) reads.
"""
from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int, check_probability
from .checkpoint import FORMAT_VERSION
from .node import DTYPES, SyntheticNode

__all__ = ["HarnessConfig", "OPTION_DEFAULTS", "harness_config", "check_options", "build_node", "verifier_name",
           "seed_entropy", "check_regime", "check_detect", "check_dtypes", "resolve_expected_acceptance",
           "DEFAULT_N_SAMPLES", "DEFAULT_CHUNK_SIZE", "DEFAULT_N_BINS", "DEFAULT_TWO_SAMPLE_SIZE", "DEFAULT_DTYPES",
           "HARNESS_BACKENDS"]

#: Rows per dtype pass of one cell.  The default grid (6 cells x 2 dtypes) of an exact rule runs
#: in under a minute on two cores (``bench/harness_mutants.py`` prints the time per cell) and
#: rejects every mutant of :mod:`rass_theory.mutants`.
DEFAULT_N_SAMPLES = 200_000
DEFAULT_CHUNK_SIZE = 100_000
DEFAULT_N_BINS = 4096
DEFAULT_TWO_SAMPLE_SIZE = 400
DEFAULT_DTYPES = ("float64", "float32")
N_CHI2_BINS = 32
#: chunk runners of the harness (``backend=``): NumPy, torch, Dask
HARNESS_BACKENDS = ("numpy", "torch", "dask")



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


def seed_entropy(rng) -> int:
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


def _dtype_name(dtype) -> str | None:
    """The name of a NumPy or torch floating dtype (``np.float32``, ``np.dtype("float64")``,
    ``torch.bfloat16``), ``None`` for anything else (names are checked by the caller)."""
    if isinstance(dtype, str):
        return None
    if type(dtype).__module__.startswith("torch") and type(dtype).__name__ == "dtype":
        return str(dtype).removeprefix("torch.")
    try:
        dt = np.dtype(dtype) if isinstance(dtype, (np.dtype, type)) else None
    except TypeError:
        return None
    return None if dt is None else dt.name


def check_dtypes(dtype, backend) -> tuple:
    """Validate the ``dtype`` argument: one name or a sequence of names from ``DTYPES`` (a NumPy
    or torch dtype, such as ``np.float32`` or ``torch.bfloat16``, stands for its name)."""
    names = (dtype,) if isinstance(dtype, str) or _dtype_name(dtype) else dtype
    try:
        names = tuple(names)
    except TypeError:
        raise TypeError(f"dtype must be a dtype name or a sequence of them, got {dtype!r}") from None
    names = tuple(_dtype_name(nm) or nm for nm in names)
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


#: Every option of the harness with its default, written once: ``rt.check_exactness``,
#: ``rt.certify``, :func:`rass_theory.testing.assert_exact` and the command line take these names
#: (``**options``) and :func:`harness_config` / :func:`check_options` validate them.
OPTION_DEFAULTS = {
    "n_samples": None, "alpha": 1e-3, "rng": None, "expected_acceptance": None, "sigma": None,
    "chunk_size": DEFAULT_CHUNK_SIZE, "n_directions": None, "n_bins": DEFAULT_N_BINS,
    "two_sample_size": DEFAULT_TWO_SAMPLE_SIZE, "n_permutations": None, "false_pass_rate": 0.01,
    "backend": "numpy", "device": None, "backend_options": None, "checkpoint": None, "checkpoint_every": 5,
    "progress": False, "dtype": None, "regime": None, "detect": None, "stop_early": True,
}


def check_options(options: dict, where: str = "check_exactness", extra=()) -> dict:
    """``options`` completed with :data:`OPTION_DEFAULTS`; an unknown name is a ``TypeError``.

    ``extra`` names further keywords the caller accepts (e.g. ``certify``'s ``show``).
    """
    unknown = set(options) - set(OPTION_DEFAULTS) - set(extra)
    if unknown:
        raise TypeError(f"{where} got unexpected keyword argument(s) {sorted(unknown)}; "
                        f"options: {', '.join(OPTION_DEFAULTS)}")
    return {**OPTION_DEFAULTS, **options}


def harness_config(verifier, K, delta, dim, **options) -> HarnessConfig:
    """The validated :class:`HarnessConfig` of one cell ``(K, delta, dim)``.

    ``options`` are names of :data:`OPTION_DEFAULTS` (``detect`` and ``stop_early`` are the entry
    points' and not stored); ``n_samples=None`` means :data:`DEFAULT_N_SAMPLES`, ``dtype=None``
    :data:`DEFAULT_DTYPES`.  Bad input raises ``TypeError``/``ValueError`` naming the argument.
    """
    o = check_options(options, "harness_config")
    n_samples = DEFAULT_N_SAMPLES if o["n_samples"] is None else o["n_samples"]
    dtype = DEFAULT_DTYPES if o["dtype"] is None else o["dtype"]
    regime = check_regime(o["regime"])
    alpha, rng, expected_acceptance, sigma = o["alpha"], o["rng"], o["expected_acceptance"], o["sigma"]
    chunk_size, n_directions, n_bins = o["chunk_size"], o["n_directions"], o["n_bins"]
    two_sample_size, n_permutations, false_pass_rate = o["two_sample_size"], o["n_permutations"], o["false_pass_rate"]
    backend, device, backend_options = o["backend"], o["device"], o["backend_options"]
    checkpoint, checkpoint_every, progress = o["checkpoint"], o["checkpoint_every"], o["progress"]
    if not callable(verifier):
        raise TypeError(f"verifier must be callable (children, mu_draft, mu_target, sigma, rng), "
                        f"got {type(verifier).__name__}")
    if backend not in HARNESS_BACKENDS:
        raise ValueError(f"backend must be one of {HARNESS_BACKENDS}, got {backend!r}")
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
    seed = seed_entropy(rng)
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
