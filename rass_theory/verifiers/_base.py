"""Common base of the built-in verifiers: a callable with a name and its exact acceptance."""
from __future__ import annotations

__all__ = ["BuiltinVerifier", "KernelVerifier"]


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


class KernelVerifier(BuiltinVerifier):
    """A built-in rule run through the shared kernels: prepare the batch, draw its uniforms, run.

    Subclasses implement ``run(batch, u)`` and say how many uniforms a row takes
    (:meth:`uniforms_per_row`); the uniforms are drawn up front as one ``(n, m)`` block, so row
    ``i``'s output depends only on its inputs and its own block of the stream.
    """

    def uniforms_per_row(self, K: int) -> int:
        """Uniforms per row: rank, accept, residual for the rank rules."""
        return 3

    def __call__(self, children, mu_draft, mu_target, sigma, rng=None):
        from ._core import prepare

        batch = prepare(children, mu_draft, mu_target, sigma, rng, K=self.K, host=True)
        return self.run(batch, batch.uniform(batch.n, self.uniforms_per_row(batch.K)))
