"""Certified duality gaps of ``rt.optimal_rank_weights`` over a (K, delta) grid, cold process.

Prints the worst and median certified gap over K in {2, 3, 4, 8, 16, 32, 64} x delta in
{1e-4, 0.01, 0.1, 0.5, 1, 2, 4, 8, 16}, and the worst per K.  Run on two checkouts (``PYTHONPATH``)
to compare the table before and after a change of the optimiser.

Run: ``python bench/certified_gaps.py``.
"""
import numpy as np

import rass_theory as rt

KS = (2, 3, 4, 8, 16, 32, 64)
DELTAS = (1e-4, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def main():
    rows = [(K, d, rt.optimal_rank_weights(K, d).gap) for K in KS for d in DELTAS]
    gaps = np.array([r[2] for r in rows])
    worst = rows[int(gaps.argmax())]
    print(f"cells {len(rows)}  max certified gap {gaps.max():.3e} at (K, delta) = {worst[:2]}  "
          f"median {np.median(gaps):.3e}")
    for K in KS:
        print(f"K={K:<3d} max gap {max(g for k, _, g in rows if k == K):.2e}")


if __name__ == "__main__":
    main()
