"""The synthetic node of the exactness harness, and the seeded chunk plan.

One node in rank-1 coordinates (DESIGN section 2): a random draft mean ``mu_draft`` in
``R^dim``, a random unit direction ``e`` and ``mu_target = mu_draft + sigma * delta * e``, so that
``delta = ||mu_target - mu_draft|| / sigma`` exactly as the verifiers compute it.  For ``delta = 0``
the direction is still a well-defined random unit vector: the null laws below do not depend on it.

Under an exact verifier the committed state ``x`` has law ``N(mu_target, sigma^2 I)``; with
``z = (x - mu_draft) / sigma``, ``s = <e, z>``, ``z_perp = z - s e``:

* ``s - delta ~ N(0, 1)``;
* ``||z_perp||^2 ~ chi^2(dim - 1)``;
* ``<v_j, z> ~ N(0, 1)`` for fixed unit directions ``v_j`` orthogonal to ``e``;
* ``s`` and ``||z_perp||^2`` are independent.

Each statistic is binned by its probability-integral transform into ``n_bins`` equiprobable bins,
through the interior null quantiles (``searchsorted(edges, value, side="right")``), so counts are
integers that add across chunks.

Seeds (no stateful ``SeedSequence.spawn``): every stream is
``SeedSequence(entropy, spawn_key=KEY)`` with ``KEY = (0,)`` for the node, ``(1, i)`` for chunk
``i``, ``(2,)`` for the direct target draws and ``(3,)`` for the permutations of the two-sample
test; inside a chunk, ``(1, i, 0)`` draws the children and ``(1, i, 1)`` seeds the verifier's
``rng``.  Chunk ``i``'s streams therefore do not depend on the number of chunks, which is what makes
resumed and distributed runs bit-identical to a single sequential run.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from scipy import special, stats

from .._validation import check_delta, check_K, check_positive_int

__all__ = ["SyntheticNode", "ChunkSpec", "chunk_plan", "chunk_seed", "stream_seed", "NODE_KEY",
           "TARGET_KEY", "PERMUTATION_KEY"]

NODE_KEY = (0,)
CHUNK_KEY = 1
TARGET_KEY = (2,)
PERMUTATION_KEY = (3,)

#: Number of coarse bins per axis of the joint (s, ||z_perp||^2) histogram.
N_JOINT_BINS = 8


def stream_seed(entropy: int, key: tuple) -> np.random.SeedSequence:
    """Return ``SeedSequence(entropy, spawn_key=key)``: one named random stream of a run."""
    return np.random.SeedSequence(entropy, spawn_key=tuple(int(k) for k in key))


def chunk_seed(entropy: int, index: int) -> np.random.SeedSequence:
    """Seed of chunk ``index``: ``SeedSequence(entropy, spawn_key=(1, index))``."""
    return stream_seed(entropy, (CHUNK_KEY, index))


def sub_seed(seed: np.random.SeedSequence, j: int) -> np.random.SeedSequence:
    """Child ``j`` of ``seed`` by spawn key (pure: calling it twice gives the same stream)."""
    return np.random.SeedSequence(seed.entropy, spawn_key=tuple(seed.spawn_key) + (int(j),))


@dataclass(frozen=True)
class ChunkSpec:
    """One chunk of a harness run.

    Attributes
    ----------
    index : int
        Chunk number, ``0, 1, ...`` in run order.
    n : int
        Rows (nodes) in this chunk.
    seed : numpy.random.SeedSequence
        ``chunk_seed(entropy, index)``.
    keep : int
        Number of leading rows of this chunk that join the two-sample subsample.
    """

    index: int
    n: int
    seed: np.random.SeedSequence = field(repr=False)
    keep: int = 0


def chunk_plan(n_samples: int, chunk_size: int, entropy: int, two_sample_size: int, start: int = 0) -> list:
    """Split ``n_samples`` into chunks of ``chunk_size`` and return the specs from ``start`` on.

    The two-sample subsample is the first ``two_sample_size`` rows in chunk order, so chunk ``i``
    keeps ``clip(two_sample_size - i * chunk_size, 0, n_i)`` rows.
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    n_chunks = -(-n_samples // chunk_size)
    specs = []
    for i in range(start, n_chunks):
        n_i = min(chunk_size, n_samples - i * chunk_size)
        keep = int(np.clip(two_sample_size - i * chunk_size, 0, n_i))
        specs.append(ChunkSpec(i, n_i, chunk_seed(entropy, i), keep))
    return specs


def n_chunks_of(n_samples: int, chunk_size: int) -> int:
    """Number of chunks ``ceil(n_samples / chunk_size)``."""
    return -(-int(n_samples) // int(chunk_size))


@dataclass(frozen=True, eq=False)
class SyntheticNode:
    """The node a harness run verifies, with the statistic's bins.

    Attributes
    ----------
    K, delta, dim, sigma : the node's parameters.
    mu_draft, mu_target : ndarray (dim,)
    direction : ndarray (dim,)
        The unit vector ``e``; ``mu_target = mu_draft + sigma * delta * e``.
    directions : ndarray (n_directions, dim)
        Orthonormal directions orthogonal to ``e`` (no rows when ``dim == 1``).
    n_bins : int
        Number of equiprobable PIT bins of every one-dimensional histogram.
    n_joint_bins : int
        Coarse bins per axis of the joint ``(s, ||z_perp||^2)`` histogram.
    z_edges, r_edges : ndarray (n_bins - 1,)
        Interior quantiles ``j / n_bins`` of ``N(0, 1)`` and of ``chi^2(dim - 1)``.
    """

    K: int
    delta: float
    dim: int
    sigma: float
    mu_draft: np.ndarray
    mu_target: np.ndarray
    direction: np.ndarray
    directions: np.ndarray
    n_bins: int
    n_joint_bins: int
    z_edges: np.ndarray
    r_edges: np.ndarray

    @classmethod
    def build(cls, K, delta, dim, *, sigma=1.0, n_directions=None, n_bins=4096, entropy=0) -> "SyntheticNode":
        """Draw the node from the stream ``SeedSequence(entropy, spawn_key=(0,))``.

        ``n_directions`` defaults to ``min(2, dim - 1)`` and must not exceed ``dim - 1``.
        """
        K = check_K(K)
        delta = check_delta(delta)
        dim = check_positive_int(dim, "dim")
        sigma = _check_sigma(sigma)
        n_bins = check_positive_int(n_bins, "n_bins", minimum=N_JOINT_BINS)
        if n_directions is None:
            n_directions = min(2, dim - 1)
        n_directions = check_positive_int(n_directions, "n_directions", minimum=0, maximum=dim - 1)
        rng = np.random.default_rng(stream_seed(entropy, NODE_KEY))
        mu_draft = rng.standard_normal(dim)
        e = rng.standard_normal(dim)
        e /= np.linalg.norm(e)
        mu_target = mu_draft + sigma * delta * e
        if n_directions:
            g = rng.standard_normal((dim, n_directions))
            g -= np.outer(e, e @ g)
            q, _ = np.linalg.qr(g)
            q -= np.outer(e, e @ q)  # re-orthogonalise against e to working precision
            q /= np.linalg.norm(q, axis=0)
            directions = np.ascontiguousarray(q.T)
        else:
            directions = np.zeros((0, dim))
        z_edges, r_edges = _edges(n_bins, dim)
        for arr in (mu_draft, mu_target, e, directions):
            arr.setflags(write=False)
        return cls(K, delta, dim, sigma, mu_draft, mu_target, e, directions, n_bins, N_JOINT_BINS,
                   z_edges, r_edges)

    @property
    def n_directions(self) -> int:
        """Number of orthogonal test directions."""
        return self.directions.shape[0]

    def standardise(self, states) -> np.ndarray:
        """Return ``z = (x - mu_draft) / sigma`` as float64."""
        return (np.asarray(states, dtype=np.float64) - self.mu_draft) / self.sigma

    def project(self, z):
        """Return ``(s, r, proj)`` of standardised states ``z (n, dim)``.

        ``s = <e, z>``, ``r = ||z - s e||^2`` and ``proj[:, j] = <v_j, z>``.
        """
        s = z @ self.direction
        # ||z - s e||^2 = ||z||^2 - s^2 (e is a unit vector); the cancellation error, about
        # eps * ||z||^2, is far below the width of any chi-square bin
        r = np.maximum(np.einsum("nd,nd->n", z, z) - s * s, 0.0)
        proj = z @ self.directions.T
        return s, r, proj

    @staticmethod
    def bin(values, edges) -> np.ndarray:
        """PIT bin index ``searchsorted(edges, values, side="right")`` in ``0..len(edges)``."""
        return np.searchsorted(edges, values, side="right")

    def bin_normal(self, values) -> np.ndarray:
        """``bin(values, z_edges)`` for standard-normal statistics, about twice as fast.

        Guesses the bin as ``floor(Phi(x) n_bins)`` and corrects it by one against the exact
        edges; rows where the guess is still wrong (never seen in practice) fall back to
        ``searchsorted``, so the result is identical to :meth:`bin`.
        """
        B = self.n_bins
        ext = self._z_ext
        b = np.minimum((special.ndtr(values) * B).astype(np.intp), B - 1)
        b -= values < ext[b]
        b += values >= ext[b + 1]
        bad = ~((ext[b] <= values) & (values < ext[b + 1]))
        if bad.any():
            b[bad] = np.searchsorted(self.z_edges, values[bad], side="right")
        return b

    @property
    def _z_ext(self) -> np.ndarray:
        ext = self.__dict__.get("_z_ext_cache")
        if ext is None:
            ext = np.concatenate([[-np.inf], self.z_edges, [np.inf]])
            object.__setattr__(self, "_z_ext_cache", ext)
        return ext

    def fingerprint(self) -> dict:
        """The parameters that identify the node (for checkpoints)."""
        return {"K": self.K, "delta": repr(self.delta), "dim": self.dim, "sigma": repr(self.sigma),
                "n_directions": self.n_directions, "n_bins": self.n_bins}


@functools.lru_cache(maxsize=64)
def _edges(n_bins: int, dim: int):
    """Interior quantiles ``j / n_bins`` of ``N(0, 1)`` and ``chi^2(dim - 1)`` (read-only, cached)."""
    probs = np.arange(1, n_bins) / n_bins
    z_edges = special.ndtri(probs)
    r_edges = stats.chi2.ppf(probs, dim - 1) if dim > 1 else np.zeros(0)
    z_edges.setflags(write=False)
    r_edges.setflags(write=False)
    return z_edges, r_edges


def _check_sigma(sigma) -> float:
    if isinstance(sigma, bool):
        raise TypeError("sigma must be a real number, got a bool")
    try:
        value = float(sigma)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"sigma must be a real number, got {sigma!r}") from exc
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"sigma must be finite and > 0, got {sigma!r}")
    return value
