"""The heterogeneous node batches of the exactness harness, and the seeded chunk plan.

A harness *cell* names ``(K, delta, dim)``; every row of every chunk is its own node, drawn by
:meth:`SyntheticNode.draw`:

* ``sigma_i`` log-uniform on ``[0.1, 10]`` (``SIGMA_RANGE``), or the fixed ``sigma`` the caller
  names;
* ``mu_draft_i = sigma_i rho_i g_i`` with ``g_i = e_{i-1}``, the previous row's unit direction
  (uniform and independent of ``e_i``; row 0 takes an extra one) and ``rho_i`` zero for one
  row in ten, else log-uniform on ``[0.01, 1e4]`` (``RHO_RANGE``: from 0 to the draft-mean norms of
  real runs, where float32 cancellation bites);
* a unit ``e_i`` uniform on the sphere (:func:`unit_directions`: sign-flipped copies of a pool of
  Gaussian directions, one pool vector per ``ROWS_PER_POOL_VECTOR`` rows) and
  ``mu_target_i = mu_draft_i + sigma_i delta_i e_i``;
* ``delta_i`` equal to the named ``delta`` with probability ``named_share`` (default 1/2), else
  uniform on the cell's *spread* values (:func:`spread_deltas`: tiny ``1e-3 .. 1e-2``, half and
  twice the named delta, ``0.25 .. 3`` where the correction branch is common, and large values
  ``4.5 .. 12`` where it carries the target's tails).

A recorded regime (:mod:`rass_theory.stats.regime`, ``check_exactness(..., regime=trace)``)
replaces the laws of ``delta_i``, ``sigma_i`` and ``rho_i`` by resampling the recorded nodes.

The rows are then standardised each in its own frame.  With ``z = (x - mu_draft) / sigma`` of the
committed state ``x`` and ``y = z - delta e``, an exact verifier gives ``y ~ N(0, I)`` in every
row whatever its node (proof ``P1-rank1-reduction``), so the pooled statistics have fixed null
laws: ``t = <e, y> = s - delta ~ N(0, 1)``, ``||y - t e||^2 ~ chi^2(dim - 1)``, ``<v, y> ~ N(0, 1)``
for any unit ``v`` chosen without looking at ``x`` (the per-row test directions ``v_ij``, unit
projections of fixed vectors ``a_j`` off ``e_i``, and the non-orthogonal ``w_i = (e_i + v_i0)/sqrt 2``),
and the fixed ambient projections ``<u_k, y>``.  The frame is recomputed from the arrays the
verifier actually received (after the cast to the pass's dtype), so the null law is exact in
every dtype.

Each one-dimensional statistic is binned by its probability-integral transform into ``n_bins``
equiprobable bins through the interior null quantiles (``searchsorted(edges, value,
side="right")``), so counts are integers that add across chunks.

Seeds (no stateful ``SeedSequence.spawn``): every stream is ``SeedSequence(entropy,
spawn_key=KEY)`` with ``KEY = (0,)`` for the cell's fixed vectors, ``(1, i)`` for chunk ``i`` of the
float64 pass and ``(5, p, i)`` for chunk ``i`` of pass ``p > 0`` (float32, bfloat16), ``(2,)`` for
the direct target draws and ``(3,)`` for the permutations of the two-sample test; inside a chunk,
``(.., 0)`` draws the children, ``(.., 1)`` seeds the verifier's ``rng`` and ``(.., 2)`` draws the
nodes.  Chunk streams do not depend on the number of chunks, which is what makes resumed and
distributed runs bit-identical to a single sequential run.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special, stats

from .._validation import check_delta, check_K, check_positive_int
from ._threads import single_blas_thread
from ._workspace import work_array
from .regime import RHO_RANGE, SIGMA_RANGE, ZERO_RHO_SHARE, Regime

__all__ = ["SyntheticNode", "RowNodes", "RowFrame", "ChunkSpec", "chunk_plan", "chunk_seed", "stream_seed",
           "spread_deltas", "n_projections", "unit_directions", "NODE_KEY", "TARGET_KEY", "PERMUTATION_KEY", "DTYPES", "SMALL_BATCHES"]

NODE_KEY = (0,)
CHUNK_KEY = 1
TARGET_KEY = (2,)
PERMUTATION_KEY = (3,)
PASS_KEY = 5

#: Number of coarse bins per axis of the joint histograms.
N_JOINT_BINS = 8
#: Fixed ambient projections of the random-projection KS test (at most; :func:`n_projections`), and their bins.
N_PROJECTIONS = 32
N_PROJECTION_BINS = 256


def n_projections(dim: int) -> int:
    """Fixed projections of a cell of dimension ``dim``: the ``dim`` coordinate axes while ``2 dim < N_PROJECTIONS``, else ``N_PROJECTIONS`` random unit vectors.

    In a space of few coordinates more directions add little: the rows' frames are uniformly
    rotated (``e_i`` uniform on the sphere), so every axis is a random direction of each row's
    frame, and a defect in one coordinate is seen in full by its axis; fewer projections also
    lower the Bonferroni factor of ``proj_ks``.  The axes are binned without a product (the
    projections are the coordinates of ``y``).
    """
    return int(dim) if 2 * int(dim) < N_PROJECTIONS else N_PROJECTIONS


#: Largest dimension of the cross-covariance tests (a fixed random subspace above it).
XCOV_DIM = 32
#: dtypes a pass can use (bfloat16 only with the torch backend).
DTYPES = ("float64", "float32", "bfloat16")
#: Odd batch sizes the verifier is also called on at the start of every chunk.
SMALL_BATCHES = (1, 2, 3, 7)


def stream_seed(entropy: int, key: tuple) -> np.random.SeedSequence:
    """Return ``SeedSequence(entropy, spawn_key=key)``: one named random stream of a run."""
    return np.random.SeedSequence(entropy, spawn_key=tuple(int(k) for k in key))


def chunk_seed(entropy: int, index: int, pass_index: int = 0) -> np.random.SeedSequence:
    """Seed of chunk ``index`` of pass ``pass_index``: spawn key ``(1, index)`` or ``(5, pass, index)``."""
    key = (CHUNK_KEY, index) if pass_index == 0 else (PASS_KEY, pass_index, index)
    return stream_seed(entropy, key)


def sub_seed(seed: np.random.SeedSequence, j: int) -> np.random.SeedSequence:
    """Child ``j`` of ``seed`` by spawn key (pure: calling it twice gives the same stream)."""
    return np.random.SeedSequence(seed.entropy, spawn_key=tuple(seed.spawn_key) + (int(j),))


#: Tiny and large deltas every default cell also covers (the middle is ``0.25, 1, 2, 3``).
TINY_DELTAS = (1e-3, 3e-3, 1e-2)
MIDDLE_DELTAS = (0.25, 1.0, 2.0, 3.0)
LARGE_DELTAS = (4.5, 6.0, 8.0, 12.0)


def spread_deltas(delta: float) -> tuple:
    """The spread of per-row deltas around the named ``delta``.

    ``{delta/2, 2 delta} | TINY_DELTAS | {0.25, 1, 2, 3} | LARGE_DELTAS`` without ``delta`` itself
    and without 0 (sorted).  Tiny deltas exercise the near-degenerate branch (small nonzero
    ``delta`` must not divide by zero or be mistaken for a degenerate node); large ones make the
    correction branch common (at ``K = 4`` RASS corrects 45% of rows at ``delta = 2``, 75% at 3)
    and carry the target's tails beyond ``delta ~ 4.5``, where ``log1p(-ndtr(s))`` style
    underflows appear.
    """
    values = set(TINY_DELTAS) | set(MIDDLE_DELTAS) | set(LARGE_DELTAS)
    if delta > 0:
        values |= {round(delta / 2, 12), round(2 * delta, 12)}
    values.discard(delta)
    return tuple(sorted(v for v in values if v > 0))


#: Rows that share one Gaussian pool vector of :func:`unit_directions` (each with its own signs).
ROWS_PER_POOL_VECTOR = 8


#: Rows per block of :meth:`SyntheticNode.frame`: a block's means and directions stay in cache.
FRAME_BLOCK_VALUES = 1 << 15


def unit_directions(rng: np.random.Generator, n: int, d: int, out=None) -> np.ndarray:
    """``n`` unit vectors of ``R^d``, each uniform on the sphere; neighbours (and the first and last rows) independent.

    Row ``i`` is ``s_i * p_(i mod M)``: ``M`` normalised Gaussian pool vectors ``p`` (uniform on the
    sphere; ``M`` the smallest integer from ``max(2, ceil(n / ROWS_PER_POOL_VECTOR))`` on that does
    not divide ``n - 1``) and independent uniform coordinate signs ``s_i`` in ``{-1, 1}^d``.
    Flipping the signs of coordinates is orthogonal, so every row is uniform on the sphere; rows
    ``i`` and ``j`` share a pool vector only when ``i = j mod M`` (never neighbours, never the
    first and last rows).

    Notes
    -----
    The harness's null laws hold given the nodes, whatever their joint law (``y_i ~ N(0, I)``
    given row ``i``'s node, proof ``P1-rank1-reduction``; ``proofs/S1-harness-power.md``), so
    sharing pool vectors costs no validity; it costs ``d / ROWS_PER_POOL_VECTOR`` normals per row
    instead of ``d`` (the node draw was the costliest per-row step of the harness at ``K = 2``).
    ``out``: an ``(n, d)`` float64 array to fill (a chunk runner's reused buffer).
    """
    m = max(2, -(-n // ROWS_PER_POOL_VECTOR)) if n > 1 else 1
    while n > 2 and (n - 1) % m == 0:
        m += 1
    pool = rng.standard_normal((m, d))
    pool /= np.maximum(np.sqrt(np.einsum("nd,nd->n", pool, pool)), 1e-300)[:, None]
    dirs = np.empty((n, d)) if out is None else out
    reps = n // m                                 # row i = p_(i mod M), as np.resize(pool, (n, d))
    dirs[:reps * m].reshape(reps, m, d)[...] = pool
    dirs[reps * m:] = pool[:n - reps * m]
    # independent uniform signs, one random bit each, flipped into the IEEE sign bit (the same
    # values as multiplying by 1 - 2 bit)
    bits = np.unpackbits(np.frombuffer(rng.bytes(-(-(n * d) // 8)), np.uint8), count=n * d)
    signs = np.left_shift(bits, np.uint64(63), out=work_array("node.sign_bits", n * d, np.uint64), dtype=np.uint64)
    flips = dirs.reshape(-1).view(np.uint64)
    flips ^= signs
    return dirs


@dataclass(frozen=True)
class ChunkSpec:
    """One chunk of a harness run.

    Attributes
    ----------
    index : int
        Chunk number within its pass, ``0, 1, ...`` in run order.
    n : int
        Rows (nodes) in this chunk.
    seed : numpy.random.SeedSequence
        ``chunk_seed(entropy, index, pass_index)``.
    keep : int
        Number of leading rows of this chunk that join the two-sample subsample.
    dtype : str
        Precision of the children and means handed to the verifier (``DTYPES``).
    pass_index : int
        Position of ``dtype`` in the run's dtype list.
    small_batches : tuple of int
        Sizes of the extra verifier calls at the start of the chunk (their rows count in ``n``).
    """

    index: int
    n: int
    seed: np.random.SeedSequence = field(repr=False)
    keep: int = 0
    dtype: str = "float64"
    pass_index: int = 0
    small_batches: tuple = ()


def chunk_plan(n_samples: int, chunk_size: int, entropy: int, two_sample_size: int, start: int = 0, *,
               dtype: str = "float64", pass_index: int = 0, small_batches: tuple = SMALL_BATCHES) -> list:
    """Split ``n_samples`` into chunks of ``chunk_size`` and return the specs from ``start`` on.

    The two-sample subsample is the first ``two_sample_size`` rows in chunk order, so chunk ``i``
    keeps ``clip(two_sample_size - i * chunk_size, 0, n_i)`` rows.  Every chunk of more than
    ``2 * sum(small_batches)`` rows starts with verifier calls on the ``small_batches`` sizes.
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    n_chunks = -(-n_samples // chunk_size)
    specs = []
    for i in range(start, n_chunks):
        n_i = min(chunk_size, n_samples - i * chunk_size)
        keep = int(np.clip(two_sample_size - i * chunk_size, 0, n_i))
        small = tuple(small_batches) if n_i > 2 * sum(small_batches) else ()
        specs.append(ChunkSpec(i, n_i, chunk_seed(entropy, i, pass_index), keep, dtype, pass_index, small))
    return specs


def n_chunks_of(n_samples: int, chunk_size: int) -> int:
    """Number of chunks ``ceil(n_samples / chunk_size)``."""
    return -(-int(n_samples) // int(chunk_size))


@dataclass(frozen=True)
class RowNodes:
    """One batch of per-row nodes (float64, before the cast to the pass's dtype).

    ``group[i]`` indexes ``SyntheticNode.deltas`` (0 is the named delta).
    """

    mu_draft: np.ndarray
    mu_target: np.ndarray
    sigma: np.ndarray
    group: np.ndarray

    @property
    def n(self) -> int:
        return self.sigma.shape[0]


@dataclass(frozen=True)
class RowFrame:
    """Per-row frame recomputed from the arrays the verifier received (float64).

    ``e (n, d)`` unit, ``delta (n,)``, and the anchors' components ``ea (n_directions, n)``,
    ``ea_ji = <e_i, a_j>`` (row-major in ``i``: the per-row arithmetic on it runs along rows), with
    ``anchors``; row ``i``'s test direction ``v_ij = (a_j - ea_ij e_i) /
    ||a_j - ea_ij e_i||`` is unit and orthogonal to ``e_i``, and ``w_i = (e_i + v_i0) / sqrt 2``.
    The directions are never materialised: :meth:`directions` projects on them through
    ``<v_ij, y> = (<a_j, y> - ea_ij <e_i, y>) / sqrt(||a_j||^2 - ea_ij^2)``.
    """

    mu_draft: np.ndarray
    sigma: np.ndarray
    e: np.ndarray
    delta: np.ndarray
    anchors: np.ndarray
    ea: np.ndarray
    mu_target: np.ndarray | None = None

    def standardise(self, states, out=None, rows=slice(None)) -> np.ndarray:
        """``y = (x - mu_draft) / sigma - delta e = (x - mu_target) / sigma``: ``N(0, I)`` under an exact rule.

        ``sigma delta e = mu_target - mu_draft`` by construction of the frame, so one subtraction of
        ``mu_target`` does it (float64, two passes over the states).  ``out``: a float64 array of
        the states' shape to write ``y`` into (a reused work buffer), else a new array.  ``rows``:
        the frame's rows that ``states`` belong to (a slice; default all).
        """
        if self.mu_target is None:
            y = np.subtract(states, self.mu_draft[rows], dtype=np.float64, out=out)
            y /= self.sigma[rows, None]
            y -= self.delta[rows, None] * self.e[rows]
            return y
        y = np.subtract(states, self.mu_target[rows], dtype=np.float64, out=out)
        y /= self.sigma[rows, None]
        return y

    def take(self, rows) -> "RowFrame":
        """The frame of ``rows`` (a slice or an index array)."""
        return RowFrame(self.mu_draft[rows], self.sigma[rows], self.e[rows], self.delta[rows], self.anchors,
                        self.ea[:, rows], None if self.mu_target is None else self.mu_target[rows])

    def _norms(self, rows=slice(None)) -> np.ndarray:
        """``||a_j - ea_ij e_i||`` as ``(n_directions, n)`` (row-major in ``i``: long inner loops),
        of the frame's ``rows`` (a slice; default all)."""
        a2 = np.einsum("jd,jd->j", self.anchors, self.anchors)
        ea = self.ea[:, rows]
        return np.sqrt(np.maximum(a2[:, None] - ea * ea, 1e-300))

    def directions(self, y, t) -> tuple:
        """``(<v_j, y> (n_directions, n), <w, y> (n,))`` for standardised states ``y`` with ``t = <e, y>``."""
        if not self.anchors.shape[0]:
            return np.zeros((0, y.shape[0])), np.zeros(y.shape[0])
        dirs = ((y @ self.anchors.T).T - self.ea * t) / self._norms()
        return dirs, (t + dirs[0]) / math.sqrt(2.0)

    @property
    def v(self) -> np.ndarray:
        """The test directions ``(n_directions, n, d)`` (materialised; for tests and reference)."""
        v = self.anchors[:, None, :] - self.ea[:, :, None] * self.e[None]
        return v / self._norms()[:, :, None]

    @property
    def w(self) -> np.ndarray:
        """``(e + v_0) / sqrt 2`` (zeros when there is no test direction)."""
        return (self.e + self.v[0]) / math.sqrt(2.0) if self.anchors.shape[0] else np.zeros_like(self.e)


@dataclass(frozen=True, eq=False)
class SyntheticNode:
    """A harness cell: how its rows' nodes are drawn, and the statistics' bins.

    Attributes
    ----------
    K, delta, dim : the cell (``delta`` is the named delta).
    sigma : float or None
        Fixed kernel scale, or ``None`` for log-uniform per-row scales on ``SIGMA_RANGE``.
    deltas : tuple of float
        ``(delta,) + spread_deltas(delta)``; row groups index it.
    group_probs : ndarray
        Probability of each group (``named_share`` for the named delta).
    anchors : ndarray (n_directions, dim)
        Fixed vectors ``a_j``; row ``i``'s test direction ``v_ij`` is ``a_j`` projected off ``e_i``
        and normalised.
    projections : ndarray (n_projections(dim), dim)
        Fixed unit vectors of the random-projection KS test (below ``dim = 16``: the coordinate
        axes, :func:`n_projections`).
    xcov_basis : ndarray (min(dim, XCOV_DIM), dim)
        Orthonormal rows ``P`` of the cross-covariance tests (the identity up to ``XCOV_DIM``).
    regime : Regime or None
        A recorded regime (``None``: the default laws of the module docstring).
    n_bins : int
        Equiprobable PIT bins of every one-dimensional histogram.
    z_edges, r_edges : ndarray (n_bins - 1,)
        Interior quantiles ``j / n_bins`` of ``N(0, 1)`` and of ``chi^2(dim - 1)``.
    """

    K: int
    delta: float
    dim: int
    sigma: float | None
    deltas: tuple
    group_probs: np.ndarray
    anchors: np.ndarray
    projections: np.ndarray
    n_bins: int
    n_joint_bins: int
    z_edges: np.ndarray
    r_edges: np.ndarray
    regime: Regime | None = None
    xcov_basis: np.ndarray | None = None

    @classmethod
    def build(cls, K, delta, dim, *, sigma=None, n_directions=None, n_bins=4096, entropy=0,
              named_share=0.5, regime=None) -> "SyntheticNode":
        """Draw the cell's fixed vectors from the stream ``SeedSequence(entropy, spawn_key=(0,))``.

        ``n_directions`` defaults to ``min(2, dim - 1)`` and must not exceed ``dim - 1``.
        """
        K = check_K(K)
        delta = check_delta(delta)
        dim = check_positive_int(dim, "dim")
        sigma = None if sigma is None else _check_sigma(sigma)
        n_bins = check_positive_int(n_bins, "n_bins", minimum=N_JOINT_BINS)
        if n_directions is None:
            n_directions = min(2, dim - 1)
        n_directions = check_positive_int(n_directions, "n_directions", minimum=0, maximum=dim - 1)
        if not 0.0 < float(named_share) <= 1.0:
            raise ValueError(f"named_share must lie in (0, 1], got {named_share!r}")
        rng = np.random.default_rng(stream_seed(entropy, NODE_KEY))
        anchors = rng.standard_normal((max(n_directions, 1), dim))[:n_directions]
        proj = rng.standard_normal((N_PROJECTIONS, dim))   # always drawn: the streams after it are fixed
        proj /= np.linalg.norm(proj, axis=1)[:, None]
        if n_projections(dim) < N_PROJECTIONS:           # the coordinate axes
            proj = np.eye(dim)
        if dim <= XCOV_DIM:
            basis = np.eye(dim)
        else:  # a fixed random k-dimensional subspace (orthonormal rows)
            basis = np.linalg.qr(rng.standard_normal((dim, XCOV_DIM)))[0].T.copy()
        if regime is not None:
            if not isinstance(regime, Regime):
                raise TypeError(f"regime must be a rass_theory.stats.regime.Regime, got {type(regime).__name__}")
            deltas, probs = tuple(regime.deltas), np.array(regime.group_probs, dtype=np.float64)
            delta = deltas[0]
        else:
            spread = spread_deltas(delta)
            deltas = (delta,) + spread
            share = float(named_share) if spread else 1.0
            probs = np.array([share] + [(1.0 - share) / len(spread)] * len(spread))
        z_edges, r_edges = _edges(n_bins, dim)
        for arr in (anchors, proj, probs, basis):
            arr.setflags(write=False)
        return cls(K, delta, dim, sigma, deltas, probs, anchors, proj, n_bins, N_JOINT_BINS, z_edges, r_edges,
                   regime, basis)

    @property
    def n_directions(self) -> int:
        """Number of per-row orthogonal test directions."""
        return self.anchors.shape[0]

    @property
    def n_groups(self) -> int:
        return len(self.deltas)

    # ------------------------------------------------------------------ drawing
    def draw(self, rng: np.random.Generator, n: int, dtype: str = "float64", out=None) -> RowNodes:
        """Draw ``n`` per-row nodes (see the module docstring).

        For ``dtype="bfloat16"`` every input is exactly representable in bfloat16: ``sigma_i`` a
        power of two in ``[1/8, 8]``, ``mu_draft_i = sigma_i q_i`` with ``q_i`` in ``{-1, -1/2, 0,
        1/2, 1}^dim`` and ``e_i`` a signed coordinate axis, so that the cast changes nothing and the
        nominal deltas are exact; rows drawn in a group whose delta is not a multiple of ``1/64``
        (the tiny deltas) take the first such group instead.

        ``out``: ``(directions (n + 1, dim), mu_draft (n, dim))`` float64 arrays that become the
        rows' ``mu_target`` and ``mu_draft`` (a chunk runner's reused buffers; the same values as
        fresh arrays).  The bfloat16 pass ignores it.
        """
        d = self.dim
        rec_sigma = rec_rho = None
        if self.regime is not None:
            group, rec_sigma, rec_rho = self.regime.draw(rng, n)
        else:
            cdf, binner = _group_binner(tuple(self.group_probs.tolist()))
            u = rng.random(n)
            u *= cdf[-1]
            group = np.minimum(binner.bin(u), self.n_groups - 1)   # = searchsorted(cdf, u, side="right")
        if dtype == "bfloat16":  # tiny deltas are not bfloat16 sums: their rows move to the named delta
            dyadic = np.array([float(x * 64).is_integer() for x in self.deltas])
            if dyadic.any() and not dyadic.all():
                group = np.where(dyadic[group], group, int(np.argmax(dyadic)))
        delta = np.asarray(self.deltas)[group]
        if dtype == "bfloat16":
            sigma = (2.0 ** rng.integers(-3, 4, n)) if self.sigma is None else np.full(n, self.sigma)
            q = rng.integers(-2, 3, (n, d)) / 2.0
            axis = rng.integers(0, d, n)
            e = np.zeros((n, d))
            e[np.arange(n), axis] = rng.choice([-1.0, 1.0], n)
            mu_draft = sigma[:, None] * q
        else:
            if self.sigma is not None:
                sigma = np.full(n, self.sigma)
            elif rec_sigma is not None:
                sigma = np.array(rec_sigma, dtype=np.float64)
            else:
                sigma = rng.uniform(np.log(SIGMA_RANGE[0]), np.log(SIGMA_RANGE[1]), n)
                np.exp(sigma, out=sigma)
            # e_i = row i's unit direction, g_i = e_{i-1} the draft mean's (row 0: an extra direction)
            dirs = unit_directions(rng, n + 1, d, None if out is None else out[0])
            e = dirs[:n]
            if rec_rho is not None:
                rho = np.array(rec_rho, dtype=np.float64)
            else:
                rho = rng.uniform(np.log(RHO_RANGE[0]), np.log(RHO_RANGE[1]), n)
                np.exp(rho, out=rho)
                rho[rng.random(n) < ZERO_RHO_SHARE] = 0.0
            rho *= sigma
            mu_draft = np.empty_like(e) if out is None else out[1]   # row i: row i - 1's direction, scaled
            np.multiply(e[:-1], rho[1:, None], out=mu_draft[1:])
            np.multiply(dirs[n], rho[0], out=mu_draft[0])
        delta *= sigma
        e *= delta[:, None]                         # e (a fresh array, not needed afterwards) becomes mu_target
        e += mu_draft
        mu_target = e
        return RowNodes(mu_draft, mu_target, sigma, group)

    @single_blas_thread()
    def frame(self, mu_draft, mu_target, sigma, fallback_e, out=None) -> RowFrame:
        """The per-row frame of the inputs as the verifier received them (cast back to float64).

        ``fallback_e`` (the drawn direction: an ``(n, d)`` array, or a callable ``mask -> (k, d)``
        evaluated only when some row has ``mu_target == mu_draft`` exactly) is used on those rows.
        ``out``: an ``(n, d)`` float64 buffer that becomes the frame's ``e`` (a chunk runner reuses
        one across chunks; otherwise a new array).
        """
        md = np.asarray(mu_draft, dtype=np.float64)
        mt = np.asarray(mu_target, dtype=np.float64)
        n, d = md.shape
        e = np.empty((n, d)) if out is None else out
        sig = np.asarray(sigma, dtype=np.float64).reshape(-1)
        norm = np.empty(n)
        anchors_t = self.anchors.T
        ea = np.empty((anchors_t.shape[1], n))
        step = max(256, FRAME_BLOCK_VALUES // max(d, 1))
        for a in range(0, n, step):   # row blocks that stay in cache; each row's arithmetic as unblocked
            b = min(n, a + step)
            eb = np.subtract(mt[a:b], md[a:b], out=e[a:b])
            nb = norm[a:b]
            np.sqrt(np.einsum("nd,nd->n", eb, eb), out=nb)
            eb /= np.where(nb == 0, 1.0, nb)[:, None]
            ea[:, a:b] = (eb @ anchors_t).T
        zero = norm == 0
        if zero.any():
            e[zero] = fallback_e(zero) if callable(fallback_e) else fallback_e[zero]
            ea[:, zero] = (e[zero] @ anchors_t).T
        delta = norm / sig
        return RowFrame(md, sig, e, delta, self.anchors, ea, mt)

    # ------------------------------------------------------------------ binning
    @staticmethod
    def bin(values, edges) -> np.ndarray:
        """PIT bin index ``searchsorted(edges, values, side="right")`` in ``0..len(edges)``."""
        return np.searchsorted(edges, values, side="right")

    def bin_normal(self, values) -> np.ndarray:
        """``bin(values, z_edges)`` for standard-normal statistics, by table look-up (:class:`EdgeBinner`)."""
        return _binner(self.n_bins, 0).bin(values)

    def bin_rperp(self, r) -> np.ndarray:
        """PIT bin of ``||z_perp||^2``: ``sqrt(r)`` against ``sqrt(r_edges)`` by table look-up (:class:`EdgeBinner`).

        Equal to ``bin(r, r_edges)`` except for a value within one rounding of an edge; the square
        root keeps the table small where the ``chi^2(1)`` edges crowd near 0.
        """
        return _binner(self.n_bins, self.dim).bin(np.sqrt(np.maximum(r, 0.0)))

    def fingerprint(self) -> dict:
        """The parameters that identify the cell (for checkpoints)."""
        return {"K": self.K, "delta": repr(self.delta), "dim": self.dim, "sigma": repr(self.sigma),
                "deltas": [repr(x) for x in self.deltas], "n_directions": self.n_directions,
                "n_bins": self.n_bins, "regime": None if self.regime is None else self.regime.fingerprint()}

    def describe_regime(self) -> str:
        """One line: the law of the rows' ``(delta, sigma, ||mu_draft||/sigma)`` (for reports)."""
        if self.regime is not None:
            return self.regime.describe()
        sig = (f"sigma = {self.sigma:g}" if self.sigma is not None
               else f"sigma log-uniform on [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}]")
        spread = self.deltas[1:]
        dl = (f"delta: {self.group_probs[0]:.0%} at {self.delta:g}, the rest over {len(spread)} values "
              f"in [{min(spread):g}, {max(spread):g}]") if spread else f"delta = {self.delta:g}"
        return (f"default regime: {dl}; {sig}; ||mu_draft||/sigma 0 for {ZERO_RHO_SHARE:.0%} of rows, else "
                f"log-uniform on [{RHO_RANGE[0]:g}, {RHO_RANGE[1]:g}]; dim {self.dim}")


@functools.lru_cache(maxsize=64)
def _edges(n_bins: int, dim: int):
    """Interior quantiles ``j / n_bins`` of ``N(0, 1)`` and ``chi^2(dim - 1)`` (read-only, cached)."""
    probs = np.arange(1, n_bins) / n_bins
    z_edges = special.ndtri(probs)
    r_edges = stats.chi2.ppf(probs, dim - 1) if dim > 1 else np.zeros(0)
    z_edges.setflags(write=False)
    r_edges.setflags(write=False)
    return z_edges, r_edges


class EdgeBinner:
    """Exact ``searchsorted(edges, x, side="right")`` for sorted ``edges`` in a few vector operations.

    A uniform grid of cells of width ``h = min gap / CELLS_PER_GAP`` (coarser if that would exceed
    ``MAX_CELLS`` cells, but never wider than ``min gap / 4``) covers ``[edges[0] - 4h, edges[-1] +
    4h]``; values beyond it are clipped into the end cells.  The computed cell ``c`` of a value is
    within one cell of its true cell (the rounding of ``x / h`` is far below one cell), so the value
    lies in ``[left(c) - h, left(c) + 2h]``.  ``table[c]`` is the bin of ``left(c)`` where that range
    holds no edge (then it is every such value's bin), and ``-(bin + 1)`` where it holds one (at most
    one, as ``3h < min gap``): those values, about ``3 / CELLS_PER_GAP`` of them, are corrected by one
    comparison on each side (``x < edges[b - 1]``, ``x >= edges[b]``).  Five passes per value (scale,
    clip, cast, look-up, sign test); about 3x faster than the two-comparison form on every value and
    15x faster than ``searchsorted`` for 256 bins; the result is identical to ``searchsorted``
    (``tests/stats/test_binner.py``).  Values must be finite or infinite, not NaN.
    """

    MAX_CELLS = 1 << 18
    CELLS_PER_GAP = 64
    BLOCK = 1 << 16

    def __init__(self, edges):
        edges = np.asarray(edges, dtype=np.float64)
        self.edges = edges
        self.ext = np.concatenate([[-np.inf], edges, [np.inf]])
        self.table = None                          # no table: plain searchsorted
        if edges.size < 2:
            return
        gap = float(np.min(np.diff(edges)))
        span = float(edges[-1] - edges[0])
        if not gap > 0:
            return
        h = max(gap / self.CELLS_PER_GAP, (span + gap) / self.MAX_CELLS)
        if h > gap / 4.0:
            return
        lo = float(edges[0]) - 4.0 * h
        n_cells = int(math.ceil((span + 8.0 * h) / h)) + 1
        left = lo + np.arange(n_cells) * h
        table = np.searchsorted(edges, left, side="right").astype(np.intp)
        near = np.searchsorted(edges, left + 2.0 * h, side="right") > np.searchsorted(edges, left - h, side="left")
        table[near] = -table[near] - 1
        # the smallest integer type that holds every entry: 4,096 bins need int16, which keeps the
        # table (262k cells at 4,096 bins) inside a core's L2 cache where int64 would not fit
        small = np.int16 if edges.size < np.iinfo(np.int16).max else np.intp
        self.table, self.inv_h, self.offset, self.n_cells = table.astype(small), 1.0 / h, -lo / h, n_cells

    def bin(self, x, out=None) -> np.ndarray:
        """Bin index ``0..len(edges)`` of every value (``intp``, the shape of ``x``; into ``out`` if given)."""
        x = np.asarray(x, dtype=np.float64)
        if self.table is None:
            return np.searchsorted(self.edges, x, side="right")
        flat = x.reshape(-1)
        res = np.empty(flat.size, np.intp) if out is None else out.reshape(-1)
        # work arrays kept per thread (fresh ones cost a page fault per 4 KiB: rass_theory.stats._workspace)
        c, ci = work_array("binner.cell", self.BLOCK), work_array("binner.index", self.BLOCK, np.intp)
        cell = work_array("binner.entry", self.BLOCK, self.table.dtype)
        top = float(self.n_cells - 1)
        for a in range(0, flat.size, self.BLOCK):   # blocks that stay in cache
            xb = flat[a:a + self.BLOCK]
            k = xb.size
            cb, cib, cellb, rb = c[:k], ci[:k], cell[:k], res[a:a + k]
            np.multiply(xb, self.inv_h, out=cb)
            cb += self.offset
            np.clip(cb, 0.0, top, out=cb)
            cib[...] = cb
            np.take(self.table, cib, out=cellb, mode="clip")   # indices are in range; "raise" would buffer
            rb[...] = cellb
            near = np.flatnonzero(cellb < 0)
            if near.size:
                b = -rb[near] - 1
                v = xb[near]
                b -= v < self.ext[b]
                b += v >= self.ext[b + 1]
                rb[near] = b
        return res.reshape(x.shape)


@functools.lru_cache(maxsize=64)
def _group_binner(probs: tuple) -> tuple:
    """``(cumsum(probs), EdgeBinner(cumsum(probs)))``: the delta group of ``u`` is ``searchsorted(cdf, u cdf[-1], "right")``."""
    cdf = np.cumsum(np.array(probs, dtype=np.float64))
    cdf.setflags(write=False)
    return cdf, EdgeBinner(cdf)


@functools.lru_cache(maxsize=64)
def _binner(n_bins: int, dim: int) -> EdgeBinner:
    """The binner of ``z_edges`` (``dim == 0``) or of ``sqrt(r_edges(dim))``."""
    z_edges, r_edges = _edges(n_bins, max(dim, 1))
    return EdgeBinner(z_edges if dim == 0 else np.sqrt(r_edges))


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
