"""Build ``rass_theory/optimize/data/threshold_policies.npz``: certified threshold-policy tables.

For each ``K`` the optimal threshold-rank policy (:func:`rass_theory.optimize.policies.optimal_threshold_policy`)
is solved on a delta grid and stored as ``(p = Phi(t), w')``.  Where the optimum gains less than
:data:`FLAT_GAIN` over plain RASS (small and large delta, where the acceptance is flat in ``t``
and the search returns an arbitrary threshold), plain RASS is stored instead (``p = 1`` and the
optimal rank weights), so the parameters move smoothly in delta.  Then every interval's midpoint
is checked: the optimum there against the exact acceptance of the interpolated policy
(:mod:`rass_theory.optimize.threshold_table`); where the loss exceeds :data:`GAP_TOL` the midpoint
joins the grid and the two new halves are checked (at most :data:`MAX_LEVELS` levels).  Points
beyond the grid's end (where the end parameters are held) are checked too.  The stored check
points and their two acceptances are the table's certificate (``ThresholdTable.max_gap``).

Usage (two stages, so that Ks can be solved in separate processes)::

    python rass_theory/optimize/data/build_threshold_table.py solve --Ks 2 3 4 --workdir /tmp/rt_thr
    python rass_theory/optimize/data/build_threshold_table.py solve --Ks 5 6 7 8 --workdir /tmp/rt_thr
    python rass_theory/optimize/data/build_threshold_table.py emit --workdir /tmp/rt_thr
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

#: Ks covered by the shipped table.
TABLE_KS = (2, 3, 4, 5, 6, 7, 8)
#: Gain over optimal RASS below which the table stores plain RASS (``p = 1``).
FLAT_GAIN = 1e-7
#: Largest acceptance loss at a check point before the interval is split.
GAP_TOL = 1e-4
#: Levels of interval splitting.
MAX_LEVELS = 3
#: Initial grid: 0, a few small deltas, step 0.1 to 3, then sparse; checks beyond its end.
BASE_GRID = tuple(np.round(np.concatenate([[0.0, 0.025, 0.05], np.arange(0.1, 3.0 + 1e-9, 0.1),
                                           [3.25, 3.5, 4.0, 5.0, 6.0, 8.0]]), 10))
TAIL_CHECKS = (10.0, 12.0, 16.0)


def canonical(K: int, delta: float) -> dict:
    """The stored parameters at ``delta`` and the optimum's acceptance (see the module docstring)."""
    from rass_theory.optimize.policies import optimal_threshold_policy
    from rass_theory.optimize.rank_weights import optimal_rank_weights
    from scipy.special import ndtr

    res = optimal_threshold_policy(K, delta)
    if not np.isfinite(res.t) or res.acceptance - res.rass_acceptance <= FLAT_GAIN:
        w = np.asarray(optimal_rank_weights(K, delta).weights, dtype=np.float64)
        p, acc = 1.0, float(res.rass_acceptance)
    else:
        w = np.asarray(res.weights, dtype=np.float64)
        p, acc = float(ndtr(res.t)), float(res.acceptance)
    w = np.clip(w, 0.0, None)
    return {"delta": float(delta), "p": p, "weights": [float(x) for x in w / w.sum()],
            "acceptance": acc, "optimum": float(res.acceptance)}


def interpolated_acceptance(K: int, rows: list, delta: float) -> float:
    """Exact acceptance at ``delta`` of the policy interpolated from the solved ``rows``."""
    from rass_theory.optimize.policies import threshold_acceptance
    from rass_theory.optimize.threshold_table import interpolate_parameters

    grid = np.array([r["delta"] for r in rows])
    t, w = interpolate_parameters(grid, np.array([r["p"] for r in rows]),
                                  np.array([r["weights"] for r in rows]), np.array([delta]))
    return float(threshold_acceptance(K, delta, float(t[0]), w[0]))


def solve_K(K: int, log=print) -> dict:
    """Grid rows and check points for one ``K`` (see the module docstring)."""
    from rass_theory.optimize.policies import optimal_threshold_policy

    rows = {d: canonical(K, float(d)) for d in BASE_GRID}
    optimum = {}
    pending = [(a, b) for a, b in zip(BASE_GRID[:-1], BASE_GRID[1:])]
    checks = {}
    for level in range(MAX_LEVELS + 1):
        split = []
        ordered = [rows[d] for d in sorted(rows)]
        for a, b in pending:
            m = float(np.round(0.5 * (a + b), 12))
            if m not in optimum:
                optimum[m] = float(optimal_threshold_policy(K, m).acceptance)
            checks[m] = (optimum[m], interpolated_acceptance(K, ordered, m))
            if optimum[m] - checks[m][1] > GAP_TOL and level < MAX_LEVELS:
                split.append((a, m, b))
        for a, m, b in split:
            rows[m] = canonical(K, m)
            del checks[m]
        pending = [iv for a, m, b in split for iv in ((a, m), (m, b))]
        log(f"K={K} level {level}: {len(rows)} grid points, {len(split)} intervals split")
        if not pending:
            break
    ordered = [rows[d] for d in sorted(rows)]
    for d in TAIL_CHECKS:
        checks[d] = (float(optimal_threshold_policy(K, d).acceptance), interpolated_acceptance(K, ordered, d))
    return {"rows": ordered, "checks": [[d, o, a] for d, (o, a) in sorted(checks.items())]}


def emit(workdir: pathlib.Path, out: pathlib.Path) -> None:
    """Write the ``.npz`` read by :func:`rass_theory.optimize.threshold_table.threshold_table`.

    Arrays ``Ks`` and, per ``K``, ``K{K}_grid``, ``_p``, ``_weights``, ``_acceptance``,
    ``_check_delta``, ``_check_optimum``, ``_check_acceptance``.
    """
    arrays, Ks = {}, []
    for K in TABLE_KS:
        path = workdir / f"K{K}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        rows, checks = data["rows"], np.array(data["checks"], dtype=np.float64)
        Ks.append(K)
        arrays[f"K{K}_grid"] = np.array([r["delta"] for r in rows])
        arrays[f"K{K}_p"] = np.array([r["p"] for r in rows])
        arrays[f"K{K}_weights"] = np.array([r["weights"] for r in rows])
        arrays[f"K{K}_acceptance"] = np.array([r["acceptance"] for r in rows])
        arrays[f"K{K}_check_delta"] = checks[:, 0]
        arrays[f"K{K}_check_optimum"] = checks[:, 1]
        arrays[f"K{K}_check_acceptance"] = checks[:, 2]
    np.savez_compressed(out, Ks=np.array(Ks, dtype=np.int64), **arrays)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("stage", choices=["solve", "emit"])
    ap.add_argument("--Ks", type=int, nargs="*", default=list(TABLE_KS))
    ap.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("/tmp/rt_thr"))
    ap.add_argument("--out", type=pathlib.Path,
                    default=pathlib.Path(__file__).resolve().parent / "threshold_policies.npz")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.stage == "solve":
        for K in args.Ks:
            t0 = time.perf_counter()
            data = solve_K(K, log=lambda m: print(m, flush=True))
            (args.workdir / f"K{K}.json").write_text(json.dumps(data))
            gaps = [o - a for _, o, a in data["checks"]]
            print(f"K={K}: {len(data['rows'])} rows, {len(gaps)} checks, max gap {max(gaps):.2e}, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    else:
        emit(args.workdir, args.out)
        print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
