"""The harness's reused work arrays (:mod:`rass_theory.stats._workspace`) never leak between uses.

Reusing memory from one chunk to the next must not change a single count: a chunk's counts are
the same whether it runs first, after a larger chunk, after a smaller one or in another thread.
"""
import threading

import numpy as np
import pytest

from rass_theory.stats import config as CF
from rass_theory.stats._workspace import work_array
from rass_theory.stats.chunks import run_chunk_numpy, run_plan
from rass_theory.stats.node import EdgeBinner, _edges
from rass_theory import verifiers


class TestWorkArray:
    def test_same_name_same_memory_and_growth(self):
        a = work_array("test.a", (3, 4))
        assert a.shape == (3, 4) and a.dtype == np.float64 and a.flags.c_contiguous
        b = work_array("test.a", 5)
        assert np.shares_memory(a, b)
        big = work_array("test.a", (1000, 3))
        assert big.shape == (1000, 3)
        assert not np.shares_memory(work_array("test.b", 5), work_array("test.a", 5))
        assert work_array("test.a", 4, np.intp).dtype == np.intp

    def test_threads_get_their_own_buffers(self):
        mine = work_array("test.thread", 64)
        seen = []
        t = threading.Thread(target=lambda: seen.append(work_array("test.thread", 64)))
        t.start()
        t.join()
        assert not np.shares_memory(mine, seen[0])


def _counts(spec_list, node, v, buffers):
    return [run_chunk_numpy(v, node, spec, buffers) for spec in spec_list]


def _same(a, b):
    assert (a.n_rows, a.n_valid, a.n_accepted) == (b.n_rows, b.n_valid, b.n_accepted)
    for k in a.arrays:
        assert np.array_equal(a.arrays[k], b.arrays[k]), k
    assert np.array_equal(a.subsample, b.subsample)


@pytest.mark.parametrize("dim", [2, 8, 40])
def test_chunk_counts_do_not_depend_on_earlier_chunks(dim):
    v = verifiers.rass()
    cfg = CF.harness_config(v, 3, 1.0, dim, n_samples=7000, chunk_size=3000, rng=11, dtype="float64",
                            two_sample_size=200)
    node = CF.build_node(cfg)
    specs = run_plan(cfg)                      # chunks of 3000, 3000 and 1000 rows
    fresh = [run_chunk_numpy(v, node, s, None) for s in specs]
    buffers = {}
    reused = _counts(specs[::-1], node, v, buffers)[::-1]   # small chunk first, then the larger ones
    again = _counts(specs, node, v, buffers)
    for f, r, a in zip(fresh, reused, again):
        _same(f, r)
        _same(f, a)


def test_binner_is_exact_in_concurrent_threads():
    edges = _edges(4096, 2)[0]
    binner = EdgeBinner(edges)
    xs = [np.random.default_rng(s).standard_normal(150_000) * 1.5 for s in range(4)]
    results = [None] * 4

    def work(i):
        for _ in range(3):
            results[i] = binner.bin(xs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, r in zip(xs, results):
        assert np.array_equal(r, np.searchsorted(edges, x, side="right"))
