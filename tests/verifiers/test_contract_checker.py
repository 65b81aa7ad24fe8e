"""check_contract: every kind of violation is reported by name, and strict mode raises."""
from types import SimpleNamespace

import numpy as np
import pytest

from rass_theory.verifiers import ContractViolation, VerifierResult, check_contract


@pytest.fixture
def batch(rng):
    children = rng.standard_normal((6, 3, 4))
    index = np.array([0, 2, -1, 1, -1, 0])
    accepted = index >= 0
    states = rng.standard_normal((6, 4))
    states[accepted] = children[np.flatnonzero(accepted), index[accepted]]
    return children, VerifierResult(states, accepted, index)


def kinds(issues):
    return sorted({i.kind for i in issues})


class TestCheckContract:
    def test_valid_result_has_no_issues(self, batch):
        children, res = batch
        assert check_contract(res, children) == []
        assert check_contract(res, children, strict=True) == []

    def test_duck_typed_result_is_accepted(self, batch):
        children, res = batch
        duck = SimpleNamespace(states=res.states, accepted=res.accepted, child_index=res.child_index)
        assert check_contract(duck, children) == []

    def test_float32_child_in_float64_state_counts_as_copy(self, batch):
        children, res = batch
        c32 = children.astype(np.float32)
        states = res.states.copy()
        rows = np.flatnonzero(res.accepted)
        states[rows] = c32[rows, res.child_index[rows]].astype(np.float64)
        assert check_contract(VerifierResult(states, res.accepted, res.child_index), c32) == []

    def test_missing_field(self, batch):
        children, res = batch
        issues = check_contract(SimpleNamespace(states=res.states, accepted=res.accepted), children)
        assert kinds(issues) == ["missing_field"]
        assert "child_index" in str(issues[0])

    def test_wrong_shapes(self, batch):
        children, res = batch
        issues = check_contract(VerifierResult(res.states[:, :2], res.accepted[:5], res.child_index), children)
        assert kinds(issues) == ["shape"]
        assert {("states" in str(i)) or ("accepted" in str(i)) for i in issues} == {True}

    def test_wrong_dtypes(self, batch):
        children, res = batch
        issues = check_contract(VerifierResult(res.states.astype(int), res.accepted.astype(int),
                                               res.child_index.astype(float)), children)
        assert kinds(issues) == ["dtype"] and len(issues) == 3

    def test_non_finite_state(self, batch):
        children, res = batch
        states = res.states.copy()
        states[2, 1] = np.nan
        issues = check_contract(VerifierResult(states, res.accepted, res.child_index), children)
        assert kinds(issues) == ["non_finite"] and issues[0].rows == (2,)

    def test_index_out_of_range(self, batch):
        children, res = batch
        index = res.child_index.copy()
        index[0] = 3
        issues = check_contract(VerifierResult(res.states, res.accepted, index), children)
        assert kinds(issues) == ["index_range"]
        assert "[-1, 2]" in str(issues[0])

    def test_accepted_index_mismatch(self, batch):
        children, res = batch
        accepted = res.accepted.copy()
        accepted[2] = True  # index -1 but accepted
        accepted[1] = False  # index 2 but not accepted
        issues = check_contract(VerifierResult(res.states, accepted, res.child_index), children)
        assert kinds(issues) == ["accepted_index_mismatch"] and issues[0].n_rows == 2

    def test_state_that_is_not_the_claimed_child(self, batch):
        children, res = batch
        states = res.states.copy()
        states[3] = np.nextafter(states[3], np.inf)  # one ulp off: not a copy
        issues = check_contract(VerifierResult(states, res.accepted, res.child_index), children)
        assert kinds(issues) == ["not_a_copy"] and issues[0].rows == (3,)

    def test_strict_mode_raises_value_error_naming_problem(self, batch):
        children, res = batch
        index = res.child_index.copy()
        index[0] = 1  # claims child 1 but holds child 0
        with pytest.raises(ContractViolation, match="not_a_copy"):
            check_contract(VerifierResult(res.states, res.accepted, index), children, strict=True)
        assert issubclass(ContractViolation, ValueError)

    def test_bad_children_argument(self, batch):
        _, res = batch
        with pytest.raises(ValueError, match="children"):
            check_contract(res, np.zeros((6, 4)))


class TestMetadataOnly:
    """``contract_check(..., values=False)``: the whole-array clauses from metadata, no host copy."""

    def test_meta_tensors_are_checked_without_reading_them(self):
        torch = pytest.importorskip("torch")
        from rass_theory.verifiers._contract import contract_check

        children = torch.empty((6, 3, 4), device="meta")
        good = SimpleNamespace(states=torch.empty((6, 4), device="meta"),
                               accepted=torch.empty(6, dtype=torch.bool, device="meta"),
                               child_index=torch.empty(6, dtype=torch.int64, device="meta"))
        found = contract_check(good, children, values=False)
        assert found.issues == [] and found.valid is None and found.states is good.states
        # reading values needs the data, which a meta tensor has not: the full check cannot copy it
        assert {i.kind for i in contract_check(good, children).issues} == {"not_an_array"}

    def test_same_clauses_and_messages_as_numpy(self, batch):
        torch = pytest.importorskip("torch")
        from rass_theory.verifiers._contract import contract_check

        children, res = batch
        bad_np = VerifierResult(res.states[:, :2], res.accepted.astype(np.int8), res.child_index.astype(float))
        bad_t = SimpleNamespace(states=torch.as_tensor(bad_np.states), accepted=torch.as_tensor(bad_np.accepted),
                                child_index=torch.as_tensor(bad_np.child_index))
        want = [(i.kind, i.message.replace("float64", "F").replace("int8", "I"))
                for i in contract_check(bad_np, children).issues]
        got = [(i.kind, i.message.replace("torch.float64", "F").replace("torch.int8", "I"))
               for i in contract_check(bad_t, torch.as_tensor(children), values=False).issues]
        assert got == want and [k for k, _ in got] == ["shape", "dtype", "dtype"]
