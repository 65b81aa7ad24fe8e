"""Peak memory of ``check_exactness`` is flat in ``n_samples`` (issue 4).

Each size runs in a fresh subprocess and reports its peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and the peak of ``tracemalloc``-traced memory
inside the call; the verifier is the built-in ``resample`` rule so the run measures the harness,
not a verifier.  Memory is ``O(chunk_size * K * dim)`` plus constant-size histograms.

    python bench/memory_harness.py                 # 1e6 and 1e8 (the latter takes a while)
    python bench/memory_harness.py --sizes 1e5,1e6
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, tracemalloc
import rass_theory as rt
n = int(float(sys.argv[1]))
v = rt.verifiers.resample()
rt.check_exactness(v, n_samples=2000)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t = time.perf_counter()
rep = rt.check_exactness(v, n_samples=n)
elapsed = time.perf_counter() - t
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
print(json.dumps({"n_samples": n, "passed": rep.passed, "elapsed_s": round(elapsed, 1),
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rss_after_imports_mib": base / 1024, "peak_traced_mib": peak / 2**20,
                  "detectable_ks_distance": rep.detectable_ks_distance}))
"""


def measure(n: float) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(n)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description="peak memory of check_exactness vs n_samples")
    parser.add_argument("--sizes", default="1e6,1e8")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "memory_harness.json"))
    args = parser.parse_args(argv)
    rows = []
    for n in args.sizes.split(","):
        rows.append(measure(float(n)))
        print(json.dumps(rows[-1]), flush=True)
    if len(rows) > 1:
        print(f"peak RSS ratio largest/smallest n: {rows[-1]['peak_rss_mib'] / rows[0]['peak_rss_mib']:.3f}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
