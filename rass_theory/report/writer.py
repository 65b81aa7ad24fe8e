"""Write a report directory atomically.

Everything is written into a fresh temporary directory created *next to* the destination (same
file system, so the final move is a rename). Only when every file is written is the directory
moved into place; an existing destination is replaced only then, and only if it is empty or a
previous report (it holds ``manifest.json``), so that ``--out ~`` can never delete a home
directory. On any failure the temporary directory is removed and the destination is untouched.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

__all__ = ["ReportError", "AtomicDirectory", "MANIFEST_NAME", "file_manifest"]

MANIFEST_NAME = "manifest.json"


class ReportError(RuntimeError):
    """A report cannot be written (bad destination, failed section); the message says why."""


def _check_destination(out: Path, force: bool) -> None:
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise ReportError(f"--out {out} exists and is not a directory; choose another path")
        has_entries = any(out.iterdir())
        if has_entries and not (out / MANIFEST_NAME).is_file() and not force:
            raise ReportError(
                f"--out {out} is a non-empty directory that is not a previous rass-theory report "
                f"(no {MANIFEST_NAME}); refusing to replace it (use --force to override)")


class AtomicDirectory:
    """Context manager yielding a temporary directory that replaces ``out`` on clean exit.

    Parameters
    ----------
    out : path
        Final directory.
    force : bool
        Replace ``out`` even if it is a non-empty directory that is not a previous report.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> with AtomicDirectory(root / "rep") as tmp:
    ...     _ = (tmp / "manifest.json").write_text("{}")
    >>> sorted(p.name for p in (root / "rep").iterdir())
    ['manifest.json']
    """

    def __init__(self, out, *, force: bool = False):
        self.out = Path(os.path.abspath(os.fspath(out)))
        self.force = bool(force)
        self.tmp: Path | None = None

    def __enter__(self) -> Path:
        out = self.out
        _check_destination(out, self.force)
        parent = out.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=parent))
        except OSError as exc:
            raise ReportError(f"cannot write the report next to {out}: {exc.strerror or exc} "
                              f"(is {parent} writable?)") from exc
        return self.tmp

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._cleanup()
            return False
        try:
            self._commit()
        except BaseException:
            self._cleanup()
            raise
        return False

    def _cleanup(self):
        if self.tmp is not None and self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _commit(self):
        out, tmp = self.out, self.tmp
        os.chmod(tmp, 0o755 & ~_umask())
        _check_destination(out, self.force)  # re-check: the destination may have changed meanwhile
        if out.exists():
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(out, old)
            except OSError as exc:
                raise ReportError(f"cannot replace existing {out}: {exc.strerror or exc}") from exc
            try:
                os.replace(tmp, out)
            except OSError as exc:
                os.rename(old, out)  # put the previous report back
                raise ReportError(f"cannot move the report into {out}: {exc.strerror or exc}") from exc
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:
                os.replace(tmp, out)
            except OSError as exc:
                raise ReportError(f"cannot move the report into {out}: {exc.strerror or exc}") from exc
        self.tmp = None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_manifest(root: Path) -> list[dict]:
    """List every file under ``root`` (relative path, size in bytes, sha256), sorted by path."""
    entries = []
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel == MANIFEST_NAME:
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        entries.append({"path": rel, "bytes": path.stat().st_size, "sha256": digest})
    return entries


def write_json(path: Path, payload) -> None:
    """Write ``payload`` as indented JSON (NaN is rejected: missing values must be ``null``)."""
    Path(path).write_text(json.dumps(payload, indent=1, allow_nan=False, default=str), encoding="utf-8")
