"""Checker for the batched verifier contract (``docs/ARCHITECTURE.md``, "Public API and the verifier contract").

A verifier is any callable ``verifier(children, mu_draft, mu_target, sigma, rng)``; the object it
returns must expose ``states (n, d)``, ``accepted (n,)`` of bool and ``child_index (n,)`` of int,
with ``child_index == -1`` exactly where ``accepted`` is false and, where accepted,
``states[i]`` equal bit for bit to ``children[i, child_index[i]]``.  The checker is duck-typed
so that user code not built on :class:`VerifierResult` is checked the same way, and back-end
neutral: NumPy arrays and torch tensors (any device; bfloat16 widened to float32, exactly) are
checked by the same code.  This is the one contract checker: the exactness harness
(:class:`rass_theory.stats.call_check.CallChecker`) and the diffusion samplers of both back ends
(:func:`rass_theory.diffusion._contract.check_result`; the torch sampler with ``values=False``,
metadata only) call :func:`contract_check` and add only their own clauses.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ContractViolation", "ContractIssue", "ContractCheck", "check_contract", "contract_check",
           "as_host_array", "VIOLATION_KINDS"]

#: Every kind of violation the checker can report, in the order it checks them.
VIOLATION_KINDS = (
    "missing_field",
    "not_an_array",
    "shape",
    "dtype",
    "non_finite",
    "index_range",
    "accepted_index_mismatch",
    "not_a_copy",
)


class ContractViolation(ValueError):
    """Raised by ``check_contract(..., strict=True)``; the message names every problem found.

    Attributes
    ----------
    issues : list of ContractIssue
    """

    def __init__(self, issues):
        self.issues = list(issues)
        super().__init__("verifier broke the contract: " + "; ".join(str(i) for i in self.issues))


@dataclass(frozen=True)
class ContractIssue:
    """One contract violation.

    Attributes
    ----------
    kind : str
        One of :data:`VIOLATION_KINDS`.
    message : str
        Human-readable description naming the field and the rule broken.
    n_rows : int
        Number of rows affected (the batch size for whole-array problems).
    rows : tuple of int
        Up to five example row indices (empty for whole-array problems).
    """

    kind: str
    message: str
    n_rows: int
    rows: tuple = ()

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


@dataclass(frozen=True)
class ContractCheck:
    """What :func:`contract_check` found, with the host arrays it checked.

    Attributes
    ----------
    issues : list of ContractIssue
        Empty when the contract holds.
    states, accepted, child_index : ndarray or None
        The result's fields as host NumPy arrays (``None`` where a field is missing or cannot be
        converted).
    valid : ndarray of bool, shape (n,), or None
        Rows that satisfy every row-wise clause; ``None`` when a whole-array problem (missing
        field, shape, dtype) made row-wise checks meaningless.
    """

    issues: list
    states: object = None
    accepted: object = None
    child_index: object = None
    valid: object = None

    @property
    def whole_array(self) -> bool:
        """A whole-array problem was found (``valid`` is ``None``)."""
        return self.valid is None


def as_host_array(value):
    """``value`` as a host NumPy array; a torch tensor is detached and copied to the host
    (bfloat16 widened to float32, exactly).  Duck-typed: torch is never imported here."""
    if _is_tensor(value):
        t = value.detach()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.cpu().numpy()
    return np.asarray(value)


def _rows_issue(kind: str, mask: np.ndarray, message: str) -> ContractIssue:
    rows = np.flatnonzero(mask)
    examples = tuple(int(r) for r in rows[:5])
    return ContractIssue(kind, f"{message} ({rows.size} row(s), e.g. rows {list(examples)})", int(rows.size), examples)


def check_contract(result, children, *, strict: bool = False) -> list:
    """Check a verifier's output against the batched contract.

    Parameters
    ----------
    result : object
        What the verifier returned; must have attributes ``states``, ``accepted``,
        ``child_index``.
    children : array_like or tensor, shape (n, K, d)
        The children the verifier was given (NumPy or torch, as the result's fields).
    strict : bool, default False
        Raise :class:`ContractViolation` (a ``ValueError``) instead of returning the issues.

    Returns
    -------
    list of ContractIssue
        Empty when the contract holds.  Whole-array problems (missing field, wrong shape or
        dtype) stop the row-wise checks, which would be meaningless.

    Notes
    -----
    Checks, in order: the three fields exist and are arrays; ``states`` has shape ``(n, d)`` and
    a real floating dtype, ``accepted`` shape ``(n,)`` and dtype bool, ``child_index`` shape
    ``(n,)`` and an integer dtype; states are finite; ``-1 <= child_index < K``;
    ``accepted[i] <=> child_index[i] != -1``; and where accepted,
    ``states[i] == children[i, child_index[i]]`` exactly (compared after NumPy type promotion, so
    a float32 child stored in a float64 state still counts as a copy).
    """
    issues = contract_check(result, children).issues
    if strict and issues:
        raise ContractViolation(issues)
    return issues


def _dtype_kind(arr) -> str:
    """NumPy's ``dtype.kind`` of an array or a tensor, read from metadata only (torch never imported)."""
    dt = arr.dtype
    if isinstance(dt, np.dtype):
        return dt.kind
    if str(dt) == "torch.bool":
        return "b"
    if getattr(dt, "is_complex", False):
        return "c"
    if getattr(dt, "is_floating_point", False):
        return "f"
    return "i" if getattr(dt, "is_signed", False) else "u"


def _is_tensor(value) -> bool:
    return hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "dtype")


def contract_check(result, children, *, values: bool = True) -> ContractCheck:
    """Check a verifier's output against the batched contract; return the issues, the host arrays
    and the per-row validity (see :func:`check_contract` for the clauses, in order).

    ``valid[i]`` holds when row ``i`` is finite, ``-1 <= child_index[i] < K``,
    ``accepted[i] <=> child_index[i] != -1`` and, where accepted, ``states[i]`` equals
    ``children[i, child_index[i]]`` bit for bit.

    With ``values=False`` only the whole-array clauses (fields, shapes, dtypes) are checked, from
    the arrays' metadata: tensors are not copied to the host (no device synchronisation), the
    fields are returned as given and ``valid`` is ``None``.  The torch diffusion sampler checks
    every round this way.
    """
    shape = tuple(children.shape) if _is_tensor(children) else np.shape(children)
    if len(shape) != 3:
        raise ValueError(f"children must have shape (n, K, d), got {shape}")
    n, K, d = shape
    issues: list[ContractIssue] = []

    fields = {}
    for name in ("states", "accepted", "child_index"):
        if not hasattr(result, name):
            issues.append(ContractIssue("missing_field",
                                        f"result of type {type(result).__name__} has no attribute {name!r}", n))
            continue
        value = getattr(result, name)
        try:
            fields[name] = value if _is_tensor(value) and not values else as_host_array(value)
        except Exception as exc:  # noqa: BLE001 - any failure to convert is the user's bug to report
            issues.append(ContractIssue("not_an_array", f"result.{name} cannot be converted to an array: {exc}", n))
    if issues:
        return ContractCheck(issues, *(fields.get(k) for k in ("states", "accepted", "child_index")))

    states, accepted, index = fields["states"], fields["accepted"], fields["child_index"]
    for name, arr, want in (("states", states, (n, d)), ("accepted", accepted, (n,)), ("child_index", index, (n,))):
        if tuple(arr.shape) != want:
            issues.append(ContractIssue("shape", f"result.{name} must have shape {want}, got {tuple(arr.shape)}", n))
    if _dtype_kind(states) != "f":
        issues.append(ContractIssue("dtype", f"result.states must have a real floating dtype, got {states.dtype}", n))
    if _dtype_kind(accepted) != "b":
        issues.append(ContractIssue("dtype", f"result.accepted must have dtype bool, got {accepted.dtype}", n))
    if _dtype_kind(index) not in "iu":
        issues.append(ContractIssue("dtype", f"result.child_index must have an integer dtype, got {index.dtype}", n))
    if issues or not values:
        return ContractCheck(issues, states, accepted, index)

    children = as_host_array(children)
    finite = np.ones(n, bool) if np.isfinite(states).all() else np.isfinite(states).all(axis=1)   # cheap test first
    if not finite.all():
        issues.append(_rows_issue("non_finite", ~finite, "result.states must be finite (it holds NaN or infinity)"))
    in_range = (index >= -1) & (index < K)
    if not in_range.all():
        issues.append(_rows_issue("index_range", ~in_range, f"result.child_index must lie in [-1, K-1] = [-1, {K - 1}]"))
    mismatch = accepted != (index != -1)
    if mismatch.any():
        issues.append(_rows_issue("accepted_index_mismatch", mismatch,
                                  "result.accepted must be True exactly where result.child_index != -1"))
    valid = finite & in_range & ~mismatch
    check = accepted & in_range & (index >= 0)
    rows = np.flatnonzero(check)
    if rows.size:
        differs = rows[~(states[rows] == children[rows, index[rows]]).all(axis=1)]
        valid[differs] = False
        if differs.size:
            issues.append(_rows_issue("not_a_copy", np.isin(np.arange(n), differs),
                                      "result.states[i] claims to be children[i, child_index[i]] but differs from it "
                                      "(where accepted, states must equal that child exactly)"))
    return ContractCheck(issues, states, accepted, index, valid)
