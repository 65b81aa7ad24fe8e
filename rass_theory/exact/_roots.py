"""The engine's bracketed root finder: :meth:`rass_theory.backend.NumpyBackend.find_root`.

Kept as a name for the callers of :mod:`rass_theory.exact`; the one implementation lives in the
backend namespace (``nx.find_root``), where torch has its fixed-iteration twin.
"""
from __future__ import annotations

from rass_theory.backend import NUMPY

__all__ = ["bracketed_roots"]

#: ``bracketed_roots(fun, a, b, *, args=(), xrtol=4 eps, xatol=4 eps, maxiter=200)``
bracketed_roots = NUMPY.find_root
