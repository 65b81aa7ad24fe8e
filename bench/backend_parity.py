"""NumPy vs torch (CPU) verifiers: time ratios and acceptance parity, in one process.

1. Speed: RASS, D-GRS and RMC on the same float64 batch (n = 200,000 nodes, K = 4 children,
   d = 64, per-row deltas), one thread for both backends (``torch.set_num_threads(1)``; NumPy's
   BLAS is not used by the verifiers' hot path).  Reports the median of ``--repeats`` calls and
   the ratio torch / NumPy (target <= 1.0), in CPU time (``time.process_time``).
2. Parity: the acceptance rate of ``rass()`` (weights "optimal": the certified interpolator on
   per-row deltas, on both backends) against the exact value ``mean_i acceptance("rass", K,
   delta_i, weights=w(delta_i))``, with its z-score ``(rate - exact) / sqrt(sum_i p_i (1 - p_i)) * n``.
   Also the largest difference between the per-row weights the two backends use.

Run: ``python bench/backend_parity.py [--n 200000] [--repeats 5]``.  The machine running the
numbers may be shared: ratios are taken in one process, back to back, to cancel most of it.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np


def make_batch(n, K, d, seed=0, n_deltas=16):
    """Nodes with per-row deltas: ``n_deltas`` distinct values in [0.05, 2] repeated over the rows."""
    rng = np.random.default_rng(seed)
    values = np.linspace(0.05, 2.0, n_deltas)
    delta = values[rng.integers(0, n_deltas, n)]
    mu_draft = rng.standard_normal((n, d))
    e = rng.standard_normal((n, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    sigma = 0.7
    mu_target = mu_draft + sigma * delta[:, None] * e
    children = mu_draft[:, None, :] + sigma * rng.standard_normal((n, K, d))
    return children, mu_draft, mu_target, sigma, delta, values


def timed(fn, repeats):
    """Median CPU time (``process_time``: one thread, so a loaded machine inflates it far less
    than wall time) and the last output."""
    times = []
    out = None
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return float(np.median(times)), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in (("--n", 200_000), ("--K", 4), ("--d", 64), ("--repeats", 5)):
        ap.add_argument(flag, type=int, default=default)
    args = ap.parse_args(argv)

    import torch

    import rass_theory as rt
    from rass_theory import verifiers as nv
    from rass_theory.optimize import optimal_weights_interpolator
    from rass_theory.torch import verifiers as tv

    torch.set_num_threads(1)
    n, K, d = args.n, args.K, args.d
    children, mu_d, mu_t, sigma, delta, values = make_batch(n, K, d)
    tc, tmd, tmt = (torch.from_numpy(a) for a in (children, mu_d, mu_t))

    print(f"# n = {n}, K = {K}, d = {d}, float64, torch threads = {torch.get_num_threads()}, "
          f"median CPU seconds of {args.repeats} calls each")
    print("rule    numpy_s  torch_s  ratio(torch/numpy)")
    rules = {"rass": (nv.rass(), tv.rass(), K), "dgrs": (nv.dgrs(), tv.dgrs(), K), "rmc": (nv.rmc(), tv.rmc(), 1)}
    results = {}
    for name, (vn, vt, k) in rules.items():
        c_np = np.ascontiguousarray(children[:, :k])
        c_t = tc[:, :k].contiguous()
        vn(c_np[:1000], mu_d[:1000], mu_t[:1000], sigma, 0)     # warm caches (weights tables)
        vt(c_t[:1000], tmd[:1000], tmt[:1000], sigma, 0)
        t_np, r_np = timed(lambda: vn(c_np, mu_d, mu_t, sigma, 1), args.repeats)
        t_t, r_t = timed(lambda: vt(c_t, tmd, tmt, sigma, 1), args.repeats)
        results[name] = (r_np.accepted, r_t.accepted.numpy())
        print(f"{name:6s} {t_np:8.3f} {t_t:8.3f} {t_t / t_np:8.2f}")

    # acceptance parity of rass() with per-row deltas
    interp = optimal_weights_interpolator(K)
    w_vals = interp(values)
    p_vals = np.array([rt.acceptance("rass", K, float(v), weights=w) for v, w in zip(values, w_vals)])
    idx = np.searchsorted(values, delta)
    p = p_vals[idx]
    exact = float(p.mean())
    se = math.sqrt(float((p * (1 - p)).sum())) / n
    print("\nbackend  acceptance_rate  exact            z")
    for label, acc in zip(("numpy", "torch"), results["rass"]):
        rate = float(acc.mean())
        print(f"{label:7s}  {rate:.6f}         {exact:.6f}   {(rate - exact) / se:+.2f}")
    from rass_theory.verifiers._core import prepare
    from rass_theory.verifiers._weights import batch_weights

    for spec in ("optimal", "interpolated"):
        b_np = prepare(children[:2000], mu_d[:2000], mu_t[:2000], sigma, 0)
        b_t = prepare(tc[:2000], tmd[:2000], tmt[:2000], sigma, 0)
        w_np = np.broadcast_to(batch_weights(spec, b_np), (2000, K))
        w_t = np.broadcast_to(tv.rass(spec).device_weights(b_t).numpy(), (2000, K))
        print(f"max |w_numpy - w_torch| over 2000 rows, weights={spec!r}: {np.abs(w_np - w_t).max():.2e}")

    # one delta for the whole batch: both back ends solve the exact optimum
    d1 = 0.8
    mu_t1 = mu_d + sigma * d1 * (mu_t - mu_d) / (sigma * delta[:, None])
    exact1 = rt.acceptance("rass", K, d1)
    se1 = math.sqrt(exact1 * (1 - exact1) / n)
    print(f"\nsingle delta = {d1}: exact optimum acceptance {exact1:.6f}")
    for label, v, args_ in (("numpy", nv.rass(), (children, mu_d, mu_t1, sigma, 2)),
                            ("torch", tv.rass(), (tc, tmd, torch.from_numpy(mu_t1), sigma, 2))):
        rate = float(np.asarray(v(*args_).accepted).mean())
        print(f"{label:7s}  {rate:.6f}   z = {(rate - exact1) / se1:+.2f}")


if __name__ == "__main__":
    main()
