"""The harness's options are written once (``stats.config``), and its per-call contract check goes
through the one contract checker for NumPy arrays and torch tensors alike (``stats.call_check``)."""
import numpy as np
import pytest

import rass_theory as rt
from rass_theory.stats.call_check import CallChecker
from rass_theory.stats.config import (DEFAULT_CHUNK_SIZE, DEFAULT_DTYPES, DEFAULT_N_SAMPLES, OPTION_DEFAULTS,
                                      check_options, harness_config)
from rass_theory.stats.family import family_size, pass_plan, pass_test_names, tail_test_names
from rass_theory.stats.report import ExactnessReport
from rass_theory.verifiers._contract import contract_check

from _stats_stubs import resample, result

SMALL = dict(n_samples=2_000, chunk_size=2_000, n_bins=256, two_sample_size=0, rng=3, dtype="float64")


class TestOptionsWrittenOnce:
    def test_unknown_option_is_named(self):
        with pytest.raises(TypeError, match="n_sample"):
            rt.check_exactness(resample, K=4, delta=0.5, n_sample=10)
        with pytest.raises(TypeError, match="bogus"):
            rt.certify(resample, [(4, 0.5, 8)], bogus=1)
        with pytest.raises(TypeError, match="bogus"):
            check_options({"bogus": 1})

    def test_dtype_objects_stand_for_their_names(self):
        """``np.float32`` or ``torch.bfloat16`` used to raise "must be a dtype name"."""
        from rass_theory.stats.config import check_dtypes

        assert check_dtypes(np.float64, "numpy") == ("float64",)
        assert check_dtypes([np.dtype("float32"), "float64"], "numpy") == ("float32", "float64")
        torch = pytest.importorskip("torch")
        assert check_dtypes(torch.bfloat16, "torch") == ("bfloat16",)
        with pytest.raises(ValueError, match="dtype must be among .* got 'float16'"):
            check_dtypes(np.float16, "numpy")
        with pytest.raises(ValueError, match="got 'int32'"):
            check_dtypes(torch.int32, "torch")
        with pytest.raises(TypeError, match="dtype must be a dtype name"):
            check_dtypes(object(), "numpy")
        rep = rt.check_exactness(resample, K=4, delta=0.5, dim=2, **dict(SMALL, dtype=np.float64))
        assert rep.passed

    def test_defaults_come_from_the_one_table(self):
        cfg = harness_config(resample, 4, 0.5, 8, rng=0)
        assert OPTION_DEFAULTS["chunk_size"] == DEFAULT_CHUNK_SIZE == cfg.chunk_size
        assert (cfg.n_samples, cfg.dtypes) == (DEFAULT_N_SAMPLES, DEFAULT_DTYPES)
        assert (cfg.alpha, cfg.false_pass_rate, cfg.backend) == (OPTION_DEFAULTS["alpha"],
                                                                 OPTION_DEFAULTS["false_pass_rate"], "numpy")
        assert check_options({"alpha": 0.01})["alpha"] == 0.01 and check_options({})["stop_early"] is True

    def test_public_signature_forwards_options(self):
        import inspect

        params = inspect.signature(rt.check_exactness).parameters
        assert list(params)[:4] == ["verifier", "K", "delta", "dim"]
        assert params["options"].kind is inspect.Parameter.VAR_KEYWORD

    def test_test_names_are_the_tests_run(self):
        cfg = harness_config(resample, 4, 0.5, 8, **{k: v for k, v in SMALL.items()})
        rep = rt.check_exactness(resample, K=4, delta=0.5, dim=8, **SMALL)
        names = [t.name for t in rep.tests if t.name != "contract"]
        assert names == pass_test_names(cfg) + tail_test_names(cfg.dim, cfg.n_directions)
        assert len(names) == family_size(cfg) and [n for n, _ in pass_plan(cfg, 0)] == pass_test_names(cfg)


class TestOneResultType:
    def test_a_grid_is_a_report_with_cells(self):
        rep = rt.certify(resample, [(2, 0.5, 3), (4, 1.0, 8)], show=False, **SMALL)
        assert isinstance(rep, ExactnessReport) and len(rep.cells) == 2 and rep.passed
        assert all(isinstance(c, ExactnessReport) and not c.cells for c in rep.cells)
        assert rep.n_tests == sum(len(c.tests) - 1 for c in rep.cells) + len(rep.grid_tests)
        assert rep.tests[0].name == f"K=2,delta=0.5/{rep.cells[0].tests[0].name}"
        assert rep.acceptance_rate == rep.cells[0].acceptance_rate
        assert rep.to_dict()["cells"][1]["K"] == 4 and "certify: PASSED over 2 cells" in str(rep)


def _children(n=6, K=3, d=4, seed=0):
    return np.random.default_rng(seed).standard_normal((n, K, d))


class TestCallChecker:
    def _bad_result(self, children):
        n = children.shape[0]
        states = children[:, 0].copy()
        accepted = np.ones(n, bool)
        index = np.zeros(n, np.int64)
        states[1] += 1.0               # not a copy of the child it names
        states[2] = np.nan             # not finite
        accepted[3], index[3] = False, -1
        states[3] = children[3, 2]     # marked not accepted but returns a child unchanged
        return states, accepted, index

    def test_contract_rows_and_harness_clauses(self):
        children = _children()
        checker = CallChecker(6, 4, "float64")
        checker.record(0, 6, result(*self._bad_result(children)), children, np.float64)
        assert checker.valid.tolist() == [True, False, False, False, True, True]
        kinds = {k for k, v in zip(rt.stats.streaming.VIOLATION_KINDS, checker.violations) if v}
        assert kinds == {"not_a_copy", "non_finite", "uncorrected_copy"}

    def test_torch_tensors_are_checked_by_the_same_code(self):
        torch = pytest.importorskip("torch")
        children = _children()
        states, accepted, index = self._bad_result(children)
        found_np = contract_check(result(states, accepted, index), children)
        found_t = contract_check(result(torch.as_tensor(states), torch.as_tensor(accepted), torch.as_tensor(index)),
                                 torch.as_tensor(children))
        assert [(i.kind, i.n_rows, i.rows) for i in found_t.issues] == [(i.kind, i.n_rows, i.rows)
                                                                        for i in found_np.issues]
        assert np.array_equal(found_t.valid, found_np.valid)
        a, b = CallChecker(6, 4, "float64"), CallChecker(6, 4, "float64")
        a.record(0, 6, result(states, accepted, index), children)
        b.record(0, 6, result(torch.as_tensor(states), torch.as_tensor(accepted), torch.as_tensor(index)), children)
        assert np.array_equal(a.valid, b.valid) and np.array_equal(a.violations, b.violations)

    def test_whole_array_problem_invalidates_the_call(self):
        children = _children()
        checker = CallChecker(6, 4, "float64")
        checker.record(0, 6, result(children[:, 0, :2], np.zeros(6, bool), np.full(6, -1)), children)
        assert not checker.valid.any() and checker.returned
