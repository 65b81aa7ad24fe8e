"""Assemble a report: run each section, save figures and data, render index.md / index.html.

Sections are independent functions ``section(ctx) -> list of blocks``. A section whose data
source is not installed raises :class:`SectionUnavailable`; the report then says so (and why)
instead of drawing anything. Any other error aborts the report (the destination is untouched)
unless ``keep_going`` is set, in which case the section is marked FAILED in the report, the
manifest records it and :func:`build_report` still raises :class:`ReportError` after writing.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from .config import ReportConfig
from .context import SectionContext, SectionUnavailable, is_missing_dependency, unavailable_from
from .document import (BulletList, CodeBlock, Document, Heading, Note, Paragraph,
                       render_html, render_markdown)
from .writer import MANIFEST_NAME, AtomicDirectory, ReportError, file_manifest, write_json

__all__ = ["SectionUnavailable", "SectionContext", "SectionResult", "ReportSummary", "build_report"]


@dataclass
class SectionResult:
    key: str
    title: str
    status: str              # "ok", "unavailable" or "failed"
    blocks: list = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0
    files: list = field(default_factory=list)
    cpu_seconds: float = 0.0   # process CPU time: the section's cost on a busy machine
    estimate_seconds: float = float("nan")   # the cost model's estimate (rass_theory.report.budget)


@dataclass
class ReportSummary:
    """What :func:`build_report` wrote."""

    out: Path
    sections: list
    files: list
    seconds: float

    @property
    def unavailable(self) -> list:
        return [s for s in self.sections if s.status == "unavailable"]


def _section_registry():
    from . import sections

    return sections.SECTIONS


def build_report(out, config: ReportConfig | None = None, *, force: bool = False, progress=None,
                 keep_going: bool = False, command: str | None = None, cancelled=None) -> ReportSummary:
    """Build the whole report into ``out`` atomically.

    Parameters
    ----------
    out : path
        Destination directory. Written to a temporary sibling first and renamed into place only
        when complete; an existing ``out`` is replaced only on success (and only if it is empty
        or a previous report, unless ``force``).
    config : ReportConfig, optional
        Defaults to ``ReportConfig.default()``.
    progress : object, optional
        ``progress.section(key, title)`` returns a ``callback(done, total)``;
        ``progress.done(key, status)`` is called after each section.
    keep_going : bool
        Record a failing section in the report instead of aborting; the report is still moved
        into place, then :class:`ReportError` is raised so the caller exits non-zero.
    command : str, optional
        Command line recorded in the report for reproducibility.
    cancelled : callable, optional
        Polled after every section and before the final move; when it returns True the
        temporary directory is removed and :class:`ReportError` is raised (the command line sets
        it from a SIGTERM handler, so a termination is honoured even if the signal's exception
        was swallowed somewhere inside a library).

    Returns
    -------
    ReportSummary
    """
    config = ReportConfig.default() if config is None else config
    if not isinstance(config, ReportConfig):
        raise TypeError(f"config must be a ReportConfig, got {type(config).__name__}")
    registry = _section_registry()
    from .budget import estimate

    costs = estimate(config)
    t0 = time.perf_counter()
    results: list[SectionResult] = []
    failed: list[SectionResult] = []
    with AtomicDirectory(out, force=force) as tmp:
        for key in config.sections:
            title, func = registry[key]
            callback = progress.section(key, title) if progress is not None else None
            ctx = SectionContext(tmp, config, key, callback)
            ts, cs = time.perf_counter(), time.process_time()
            try:
                blocks = func(ctx)
                res = SectionResult(key, title, "ok", blocks)
            except SectionUnavailable as exc:
                res = SectionResult(key, title, "unavailable", [Note(str(exc), "unavailable")], str(exc))
            except Exception as exc:
                if is_missing_dependency(exc):
                    msg = str(unavailable_from(exc, "a module this section needs"))
                    res = SectionResult(key, title, "unavailable", [Note(msg, "unavailable")], msg)
                elif keep_going:
                    msg = f"{type(exc).__name__}: {exc}"
                    res = SectionResult(key, title, "failed",
                                        [Note(f"this section raised {msg}", "fail"),
                                         CodeBlock(traceback.format_exc(limit=6))], msg)
                    failed.append(res)
                else:
                    raise ReportError(f"section {key!r} ({title}) failed: {type(exc).__name__}: {exc}") from exc
            res.seconds = time.perf_counter() - ts
            res.cpu_seconds = time.process_time() - cs
            res.estimate_seconds = costs[key].seconds
            res.files = list(ctx.files)
            results.append(res)
            if progress is not None:
                progress.done(key, res.status)
            _check_cancelled(cancelled)
        doc = _document(config, results, command)
        (tmp / "index.md").write_text(render_markdown(doc), encoding="utf-8")
        (tmp / "index.html").write_text(render_html(doc), encoding="utf-8")
        elapsed = time.perf_counter() - t0
        files = file_manifest(tmp)
        write_json(tmp / MANIFEST_NAME, {
            "tool": "rass_theory", "version": __version__, "complete": not failed,
            "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command, "python": platform.python_version(), "platform": platform.platform(),
            "seconds": round(elapsed, 3), "config": config.to_dict(),
            "sections": [{"key": r.key, "title": r.title, "status": r.status, "reason": r.reason,
                          "seconds": round(r.seconds, 3), "cpu_seconds": round(r.cpu_seconds, 3),
                          "estimated_seconds": round(r.estimate_seconds, 3), "files": r.files} for r in results],
            "files": files,
        })
        _check_cancelled(cancelled)
    summary = ReportSummary(Path(os.path.abspath(out)), results, [f["path"] for f in files] + [MANIFEST_NAME],
                            time.perf_counter() - t0)
    if failed:
        raise ReportError("report written to {} but these sections FAILED: {}".format(
            summary.out, ", ".join(f"{r.key} ({r.reason})" for r in failed)))
    return summary


def _check_cancelled(cancelled):
    if cancelled is not None and cancelled():
        raise ReportError("report cancelled (terminated); nothing was written")


def _document(config: ReportConfig, results: list, command: str | None) -> Document:
    doc = Document("rass_theory report: acceptance, optimal weights, exactness, speedups")
    mode = "quick (reduced grids and sample sizes)" if config.quick else "default"
    doc.add(Paragraph(
        f"Generated by `rass_theory` {__version__} in {mode} mode, root seed {config.seed}. "
        "Every figure is also saved as a vector file, and the numbers behind it are in `data/` "
        "(CSV and JSON). `manifest.json` lists every file with its SHA-256 and the full parameters."))
    if command:
        doc.add(Paragraph("Reproduce with:"), CodeBlock(command))
    items = []
    for r in results:
        state = {"ok": "", "unavailable": " — unavailable", "failed": " — FAILED"}[r.status]
        items.append(f"[{r.title}](#{r.key}){state} ({r.seconds:.1f} s)")
    doc.add(Heading("Contents", 2), BulletList(tuple(items)))
    for r in results:
        doc.add(Heading(r.title, 2, anchor=r.key))
        doc.blocks.extend(r.blocks)
    return doc
