"""Build ``rass_theory/optimize/data/optimal_weights.jsonl``: certified optimal rank weights on a delta grid.

The table only supplies *starting points* for the KKT Newton warm start of
:func:`rass_theory.optimal_rank_weights` (proofs/P4-weight-program.md, P4.7); every result is
still evaluated exactly and certified by the Frank-Wolfe gap at the requested delta, so a stale
or rounded entry can cost time, never correctness.

Usage (two stages so that slow K can run in parallel processes)::

    python rass_theory/optimize/data/build_table.py solve --Ks 2 3 4 5 6 7 --workdir /tmp/rt_table
    python rass_theory/optimize/data/build_table.py solve --Ks 8 16 --workdir /tmp/rt_table
    python rass_theory/optimize/data/build_table.py emit --workdir /tmp/rt_table

Each stored row is ``(delta, left_in_A, support, weights_on_support, crossings)``: the active set
(support of the weights, sign pattern and crossings of ``f`` and ``g_w``) is what the KKT system
needs.  Only rows with ``status == "optimal"`` (certified gap <= 1e-9) and a support larger than
the top rank alone are stored (the top-rank vertex is certified directly for ``delta >= 2``).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

#: Ks covered by the table.  K = 32 and 64 were built too (step 0.1) but not shipped: their
#: active set changed between almost every pair of neighbouring rows (67 of 73, 59 of 65), so
#: the KKT continuation from a row never succeeded and only cost time before the LP fallback.
TABLE_KS = (2, 3, 4, 5, 6, 7, 8, 16)


def table_grid(K: int) -> np.ndarray:
    """Delta grid of the table for ``K``: 7 log-spaced points in [1e-4, 0.025], then a uniform
    grid to 8 (step 0.05 for ``K <= 16``, 0.1 for larger ``K``, whose rows are longer)."""
    step = 0.05 if K <= 16 else 0.1
    tail = np.geomspace(1e-4, 0.025, 7)
    body = np.round(np.arange(step, 8.0 + 1e-9, step), 10)
    return np.concatenate([tail, body])


def solve_K(K: int) -> list:
    """Rows for one ``K``, solved in ascending delta (each from scratch, table disabled)."""
    from rass_theory.optimize import rank_weights as rw

    rw._TABLE_ENABLED = False
    rows = []
    for d in table_grid(K):
        res = rw.optimal_rank_weights(K, float(d))
        if res.status != "optimal" or res.gap > 1e-9:
            continue
        S = np.nonzero(res.weights > 0)[0]
        if S.size == 1 and S[0] == K - 1:
            continue
        rows.append([float(d), bool(res.left_in_A), [int(i) for i in S],
                     [float(x) for x in res.weights[S]], [float(x) for x in res.crossings]])
    return rows


def emit(workdir: pathlib.Path, out: pathlib.Path) -> None:
    """Write the package data file: one JSON row per line, ``[K, delta, left_in_A, support,
    weights_on_support, crossings]``, ascending delta per K; certified optimal (gap <= 1e-9) at
    each delta; weights exact (shortest round-trip repr), crossings to 11 significant digits.
    :func:`rass_theory.optimize.rank_weights._raw_table` reads it (KKT warm starts only)."""
    lines = []
    for K in TABLE_KS:
        p = workdir / f"K{K}.json"
        if not p.exists():
            continue
        for d, left, S, w, c in json.loads(p.read_text()):
            row = [int(K), float(d), bool(left), [int(i) for i in S], [float(x) for x in w],
                   [float(f"{x:.11g}") for x in c]]
            lines.append(json.dumps(row, separators=(",", ":")))
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("stage", choices=["solve", "emit"])
    ap.add_argument("--Ks", type=int, nargs="*", default=list(TABLE_KS))
    ap.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("/tmp/rt_table"))
    ap.add_argument("--out", type=pathlib.Path,
                    default=pathlib.Path(__file__).resolve().parent / "optimal_weights.jsonl")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.stage == "solve":
        for K in args.Ks:
            t0 = time.perf_counter()
            rows = solve_K(K)
            (args.workdir / f"K{K}.json").write_text(json.dumps(rows))
            print(f"K={K}: {len(rows)} rows in {time.perf_counter() - t0:.1f} s", flush=True)
    else:
        emit(args.workdir, args.out)
        print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
