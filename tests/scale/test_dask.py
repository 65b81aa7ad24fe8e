"""Dask scale-out: same seed, bit-identical counts and verdict as one process; clear errors."""
import threading
import time

import numpy as np
import pytest

import rass_theory as rt
from rass_theory.scale.dask_backend import run_chunks_dask
from rass_theory.stats.chunks import run_chunk_numpy
from rass_theory.stats.node import SyntheticNode, chunk_plan
from rass_theory.stats.streaming import ExactnessCounts


def setup_run(n=40_000, chunk=10_000):
    node = SyntheticNode.build(4, 0.5, 6, n_bins=512, entropy=5)
    return node, chunk_plan(n, chunk, 5, 200) + chunk_plan(n // 2, chunk, 5, 0, dtype="float32", pass_index=1)


class TestBitIdentical:
    def test_thread_cluster_numpy_inner(self):
        node, specs = setup_run()
        v = rt.verifiers.dgrs()
        sequential = [run_chunk_numpy(v, node, s) for s in specs]
        parts = list(run_chunks_dask(v, node, specs, n_workers=2, processes=False))
        assert len(parts) == len(specs)
        assert all(a.equal(b) for a, b in zip(sequential, parts))        # yielded in spec order
        assert ExactnessCounts.merge_all(sequential).equal(ExactnessCounts.merge_all(parts))

    def test_torch_inner(self):
        from rass_theory.torch import verifiers as tv
        from rass_theory.torch.harness import run_chunk_torch

        node, specs = setup_run(8_000, 4_000)
        v = tv.dgrs()
        parts = list(run_chunks_dask(v, node, specs, processes=False, inner="torch", device="cpu"))
        assert all(run_chunk_torch(v, node, s, "cpu").equal(p) for s, p in zip(specs, parts))

    def test_check_exactness_same_verdict_and_statistics(self):
        kw = dict(K=4, delta=0.5, dim=6, n_samples=20_000, chunk_size=10_000, rng=9)
        single = rt.check_exactness(rt.verifiers.dgrs(), **kw)
        dask = rt.check_exactness(rt.verifiers.dgrs(), backend="dask",
                                  backend_options={"n_workers": 2, "processes": False}, **kw)
        assert single.passed == dask.passed
        assert [(t.name, t.statistic, t.pvalue) for t in single.tests] == \
               [(t.name, t.statistic, t.pvalue) for t in dask.tests]
        assert all(a.equal(b) for a, b in zip(single.pass_counts, dask.pass_counts))

    @pytest.mark.slow
    def test_process_cluster(self):
        node, specs = setup_run()
        v = rt.verifiers.rass()
        sequential = ExactnessCounts.merge_all(run_chunk_numpy(v, node, s) for s in specs)
        merged = ExactnessCounts.merge_all(run_chunks_dask(v, node, specs, n_workers=2, processes=True))
        assert sequential.equal(merged)


class TestErrors:
    def test_unreachable_scheduler_names_address(self):
        node, specs = setup_run(1000, 1000)
        t0 = time.perf_counter()
        with pytest.raises(ConnectionError, match=r"tcp://127\.0\.0\.1:9"):
            list(run_chunks_dask(rt.verifiers.dgrs(), node, specs, address="tcp://127.0.0.1:9", timeout=1))
        assert time.perf_counter() - t0 < 20

    def test_unpicklable_verifier(self):
        node, specs = setup_run(1000, 1000)
        lock = threading.Lock()

        def holds_a_lock(children, mu_draft, mu_target, sigma, rng):
            with lock:
                return rt.verifiers.dgrs()(children, mu_draft, mu_target, sigma, rng)

        with pytest.raises(TypeError, match="verifier must be picklable"):
            run_chunks_dask(holds_a_lock, node, specs)

    def test_closures_are_fine(self):
        node, specs = setup_run(2000, 1000)
        base = rt.verifiers.dgrs()
        closure = lambda c, md, mt, s, r: base(c, md, mt, s, r)   # noqa: E731
        parts = list(run_chunks_dask(closure, node, specs, processes=False))
        assert all(run_chunk_numpy(base, node, s).equal(p) for s, p in zip(specs, parts))

    def test_bad_arguments(self):
        node, specs = setup_run(1000, 1000)
        with pytest.raises(ValueError, match="inner must be one of"):
            run_chunks_dask(rt.verifiers.dgrs(), node, specs, inner="jax")
        with pytest.raises(ValueError, match="n_workers must be >= 1"):
            run_chunks_dask(rt.verifiers.dgrs(), node, specs, n_workers=0)

    def test_verifier_exception_is_a_recorded_violation(self):
        """A verifier that raises on a worker fails its rows with a message, as in one process."""
        node, specs = setup_run(1000, 1000)

        def boom(*args):
            raise RuntimeError("verifier exploded")

        parts = list(run_chunks_dask(boom, node, specs[:1], processes=False))
        assert parts[0].violation_dict() == {"raised": 1000} and "verifier exploded" in parts[0].messages[0]
