"""The harness's statistics run on one BLAS thread and leave the caller's BLAS setting as it was."""
from __future__ import annotations

import numpy as np
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from rass_theory.stats import rowstats  # noqa: E402
from rass_theory.stats._threads import single_blas_thread  # noqa: E402


def _blas_threads():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_one_thread_inside_and_restored_after(monkeypatch):
    before = _blas_threads()
    seen = []
    real = rowstats._row_pass

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(rowstats, "_row_pass", spy)
    from rass_theory.stats.chunks import run_chunk_numpy
    from rass_theory.stats.node import SyntheticNode, chunk_plan
    from _stats_stubs import resample

    node = SyntheticNode.build(2, 1.0, 8, entropy=1, n_bins=256)
    run_chunk_numpy(resample, node, chunk_plan(500, 500, 1, 0)[0])
    assert seen and all(all(t == 1 for t in s) for s in seen)
    with single_blas_thread():
        assert all(t == 1 for t in _blas_threads())
    assert _blas_threads() == before
    x = np.ones((4, 4))
    assert np.array_equal(x @ x, np.full((4, 4), 4.0))


def test_a_thread_leaving_does_not_lift_the_limit_under_another():
    """Thread A enters, thread B tries to enter 50 ms later, A leaves at 200 ms: B must see one BLAS
    thread for all of its time inside.

    BLAS's thread count is process-wide and threadpoolctl lets one thread own it; with a per-entry
    limit, B's limit was ignored while A owned the setting and A's exit restored two threads under
    B, which moved a threaded Dask worker's cross-covariance statistics in their last digit.
    """
    import threading
    import time

    seen = {"A": [], "B": []}

    def inside(name, first_wait, hold):
        time.sleep(first_wait)
        with single_blas_thread():
            seen[name].append(_blas_threads())
            time.sleep(hold)
            seen[name].append(_blas_threads())

    before = _blas_threads()
    if not before or max(before) < 2:
        pytest.skip("BLAS runs on one thread here: nothing to limit")
    ts = [threading.Thread(target=inside, args=("A", 0.0, 0.2)),
          threading.Thread(target=inside, args=("B", 0.05, 0.3))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert len(seen["A"]) == 2 and len(seen["B"]) == 2
    assert all(all(n == 1 for n in s) for s in seen["A"] + seen["B"]), seen
    assert _blas_threads() == before


def test_threaded_row_statistics_equal_sequential():
    """Two chunks' statistics computed concurrently in threads equal those of a sequential run, bit for bit."""
    from concurrent.futures import ThreadPoolExecutor

    from rass_theory.stats.chunks import run_chunk_numpy
    from rass_theory.stats.node import SyntheticNode, chunk_plan
    from _stats_stubs import resample

    node = SyntheticNode.build(4, 0.5, 6, entropy=9, n_bins=256)
    specs = chunk_plan(40_000, 10_000, 1, 0)
    if max(_blas_threads() or [1]) < 2:
        pytest.skip("BLAS runs on one thread here: the threads cannot disagree")
    seq = [run_chunk_numpy(resample, node, s) for s in specs]
    for _ in range(3):
        with ThreadPoolExecutor(2) as ex:
            par = list(ex.map(lambda s: run_chunk_numpy(resample, node, s), specs))
        for a, b in zip(seq, par):
            assert np.array_equal(a.xcov_sums, b.xcov_sums)
            assert np.array_equal(a.xcov_matrix, b.xcov_matrix)
