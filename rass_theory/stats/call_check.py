"""The harness's per-call contract check: :class:`CallChecker` and the calls-in-sequence probe.

The verifier contract itself is checked by the one checker,
:func:`rass_theory.verifiers._contract.contract_check` (NumPy and torch alike).  Added here,
because they concern how the harness calls a verifier: the call raised or wrote into its
read-only inputs, ``states`` did not keep the inputs' dtype, a row marked not accepted returned
a child unchanged (``uncorrected_copy``), and, over two consecutive calls
(:func:`sequence_probe`), the generator did not advance or a result was overwritten.
"""
from __future__ import annotations

import numpy as np

from ..verifiers._contract import contract_check
from .streaming import MAX_MESSAGES, VIOLATION_KINDS

__all__ = ["CallChecker", "sequence_probe", "failure_regimes", "copy_check_applies", "COPY_CHECK_MIN_DIM",
           "REGIME_SPLITS", "raised_kind"]

def raised_kind(exc) -> str:
    text = str(exc).lower()
    return "mutated_input" if ("read-only" in text or "not writeable" in text or "read only" in text) else "raised"


#: Smallest dimension at which the ``uncorrected_copy`` clause is checked, per dtype.  An honest
#: correction coincides with a child bit for bit with probability about ``K (eps (1 + rho))^dim``
#: per row (``eps`` the dtype's, ``rho = ||mu_draft||/sigma <= 1e4``): below 1e-11 for float64 at any
#: dim, for float32 from dim 4 on, for bfloat16 (whose nodes have ``rho <= 1``) from dim 8 on.
COPY_CHECK_MIN_DIM = {"float64": 1, "float32": 4, "bfloat16": 8}


def copy_check_applies(dtype_name, dim) -> bool:
    """Whether the ``uncorrected_copy`` clause is checked for a pass (:data:`COPY_CHECK_MIN_DIM`)."""
    return dim >= COPY_CHECK_MIN_DIM.get(dtype_name, 1)


class CallChecker:
    """Contract check of one verifier call, with the harness's extra clauses.

    Records per-row validity, acceptance and the committed states of a chunk whose rows are
    verified in several calls.  A call that raises, or whose output has a whole-array problem,
    invalidates its rows; row problems invalidate the row (:func:`~rass_theory.verifiers._contract.contract_check`,
    the one contract checker).  Beyond the contract: a row
    marked not accepted whose state equals one of its children bit for bit is an
    ``uncorrected_copy`` (an exact rule's correction is a continuous draw).
    """

    def __init__(self, n, dim, dtype_name, states=None):
        self.dim = dim
        # ``states``: an (n, dim) float64 buffer to record into (reused across chunks; rows of a
        # call that raised keep stale values, which are never read: those rows are invalid)
        self.states = np.zeros((n, dim)) if states is None else states
        self.valid = np.zeros(n, bool)
        self.accepted = np.zeros(n, bool)
        self.violations = np.zeros(len(VIOLATION_KINDS), np.int64)
        self.messages = []
        self.dtype_name = dtype_name
        self.returned = False   # some call returned a result

    def _note(self, kind, rows, message):
        self.violations[VIOLATION_KINDS.index(kind)] += int(rows)
        if len(self.messages) < MAX_MESSAGES and message not in self.messages:
            self.messages.append(message)

    def raised(self, a, b, exc, kind=None, where=""):
        kind = kind or raised_kind(exc)
        what = "wrote into its read-only inputs" if kind == "mutated_input" else "raised"
        self._note(kind, b - a, f"[{kind}] verifier {what} on a batch of {b - a} row(s) ({self.dtype_name} "
                                f"inputs){where}: {type(exc).__name__}: {exc}")

    def record(self, a, b, result, children, expected_dtype=None):
        """Check ``result`` of the call on rows ``a:b`` against ``children`` (NumPy, the dtype given).

        ``expected_dtype``: the inputs' dtype, which ``states`` must have (``states_dtype``
        otherwise; the torch runner checks the tensor's dtype itself and passes ``None``).
        """
        n = b - a
        self.returned = True
        try:
            found = contract_check(result, children)
        except Exception as exc:  # noqa: BLE001 - a malformed result fails the run, not the harness
            self._note("other", n, f"[other] contract check failed on a batch of {n} row(s): {exc}")
            return
        for issue in found.issues:
            kind = issue.kind if issue.kind in VIOLATION_KINDS else "other"
            self._note(kind, issue.n_rows, f"{issue} (batch of {n} row(s), {self.dtype_name})")
        if found.whole_array:
            return
        states = found.states
        if expected_dtype is not None and states.dtype != np.dtype(expected_dtype):
            self._note("states_dtype", n, f"[states_dtype] result.states has dtype {states.dtype} for "
                                          f"{np.dtype(expected_dtype)} inputs: states must keep the inputs' dtype "
                                          f"(batch of {n} row(s))")
            return
        accepted, valid = found.accepted, found.valid.copy()
        children = np.asarray(children)
        if copy_check_applies(self.dtype_name, self.dim) and n:
            # a cheap first-coordinate screen on every row (strided views, no gathers), then the
            # full comparison on the not-accepted candidates only
            first = states[:, 0]
            hit = first == children[:, 0, 0]
            for k in range(1, children.shape[1]):
                hit |= first == children[:, k, 0]
            cand = np.flatnonzero(hit & valid & ~accepted)
            copy = cand[(states[cand, None, :] == children[cand]).all(axis=2).any(axis=1)] if cand.size else cand
            if copy.size:
                self._note("uncorrected_copy", int(copy.size),
                           f"[uncorrected_copy] {int(copy.size)} row(s) marked not accepted return one of "
                           f"their children unchanged (batch of {n} row(s), {self.dtype_name})")
                valid[copy] = False
        self.states[a:b] = states
        self.valid[a:b] = valid
        self.accepted[a:b] = accepted


#: Regimes a failing batch is split into to say where a verifier raises (``failure_regimes``).
REGIME_SPLITS = (("tiny delta (< 0.01)", lambda d, r: d < 0.01), ("large delta (>= 4.5)", lambda d, r: d >= 4.5),
                 ("||mu_draft||/sigma >= 1000 (ordinary delta)", lambda d, r: (r >= 1000) & (d >= 0.01) & (d < 4.5)),
                 ("||mu_draft||/sigma = 0 (ordinary delta)", lambda d, r: (r == 0) & (d >= 0.01) & (d < 4.5)),
                 ("ordinary rows (0.01 <= delta < 4.5, 0 < ||mu_draft||/sigma < 1000)",
                  lambda d, r: (d >= 0.01) & (d < 4.5) & (r > 0) & (r < 1000)))


def failure_regimes(call, delta, rho, dim) -> str:
    """Where a verifier raises: re-run ``call(index_array)`` on each regime's rows of a failing batch.

    Returns ``" (raises on <regimes>; not on <regimes>; dim <d>)"`` for the message, so that a
    verifier that breaks only on tiny deltas, huge draft means or a large dimension says so.
    The verifier's exceptions are caught here as well (never crash the harness).
    """
    bad, good = [], []
    for label, select in REGIME_SPLITS:
        idx = np.flatnonzero(select(delta, rho))
        if idx.size == 0:
            continue
        try:
            call(idx)
        except Exception:  # noqa: BLE001 - a diagnosis, not a verdict
            bad.append(label)
        else:
            good.append(label)
    if not bad and not good:
        return ""
    text = f" (raises on {', '.join(bad) or 'no single regime'}"
    return text + (f"; not on {', '.join(good)}" if good else "") + f"; dim {dim})"


def sequence_probe(call, checker, m, state_of, snapshot, unchanged, states_of):
    """Two consecutive verifier calls on the same ``m`` nodes with fresh children and one generator.

    ``call(j)`` makes probe call ``j`` (0 or 1) and returns its result; ``state_of()`` reads the
    generator's state, ``snapshot``/``unchanged`` copy a result and compare it with its copy,
    ``states_of(result)`` returns its states as a float64 NumPy array (``None`` if unusable).
    Named contract failures (counted once per probe): ``rng_not_advanced`` (the generator's state,
    spawn count included, is the same before and after call 0: the verifier reseeded or drew from
    a copy), ``result_aliased`` (call 0's result changed when call 1 ran: a view of a reused
    buffer), ``sequence_raised``.  Returns the two calls' states, or ``None``.
    """
    outs = []
    for j in range(2):
        before = state_of()
        try:
            res = call(j)
        except Exception as exc:  # noqa: BLE001 - the verifier's failure is a verdict
            checker._note("sequence_raised", 1, f"[sequence_raised] verifier raised on the second of two consecutive "
                                                f"calls ({checker.dtype_name}): {type(exc).__name__}: {exc}")
            return None
        if j == 0:
            if before is not None and state_of() == before:
                checker._note("rng_not_advanced", 1,
                              f"[rng_not_advanced] the caller's generator is in the same state after a call on "
                              f"{m} rows ({checker.dtype_name}): the verifier must draw from the rng it is given "
                              f"(not reseed, not draw from a copy)")
            try:
                snap = snapshot(res)
            except Exception:  # noqa: BLE001 - malformed results are counted by the main calls
                return None
        outs.append(res)
    try:
        if not unchanged(outs[0], snap):
            checker._note("result_aliased", 1, f"[result_aliased] a call's result changed when the next call ran "
                                               f"({checker.dtype_name}): results must not share memory with the "
                                               f"verifier's buffers")
        return [states_of(r) for r in outs]
    except Exception:  # noqa: BLE001
        return None
