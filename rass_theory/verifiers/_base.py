"""Common base of the built-in verifiers: a callable with a name and its exact acceptance."""
from __future__ import annotations

__all__ = ["BuiltinVerifier"]


class BuiltinVerifier:
    """Base class of the project's batched verifiers.

    Subclasses implement ``__call__(children, mu_draft, mu_target, sigma, rng) -> VerifierResult``.
    The harness only needs the call signature; the extra attributes below let it find the exact
    acceptance of a built-in rule automatically.

    Attributes
    ----------
    name : str
        Short rule name (``"rmc"``, ``"dgrs"``, ``"rass"``, ...).
    K : int or None
        Number of children the rule requires, ``None`` when any ``K`` works.
    """

    name: str = "verifier"
    K: int | None = None

    def expected_acceptance(self, K: int, delta: float) -> float | None:
        """Exact probability that a node with ``K`` children at ``delta`` commits a child.

        ``None`` when the rule has no closed form available here.
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
