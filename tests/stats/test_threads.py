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
