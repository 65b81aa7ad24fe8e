"""CPU throughput of the torch verifiers vs the NumPy verifiers and vs drawing the children.

    python bench/bench_torch.py [--n 200000] [--K 4] [--d 64] [--delta 0.5] [--threads T] [--reps 3]

For one node batch (n rows, K children, dimension d, displacement delta) it times, in this
process: drawing the children with NumPy (``rng.standard_normal``) and with ``torch.randn``;
the NumPy verifiers (``rass_theory.verifiers``) and the torch verifiers
(``rass_theory.torch.verifiers``) on the same children.  It prints seconds, samples/s and the
ratios torch/numpy and torch/(torch.randn draw).  Median of ``--reps`` timed calls after one
warm-up call (host-side weight tables are built in the warm-up).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import node_batch_parser, shared_means  # bench/ is on sys.path: run as a script


def timed(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main(argv=None):
    parser = node_batch_parser(__doc__)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    import rass_theory as rt
    from rass_theory.torch import verifiers as tv

    if args.threads:
        torch.set_num_threads(args.threads)
    n, K, d, delta = args.n, args.K, args.d, args.delta
    rng = np.random.default_rng(0)
    mu_draft, mu_target = shared_means(n, d, delta, rng)
    mu_draft = np.ascontiguousarray(mu_draft)  # torch.from_numpy needs a writable array
    children = mu_draft[:, None, :] + rng.standard_normal((n, K, d))
    tc, tmd, tmt = (torch.from_numpy(a) for a in (children, mu_draft, mu_target))
    gen = torch.Generator().manual_seed(1)

    t_np_draw = timed(lambda: rng.standard_normal((n, K, d)), args.reps)
    t_torch_draw = timed(lambda: torch.randn(n, K, d, generator=gen, dtype=torch.float64), args.reps)
    print(f"n={n} K={K} d={d} delta={delta} torch threads={torch.get_num_threads()} (float64)")
    print(f"draw children: numpy {t_np_draw:.3f} s   torch.randn {t_torch_draw:.3f} s")
    print(f"{'rule':<10}{'numpy s':>10}{'torch s':>10}{'torch/numpy':>13}{'torch/randn':>13}{'torch samples/s':>17}")
    rules = [("dgrs", rt.verifiers.dgrs(), tv.dgrs()), ("rass", rt.verifiers.rass(), tv.rass()),
             ("threshold", rt.verifiers.threshold(), tv.threshold()),
             ("optimal_list", rt.verifiers.optimal_list(), tv.optimal_list()),
             ("resample", rt.verifiers.resample(), tv.resample())]
    for name, vn, vt in rules:
        t_np = timed(lambda: vn(children, mu_draft, mu_target, 1.0, np.random.default_rng(2)), args.reps)
        t_t = timed(lambda: vt(tc, tmd, tmt, 1.0, gen), args.reps)
        print(f"{name:<10}{t_np:>10.3f}{t_t:>10.3f}{t_t / t_np:>13.2f}{t_t / t_torch_draw:>13.2f}{n / t_t:>17,.0f}")


if __name__ == "__main__":
    main()
