"""Wall time of one harness run in a single process vs on a Dask LocalCluster, same seed.

    python bench/bench_dask.py [--n 2000000] [--chunk 250000] [--workers 2] [--rule dgrs] [--inner numpy]

Runs every chunk of ``chunk_plan(n, chunk, seed)`` with ``run_chunk_numpy`` (or the torch runner)
in this process, then with ``run_chunks_dask`` on an embedded ``LocalCluster`` (processes,
``--workers`` workers, one thread each; cluster start-up included and also reported
separately), and checks the merged counts are bit-identical.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000)
    parser.add_argument("--chunk", type=int, default=250_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rule", default="dgrs")
    parser.add_argument("--inner", default="numpy", choices=("numpy", "torch"))
    args = parser.parse_args(argv)

    import rass_theory as rt
    from rass_theory.scale.dask_backend import run_chunks_dask
    from rass_theory.stats.chunks import run_chunk_numpy
    from rass_theory.stats.node import SyntheticNode, chunk_plan
    from rass_theory.stats.streaming import ExactnessCounts

    if args.inner == "torch":
        import torch

        from rass_theory.torch import verifiers as tv
        from rass_theory.torch.harness import run_chunk_torch
        torch.set_num_threads(1)
        verifier = getattr(tv, args.rule)()
        run_one = lambda s: run_chunk_torch(verifier, node, s, "cpu")  # noqa: E731
    else:
        verifier = rt.verifiers.get_verifier(args.rule)
        run_one = lambda s: run_chunk_numpy(verifier, node, s)  # noqa: E731
    node = SyntheticNode.build(4, 0.5, 8, entropy=1)
    specs = chunk_plan(args.n, args.chunk, 1, 400)
    t0 = time.perf_counter()
    single = ExactnessCounts.merge_all(run_one(s) for s in specs)
    t_single = time.perf_counter() - t0

    from distributed import Client, LocalCluster
    t0 = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        t_start = time.perf_counter() - t0
        address = cluster.scheduler_address
        t1 = time.perf_counter()
        merged = ExactnessCounts.merge_all(run_chunks_dask(verifier, node, specs, address=address,
                                                           inner=args.inner, device="cpu" if args.inner == "torch" else None))
        t_run = time.perf_counter() - t1
        client.close()
    t0e = time.perf_counter()
    embedded = ExactnessCounts.merge_all(run_chunks_dask(verifier, node, specs, n_workers=args.workers,
                                                         inner=args.inner,
                                                         device="cpu" if args.inner == "torch" else None))
    t_embedded = time.perf_counter() - t0e
    print(f"rule={args.rule} inner={args.inner} n={args.n} chunks={len(specs)} workers={args.workers} "
          f"(machine: {os.cpu_count()} cores)")
    print(f"single process            {t_single:8.2f} s")
    print(f"dask, warm cluster        {t_run:8.2f} s   ratio {t_run / t_single:.2f}   (cluster start {t_start:.1f} s)")
    print(f"dask, embedded (default)  {t_embedded:8.2f} s   ratio {t_embedded / t_single:.2f}   (start-up included)")
    print(f"bit-identical counts: warm {single.equal(merged)}, embedded {single.equal(embedded)}")


if __name__ == "__main__":
    main()
