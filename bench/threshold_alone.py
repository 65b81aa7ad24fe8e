"""The NumPy threshold verifier alone at 50,000 per-row deltas: best of ``--rounds`` calls over
the best of as many child draws, timed in turn in one process (the batch of
``bench/threshold_per_row.py``: K = 4, d = 64, delta uniform on [0.05, 3], per-row sigma).

    OMP_NUM_THREADS=1 python bench/threshold_alone.py [--rounds 20]

Run it on an older checkout with ``PYTHONPATH=<checkout>`` for a before/after pair.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from threshold_per_row import batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--n", type=int, default=50_000)
    args = ap.parse_args()
    from rass_theory import verifiers as V

    K, d = 4, 64
    rng = np.random.default_rng(20261201)
    warm = batch(50, K, d, rng)
    verifier = V.threshold()
    verifier(*warm[:4], rng)
    children, mu_d, mu_t, sigma, _ = batch(args.n, K, d, rng)
    best_v = best_d = np.inf
    for _ in range(args.rounds):
        t0 = time.process_time()
        rng.standard_normal((args.n, K, d))
        best_d = min(best_d, time.process_time() - t0)
        t0 = time.process_time()
        verifier(children, mu_d, mu_t, sigma, rng)
        best_v = min(best_v, time.process_time() - t0)
    print(f"child draw {best_d:.4f} s, threshold {best_v:.4f} s, ratio {best_v / best_d:.3f}")


if __name__ == "__main__":
    main()
