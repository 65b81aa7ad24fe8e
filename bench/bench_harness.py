"""Harness throughput (samples per second), wall and CPU time, against a same-process baseline.

For each verifier, one ``check_exactness`` call at the default cell (K = 4, delta = 0.5, dim = 8;
RMC at K = 1) and default settings.  The baseline is the time NumPy needs to draw the children
of the same run (``standard_normal((n, K, dim))``), measured in the same process, so the ratio is
meaningful on a shared machine; CPU time (``time.process_time``) is reported because wall time on
a loaded two-core machine mostly measures the other processes.

    python bench/bench_harness.py [--n-samples 1000000] [--rules resample,rmc,dgrs,rass]
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def main(argv=None):
    parser = argparse.ArgumentParser(description="check_exactness throughput")
    parser.add_argument("--n-samples", type=float, default=None)
    parser.add_argument("--rules", default="resample,rmc,dgrs,rass")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "bench_harness.json"))
    args = parser.parse_args(argv)

    import rass_theory as rt
    from rass_theory.stats.harness import DEFAULT_CHUNK_SIZE, DEFAULT_N_SAMPLES

    n = int(args.n_samples or DEFAULT_N_SAMPLES)
    rt.check_exactness(rt.verifiers.resample(), n_samples=2000)  # warm imports and caches
    results = []
    for name in args.rules.split(","):
        K = 1 if name == "rmc" else 4
        verifier = {"resample": rt.verifiers.resample, "rmc": rt.verifiers.rmc, "dgrs": rt.verifiers.dgrs,
                    "rass": rt.verifiers.rass, "threshold": lambda: rt.verifiers.threshold(K=4)}[name]()
        rt.check_exactness(verifier, K=K, n_samples=2000)  # warm the rule (e.g. optimal weights)

        def draw():
            g = np.random.default_rng(0)
            for start in range(0, n, DEFAULT_CHUNK_SIZE):
                g.standard_normal((min(DEFAULT_CHUNK_SIZE, n - start), K, 8))

        _, base_wall, base_cpu = timed(draw)
        rep, wall, cpu = timed(lambda: rt.check_exactness(verifier, K=K, n_samples=n))
        row = {"rule": name, "K": K, "n_samples": n, "passed": rep.passed, "wall_s": round(wall, 2),
               "cpu_s": round(cpu, 2), "samples_per_s_wall": round(n / wall), "samples_per_s_cpu": round(n / cpu),
               "draw_children_wall_s": round(base_wall, 3), "ratio_to_draw_wall": round(wall / base_wall, 1),
               "detectable_ks_distance": rep.detectable_ks_distance}
        results.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"load_average": os.getloadavg(), "results": results}, fh, indent=2)
    print(f"load average during the run: {os.getloadavg()}")


if __name__ == "__main__":
    main()
