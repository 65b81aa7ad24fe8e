"""Atomic checkpoints of a harness run: merged counts, the next chunk, and a configuration fingerprint.

A checkpoint is an ``.npz`` file holding the arrays of :meth:`ExactnessCounts.to_arrays`, the index
of the next chunk to run, whether the run is complete, the format version and a JSON fingerprint
of everything that determines the counts (node, seed, chunking, statistics, backend, verifier).
It is written to a temporary file in the same directory and moved into place with ``os.replace``,
so a reader sees either the previous or the new checkpoint, never a torn one.  Because chunk ``i``
always uses its own streams (``rass_theory.stats.node``), a resumed run ends with exactly the counts
of an uninterrupted one.  A run has one counts object per dtype pass, stored under the prefixes
``p0_``, ``p1_``, ...; the chunk position counts through all passes in order.
"""
from __future__ import annotations

import json
import os
import tempfile
import zipfile

import numpy as np

from .streaming import ExactnessCounts

__all__ = ["FORMAT_VERSION", "save_checkpoint", "load_checkpoint"]

FORMAT_VERSION = 3  # 3: issue 19 (studentised cross-covariances, sequence probe, s_abs4, regime)
_MAGIC = "rass_theory.check_exactness"


def save_checkpoint(path, counts, next_chunk: int, fingerprint: dict, complete: bool = False) -> None:
    """Write the per-pass ``counts`` (a list) and ``next_chunk`` to ``path`` atomically (temp file + ``os.replace``).

    ``next_chunk`` is the position in the run's plan (all chunks of pass 0, then of pass 1, ...).
    """
    path = os.fspath(path)
    counts = [counts] if isinstance(counts, ExactnessCounts) else list(counts)
    arrays = {}
    for p, c in enumerate(counts):
        arrays.update(c.to_arrays(prefix=f"p{p}_"))
    arrays["ckpt_n_passes"] = np.asarray(len(counts))
    arrays.update({
        "ckpt_magic": np.asarray(_MAGIC),
        "ckpt_version": np.asarray(FORMAT_VERSION),
        "ckpt_fingerprint": np.asarray(json.dumps(fingerprint, sort_keys=True)),
        "ckpt_next_chunk": np.asarray(int(next_chunk)),
        "ckpt_complete": np.asarray(bool(complete)),
    })
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".npz.tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path, fingerprint: dict, node, n_passes: int = 1):
    """Read a checkpoint written for the same configuration.

    Returns
    -------
    None or (list of ExactnessCounts, next_chunk, complete)
        ``None`` when ``path`` does not exist.

    Raises
    ------
    ValueError
        When the file is corrupt or not a checkpoint of this toolkit, has another format version,
        or was written by a run with a different configuration (the message names every field
        that differs).  The file is left untouched.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"checkpoint {path!r} is corrupt or not an .npz file ({exc}); "
                         "remove it or pass another checkpoint path") from exc
    if "ckpt_magic" not in arrays or str(arrays["ckpt_magic"]) != _MAGIC:
        raise ValueError(f"checkpoint {path!r} is not a rass_theory check_exactness checkpoint; "
                         "it was not overwritten")
    version = int(arrays.get("ckpt_version", -1))
    if version != FORMAT_VERSION:
        raise ValueError(f"checkpoint {path!r} has format version {version}, this version reads "
                         f"{FORMAT_VERSION}; it was not overwritten")
    try:
        stored = json.loads(str(arrays["ckpt_fingerprint"]))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"checkpoint {path!r} is corrupt ({type(exc).__name__}: {exc}); "
                         "it was not overwritten") from exc
    wanted = json.loads(json.dumps(fingerprint, sort_keys=True))
    if stored != wanted:
        keys = sorted(set(stored) | set(wanted))
        diffs = [f"{k}: checkpoint {stored.get(k)!r} vs this run {wanted.get(k)!r}"
                 for k in keys if stored.get(k) != wanted.get(k)]
        raise ValueError(f"checkpoint {path!r} belongs to a different run configuration ("
                         + "; ".join(diffs) + "); it was not overwritten")
    try:
        next_chunk = int(arrays["ckpt_next_chunk"])
        complete = bool(arrays["ckpt_complete"])
        if int(arrays["ckpt_n_passes"]) != n_passes:
            raise ValueError(f"{int(arrays['ckpt_n_passes'])} passes stored, {n_passes} expected")
        counts = [ExactnessCounts.from_arrays(arrays, node, prefix=f"p{p}_") for p in range(n_passes)]
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"checkpoint {path!r} is corrupt ({type(exc).__name__}: {exc}); "
                         "it was not overwritten") from exc
    if next_chunk < 0 or counts[0].s_counts.size != int(wanted.get("n_bins", counts[0].s_counts.size)):
        raise ValueError(f"checkpoint {path!r} is corrupt (inconsistent chunk index or bins); "
                         "it was not overwritten")
    return counts, next_chunk, complete
