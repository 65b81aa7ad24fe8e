"""Batched verifiers for speculative sampling, and the verifier contract checker.

One class per rule serves NumPy arrays and torch tensors alike: the back end follows the inputs
(:func:`rass_theory.backend.get_backend`) and every rule runs the shared kernels of
:mod:`rass_theory.verifiers.kernels`.  :mod:`rass_theory.torch.verifiers` gives the same factories.

Every verifier is a callable

    verifier(children (n, K, d), mu_draft (n, d), mu_target (n, d), sigma scalar or (n,), rng)
        -> VerifierResult(states (n, d), accepted (n,) bool, child_index (n,) int)

with ``child_index == -1`` where not accepted and, where accepted, ``states[i]`` equal bit for bit
to ``children[i, child_index[i]]`` (the verifier contract, ``docs/ARCHITECTURE.md``).  Rows are processed without a Python loop
and independently: each rule draws its uniforms up front as ``rng.random((n, m))`` so row ``i``'s
output depends only on its inputs and on its own block of the stream.

>>> import numpy as np, rass_theory as rt
>>> rng = np.random.default_rng(0)
>>> mu_d, mu_t = np.zeros((5, 3)), np.full((5, 3), 0.2)
>>> children = mu_d[:, None, :] + rng.standard_normal((5, 1, 3))
>>> res = rt.verifiers.rmc()(children, mu_d, mu_t, 1.0, rng)
>>> res.states.shape, res.accepted.dtype, rt.verifiers.check_contract(res, children)
((5, 3), dtype('bool'), [])
"""
from __future__ import annotations

from ._contract import VIOLATION_KINDS, ContractIssue, ContractViolation, check_contract
from ._result import VerifierResult
from .adapter import NodeRuleVerifier, from_node_rule
from .dgrs import DGRSVerifier, dgrs
from .optimal_list import OptimalListVerifier, optimal_list
from .policy import PolicyVerifier, policy
from .rass import RASSVerifier, rass
from .resample import ResampleVerifier, resample
from .rmc import RMCVerifier, rmc
from .threshold import ThresholdVerifier, threshold

__all__ = [
    "rmc", "dgrs", "rass", "resample", "threshold", "policy", "from_node_rule", "optimal_list",
    "check_contract", "VerifierResult", "ContractViolation", "ContractIssue", "VIOLATION_KINDS",
    "get_verifier", "rule_key", "VERIFIER_NAMES",
    "RMCVerifier", "DGRSVerifier", "RASSVerifier", "ResampleVerifier", "PolicyVerifier", "NodeRuleVerifier",
    "OptimalListVerifier", "ThresholdVerifier",
]

#: Names accepted by :func:`get_verifier`.
VERIFIER_NAMES = ("rmc", "dgrs", "rass", "threshold", "resample", "optimal_list")
#: the factories without arguments, by :func:`rule_key` (``threshold`` takes ``K``)
_FACTORIES = {"rmc": rmc, "dgrs": dgrs, "rass": rass, "resample": resample, "optimallist": optimal_list}


def get_verifier(name_or_callable, K: int | None = None):
    """Resolve a rule name or a user callable to a batched verifier.

    Parameters
    ----------
    name_or_callable : str or callable
        One of :data:`VERIFIER_NAMES`: ``"rmc"``, ``"dgrs"``, ``"rass"`` (optimal weights),
        ``"threshold"`` (optimal threshold policy), ``"resample"``, ``"optimal_list"`` --
        case-insensitive, ``-``/``_`` ignored -- or any callable obeying the contract, returned
        unchanged.  The same classes serve NumPy arrays and torch tensors.
    K : int, optional
        Children per node; checked against the rule (``"rmc"`` needs ``K = 1``).

    Returns
    -------
    callable
        ``verifier(children, mu_draft, mu_target, sigma, rng) -> VerifierResult``.
    """
    from .._validation import check_K

    if K is not None:
        K = check_K(K)
    if callable(name_or_callable) and not isinstance(name_or_callable, str):
        return name_or_callable
    if not isinstance(name_or_callable, str):
        raise TypeError(f"verifier must be a rule name {VERIFIER_NAMES} or a callable, "
                        f"got {type(name_or_callable).__name__}")
    key = rule_key(name_or_callable)
    if key == "rmc" and K is not None and K != 1:
        raise ValueError(f"verifier 'rmc' needs K = 1, got K = {K}")
    if key == "threshold":
        return threshold(K=K)
    if key not in _FACTORIES:
        raise ValueError(f"verifier must be one of {VERIFIER_NAMES} or a callable, got {name_or_callable!r}")
    return _FACTORIES[key]()


def rule_key(name: str) -> str:
    """A rule name as :func:`get_verifier` reads it: case-insensitive, ``-`` and ``_`` ignored."""
    return name.strip().lower().replace("-", "").replace("_", "")
