"""The shipped table of certified optima and the warm starts it feeds (proofs/P4-weight-program.md, P4.7)."""
import numpy as np
import pytest

from rass_theory.optimize import rank_weights as rw
from rass_theory.exact.segments import certified_gap, evaluate_tv, fw_gap


@pytest.fixture
def empty_cache():
    """An empty memo of solved (K, delta), so the solves below really run (only the table, or
    nothing, supplies starts: there is no per-process warm state)."""
    rw._optimal_rank_weights.cache_clear()
    yield
    rw._optimal_rank_weights.cache_clear()


def _gap(K, delta, w):
    ev = evaluate_tv([rw._segment(K)], w, delta,
                     spacing=rw.segment_spacing(K), hessian=False)
    return min(fw_gap(ev, w), certified_gap(ev, w)), ev


class TestTableContents:
    def test_covers_the_documented_Ks_in_ascending_delta(self):
        table = rw._raw_table()
        assert set(table) == {2, 3, 4, 5, 6, 7, 8, 16}
        for K, rows in table.items():
            d = np.array([r[0] for r in rows])
            assert d.size > 5 and np.all(np.diff(d) > 0)
            for _, left, S, w, c in rows:
                assert len(S) == len(w) and max(S) < K and min(w) > 0
                assert abs(sum(w) - 1.0) < 1e-10 and np.all(np.diff(c) > 0)
                assert isinstance(left, bool)

    @pytest.mark.parametrize("K", [2, 5, 8, 16])
    def test_rows_are_certified_at_their_delta(self, K):
        deltas, rows = rw._table(K)
        for i in np.linspace(0, deltas.size - 1, 5).astype(int):
            d, w, c, left = rows[i]
            gap, ev = _gap(K, d, w)
            assert gap <= 1e-9, (K, d, gap)
            assert ev.crossings.size == c.size and rw._left_in_A(ev) == left
            np.testing.assert_allclose(ev.crossings, c, atol=1e-8)

    def test_lookup_is_deterministic_nearest_first(self):
        deltas, _ = rw._table(8)
        mid = 0.5 * (deltas[10] + deltas[11])
        a = rw._table_neighbours(8, mid + 1e-3)
        b = rw._table_neighbours(8, mid + 1e-3)
        assert [r[0] for r in a] == [r[0] for r in b] == [deltas[11], deltas[10]]
        # exactly half-way: the lower row first (ties broken by index)
        assert rw._table_neighbours(8, mid)[0][0] in (deltas[10], deltas[11])
        assert rw._table_neighbours(8, 1e9)[0][0] == deltas[-1]
        assert rw._table_neighbours(9, 1.0) == [] and rw._table_neighbours(32, 1.0) == []


class TestTableWarmStarts:
    @pytest.mark.parametrize("K,delta", [(3, 0.337), (8, 0.53), (8, 1.17), (8, 1.91), (16, 0.813),
                                         (8, 0.0123)])
    def test_far_warm_call_reproduces_a_fresh_solve(self, K, delta, empty_cache, monkeypatch):
        res = rw.optimal_rank_weights(K, delta)
        assert res.status == "optimal" and res.gap <= 1e-9
        assert "table" in res.solver
        monkeypatch.setattr(rw, "_TABLE_ENABLED", False)
        fresh = rw._solve(K, delta)
        assert fresh.gap <= 1e-9
        assert abs(res.acceptance - fresh.acceptance) <= 2e-9
        np.testing.assert_allclose(res.weights, fresh.weights, atol=1e-5)
        gap, _ = _gap(K, delta, res.weights)
        assert gap <= 1e-9

    def test_bad_table_row_falls_back_to_the_lp(self, empty_cache, monkeypatch):
        K, delta = 8, 0.9
        bad = (0.9, np.eye(K)[0], np.array([-1.0, 0.0, 1.0]), True)
        monkeypatch.setattr(rw, "_table_neighbours", lambda K_, d_: [bad])
        res = rw.optimal_rank_weights(K, delta)
        assert res.status == "optimal" and res.gap <= 1e-9
        assert "table" not in res.solver

    def test_disabled_table_gives_the_same_optimum(self, empty_cache, monkeypatch):
        on = rw.optimal_rank_weights(6, 1.234)
        monkeypatch.setattr(rw, "_TABLE_ENABLED", False)
        off = rw.optimal_rank_weights(6, 1.234)
        assert "table" in on.solver and "table" not in off.solver
        assert abs(on.acceptance - off.acceptance) <= max(on.gap, off.gap) + 1e-12

    def test_past_the_last_row_the_top_vertex_is_certified(self, empty_cache):
        deltas, _ = rw._table(2)
        d = float(deltas[-1]) + 0.37
        assert d < 2.0  # below the general top-vertex threshold: the table decides
        res = rw.optimal_rank_weights(2, d)
        assert res.solver.startswith("top-rank vertex") and res.status == "optimal"
        np.testing.assert_array_equal(res.weights, [0.0, 1.0])
        assert res.gap <= 1e-12
