"""Pinned harness statistics: the performance work on ``stats/node.py`` and ``stats/rowstats.py``
must not change what the harness computes.

``tests/stats/data/harness_pinned.json`` holds every test's statistic and p-value of a few small
cells at fixed seeds, computed on the code before the rewrite (commit 8052fb9, regenerate with
``python tests/stats/test_harness_pinned.py --write`` only when a statistic is changed on purpose).
Counts are integers, so equal counts give equal statistics up to the rounding of the float64 sums
(cross-covariances, pair sums): the tolerance is ``rtol = 1e-9`` on statistics and p-values.

Re-pinned once on purpose (issue 19, H3): below ``dim = 16`` the fixed projections are the coordinate
axes and ``dim`` random unit vectors (``stats.node.n_projections``) instead of 32 random ones, which
changes only the three ``proj_ks`` entries of the two dim-8 cells; every other statistic and p-value
was compared with the 8052fb9 values first and is equal within the tolerance.

Re-pinned a second time on purpose (issue 19, H3, next round): the rows' unit directions are drawn
by ``stats.node.unit_directions`` (sign-flipped copies of one Gaussian pool vector per 8 rows: the
same uniform law per row, an eighth of the normals), and below ``dim = 16`` the fixed projections are
the ``dim`` coordinate axes only.  Every node changes, so every statistic does; the new row
statistics were first compared with the previous code's ``counts_from_rows`` on the same inputs
(identical counts and sums), the verdicts of the three cells are unchanged (two pass, the mutant
fails), and the false-fail calibration and the mutant verdicts were rerun (bench/results).
"""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import pytest

import rass_theory as rt

DATA = os.path.join(os.path.dirname(__file__), "data", "harness_pinned.json")

#: (label, verifier factory name, options of check_exactness)
CELLS = (
    ("resample K=3 d=8 f64+f32", "resample", dict(K=3, delta=1.0, dim=8, n_samples=3000, chunk_size=1500, rng=11,
                                                 dtype=("float64", "float32"), two_sample_size=200)),
    ("rass K=4 d=40", "rass", dict(K=4, delta=0.5, dim=40, n_samples=2500, chunk_size=1250, rng=12,
                                   dtype="float64", two_sample_size=0)),
    ("mutant reflection_drops_zperp K=2 d=8", "mutants.reflection_drops_zperp",
     dict(K=2, delta=1.0, dim=8, n_samples=3000, chunk_size=3000, rng=13, dtype="float64", two_sample_size=0)),
)


def _verifier(name):
    obj = rt
    for part in ("verifiers." + name if "." not in name else name).split("."):
        obj = getattr(obj, part)
    return obj()


def _run(name, options) -> dict:
    rep = rt.check_exactness(_verifier(name), **options)
    return {"passed": bool(rep.passed), "n_valid": int(rep.n_valid),
            "tests": {t.name: [float(t.statistic), float(t.pvalue)] for t in rep.tests}}


@pytest.mark.parametrize("label,name,options", CELLS, ids=[c[0] for c in CELLS])
def test_statistics_unchanged(label, name, options):
    with open(DATA) as fh:
        pinned = json.load(fh)[label]
    got = _run(name, options)
    assert got["passed"] == pinned["passed"] and got["n_valid"] == pinned["n_valid"]
    assert sorted(got["tests"]) == sorted(pinned["tests"])
    for test, (stat, p) in pinned["tests"].items():
        gs, gp = got["tests"][test]
        for a, b in ((gs, stat), (gp, p)):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-300), (test, a, b)


if __name__ == "__main__" and "--write" in sys.argv:
    out = {label: _run(name, options) for label, name, options in CELLS}
    with open(DATA, "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True)
    print(f"wrote {DATA}: {sum(len(v['tests']) for v in out.values())} statistics")
