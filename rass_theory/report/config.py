"""Parameters of a report, with validation and the embedded defaults of each mode."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .._validation import check_delta, check_positive_int, check_probability
from ..plot._common import check_deltas, check_ints, check_K_values
from ..plot.style import _check_formats

__all__ = ["ReportConfig", "SECTION_KEYS"]

#: Report sections in the order they appear.
SECTION_KEYS = ("acceptance", "weights", "trees", "exactness", "power", "diffusion", "learned", "mnist")


#: Harness options the report pins (see ``ReportConfig.cert_harness``).
CERT_HARNESS = {"dtype": ("float64", "float32"), "n_bins": 4096, "two_sample_size": 400}


def _grid(stop, step):
    return tuple(float(x) for x in np.round(np.arange(0.0, stop + step / 2, step), 10))


@dataclass(frozen=True)
class ReportConfig:
    """Everything a report depends on; ``ReportConfig.default(quick=...)`` gives the embedded defaults.

    Attributes
    ----------
    K_values : tuple of int
        Children per node for the acceptance, gap and tree figures.
    deltas : tuple of float
        Delta grid of the acceptance and gap figures.
    weights_K : tuple of int
        ``K`` values of the optimal-weights figure.
    weights_deltas : tuple of float
        Delta grid of the optimal-weights figure.
    policy_deltas : tuple of float
        Deltas at which the threshold policy's acceptance is shown (the verifier's parameters:
        the certified table where ``K`` is tabulated, an optimisation per delta, about a second,
        otherwise); empty: skip the policy.
    tree_delta : float
        Fixed delta of the tree-speedup figure; ``tree_L``: its depths.
    cert_K, cert_delta, cert_dim, n_samples, alpha : exactness certificate cell and sample size.
    cert_verifiers : tuple of str
        Built-in verifiers certified.
    cert_harness : dict
        Harness options of every exactness and power run (``rt.check_exactness`` keywords), fixed
        here so that the report's cost does not follow the harness's defaults: precision passes,
        PIT bins and the energy-test subsample (the QQ plot and the power curve use a lighter
        two-sample test on top, ``plot.exactness.LIGHT_HARNESS``).
    qq_seeds, qq_n_samples : p-value QQ plot: number of seeds and samples per check.
    power_ns, power_reps, power_mutant : power curve grid, repetitions per point, mutant name.
    gm_csv : str or None
        CSV written by ``rass-theory sweep-gm``; when None a small embedded sweep runs.
    gm_dim, gm_n_samples, gm_trees : size of the embedded Gaussian-mixture sweep.
    seed : int
        Root seed; every random draw descends from it.
    formats : tuple of str
        Figure formats (PNG always included).
    sections : tuple of str
        Sections to build (subset of :data:`SECTION_KEYS`).
    """

    quick: bool = False
    K_values: tuple = (1, 2, 4, 8)
    deltas: tuple = field(default_factory=lambda: _grid(4.0, 0.125))
    weights_K: tuple = (2, 4, 8)
    weights_deltas: tuple = field(default_factory=lambda: _grid(4.0, 0.125))
    policy_deltas: tuple = field(default_factory=lambda: _grid(4.0, 0.125))
    tree_delta: float = 1.0
    tree_L: tuple = (1, 2, 3, 4, 5, 6)
    cert_K: int = 4
    cert_delta: float = 0.5
    cert_dim: int = 8
    n_samples: int = 200_000
    alpha: float = 1e-3
    qq_seeds: int = 20
    qq_n_samples: int = 20_000
    power_ns: tuple = (1_000, 3_000, 10_000, 30_000, 100_000)
    power_reps: int = 10
    power_mutant: str | None = None
    gm_csv: str | None = None
    gm_dim: int = 64
    gm_n_samples: int = 400
    gm_trees: tuple = ((1, 3), (2, 3), (4, 3))
    cert_verifiers: tuple = ("rmc", "dgrs", "rass", "threshold", "resample")
    cert_harness: dict = field(default_factory=lambda: dict(CERT_HARNESS))
    seed: int = 0
    formats: tuple = ("png", "svg")
    sections: tuple = SECTION_KEYS

    @classmethod
    def default(cls, quick: bool = False, **overrides) -> "ReportConfig":
        """Embedded defaults; ``quick=True`` shrinks every grid and sample size (tests, previews)."""
        base = {}
        if quick:
            base = dict(
                quick=True, K_values=(1, 2, 4), deltas=_grid(4.0, 0.5), weights_K=(2, 4),
                weights_deltas=_grid(4.0, 0.5),
                policy_deltas=_grid(4.0, 0.5), tree_L=(1, 2, 3, 4, 5), n_samples=20_000,
                qq_seeds=6, qq_n_samples=4_000, power_ns=(1_000, 4_000, 16_000), power_reps=4,
                gm_dim=16, gm_n_samples=100, gm_trees=((1, 2), (2, 2)),
            )
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)

    def __post_init__(self):
        s = object.__setattr__
        s(self, "K_values", check_K_values(self.K_values, "K"))
        s(self, "deltas", tuple(float(x) for x in check_deltas(self.deltas, "deltas")))
        s(self, "weights_K", check_K_values(self.weights_K, "weights_K", maximum=32))
        s(self, "weights_deltas", tuple(float(x) for x in check_deltas(self.weights_deltas, "weights_deltas")))
        s(self, "policy_deltas", () if len(self.policy_deltas) == 0 else
          tuple(float(x) for x in check_deltas(self.policy_deltas, "policy_deltas")))
        s(self, "tree_delta", check_delta(self.tree_delta, name="tree_delta"))
        s(self, "tree_L", check_ints(self.tree_L, "tree_L"))
        if max(self.tree_L) > 12:
            raise ValueError(f"tree_L must be <= 12, got {max(self.tree_L)}")
        s(self, "cert_K", check_positive_int(self.cert_K, "cert_K", maximum=64))
        s(self, "cert_delta", check_delta(self.cert_delta, name="cert_delta"))
        s(self, "cert_dim", check_positive_int(self.cert_dim, "cert_dim", minimum=2))
        s(self, "n_samples", check_positive_int(self.n_samples, "n_samples", minimum=1000))
        s(self, "alpha", check_probability(self.alpha, "alpha"))
        s(self, "qq_seeds", check_positive_int(self.qq_seeds, "qq_seeds", minimum=2))
        s(self, "qq_n_samples", check_positive_int(self.qq_n_samples, "qq_n_samples", minimum=1000))
        s(self, "power_ns", check_ints(self.power_ns, "power_ns", minimum=100))
        s(self, "power_reps", check_positive_int(self.power_reps, "power_reps"))
        s(self, "gm_dim", check_positive_int(self.gm_dim, "gm_dim", minimum=2))
        s(self, "gm_n_samples", check_positive_int(self.gm_n_samples, "gm_n_samples", minimum=10))
        trees = tuple((check_positive_int(k, "gm_trees K"), check_positive_int(l, "gm_trees L"))
                      for k, l in self.gm_trees)
        s(self, "gm_trees", trees)
        known = ("rmc", "dgrs", "rass", "threshold", "resample")
        cv = tuple(self.cert_verifiers)
        if not cv or any(v not in known for v in cv):
            raise ValueError(f"cert_verifiers must be a non-empty subset of {known}, got {cv}")
        harness = dict(self.cert_harness)
        bad_keys = sorted(set(harness) - {"dtype", "n_bins", "two_sample_size", "n_permutations", "n_directions"})
        if bad_keys:
            raise ValueError(f"cert_harness accepts dtype, n_bins, two_sample_size, n_permutations and "
                             f"n_directions, got {bad_keys}")
        if "dtype" in harness:
            harness["dtype"] = tuple([harness["dtype"]] if isinstance(harness["dtype"], str) else harness["dtype"])
        s(self, "cert_harness", harness)
        s(self, "cert_verifiers", tuple(v for v in known if v in cv))
        s(self, "seed", check_positive_int(self.seed, "seed", minimum=0))
        formats = _check_formats(self.formats)
        if "png" not in formats:
            formats = ("png",) + formats
        s(self, "formats", formats)
        sections = tuple(self.sections)
        bad = [x for x in sections if x not in SECTION_KEYS]
        if bad:
            raise ValueError(f"unknown section(s) {', '.join(repr(x) for x in bad)}; sections are "
                             f"{', '.join(SECTION_KEYS)}")
        if not sections:
            raise ValueError(f"sections must name at least one of {', '.join(SECTION_KEYS)}")
        dup = sorted({x for x in sections if sections.count(x) > 1})
        if dup:
            raise ValueError(f"section(s) listed twice: {', '.join(dup)}")
        s(self, "sections", tuple(k for k in SECTION_KEYS if k in sections))
        if self.gm_csv is not None:
            s(self, "gm_csv", str(self.gm_csv))

    def to_dict(self) -> dict:
        """JSON-ready parameters (stored in the report's manifest)."""
        return asdict(self)
