"""``rass-theory report``: build the full report (figures, tables, data) into a directory."""
from __future__ import annotations

import shlex
import signal
import threading
import time

import click

from ..report.config import SECTION_KEYS

__all__ = ["report", "parse_int_list", "parse_float_grid", "parse_sections"]


def _parse_values(text: str, name: str, convert, expected: str) -> tuple:
    """``convert(text)``, a non-empty tuple; ``click.BadParameter`` naming ``name`` otherwise."""
    try:
        values = convert(text.replace(" ", ""))
    except ValueError:
        raise click.BadParameter(f"expected {expected}, got {text!r}", param_hint=name) from None
    if not values:
        raise click.BadParameter("must list at least one value", param_hint=name)
    return values


def parse_int_list(text: str, name: str) -> tuple[int, ...]:
    """Parse ``"1,2,4,8"`` into integers; raise ``click.BadParameter`` naming ``name``."""
    return _parse_values(text, name, lambda t: tuple(int(x) for x in t.split(",") if x != ""),
                         "comma-separated integers such as 1,2,4,8")


def parse_float_grid(text: str, name: str) -> tuple[float, ...]:
    """Parse ``"0,0.5,1"`` or ``"START:STOP:STEP"`` (inclusive) into floats."""
    import numpy as np

    def convert(t):
        if ":" not in t:
            return tuple(float(x) for x in t.split(",") if x != "")
        parts = [float(x) for x in t.split(":")]
        if len(parts) != 3:
            raise ValueError
        start, stop, step = parts
        if not step > 0 or stop < start:
            raise click.BadParameter(f"START:STOP:STEP needs STEP > 0 and STOP >= START, got {t!r}",
                                     param_hint=name)
        n = int(np.floor((stop - start) / step + 1e-9)) + 1
        if n > 2000:
            raise click.BadParameter(f"grid {t!r} has {n} points; at most 2000", param_hint=name)
        return tuple(float(x) for x in np.round(start + step * np.arange(n), 12))

    return _parse_values(text, name, convert, "comma-separated numbers or START:STOP:STEP")


def parse_sections(text: str) -> tuple:
    """Parse ``"acceptance,trees"`` into section keys; ``click.BadParameter`` naming ``--sections``
    for an empty list, an unknown or a repeated section."""
    keys = tuple(x for x in text.replace(" ", "").split(",") if x)
    if not keys:
        raise click.BadParameter(f"must list at least one section of {','.join(SECTION_KEYS)}",
                                 param_hint="--sections")
    bad = [k for k in keys if k not in SECTION_KEYS]
    if bad:
        raise click.BadParameter(f"unknown section(s) {', '.join(repr(k) for k in bad)}; choose from "
                                 f"{','.join(SECTION_KEYS)}", param_hint="--sections")
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise click.BadParameter(f"section(s) listed twice: {', '.join(dup)}", param_hint="--sections")
    return keys


_TERMINATED = threading.Event()


def _exit_on_sigterm():
    """Turn SIGTERM into SystemExit so the partial report directory is removed on the way out.

    The event is also set, and the builder polls it before moving the report into place, in case
    the exception is swallowed (an exception raised inside a ``__del__`` or a generator's
    ``close`` is only printed).
    """
    _TERMINATED.clear()
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        _TERMINATED.set()
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, handler)


class _RichProgress:
    """Adapter from the builder's progress protocol to a rich progress bar per section."""

    def __init__(self, progress):
        self.progress = progress
        self.tasks = {}

    def section(self, key, title):
        task = self.progress.add_task(title, total=None)
        self.tasks[key] = task

        def callback(done, total):
            self.progress.update(task, completed=done, total=total)

        return callback

    def done(self, key, status):
        task = self.tasks[key]
        t = self.progress.tasks[self.tasks[key]]
        label = {"ok": "", "unavailable": " [yellow](unavailable)", "failed": " [red](FAILED)"}[status]
        self.progress.update(task, total=t.total or 1, completed=t.total or 1, description=t.description + label)


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, dir_okay=True, writable=False),
              help="Destination directory (written atomically; an existing report there is replaced on success).")
@click.option("--quick", is_flag=True, help="Reduced grids and sample sizes (19-20 s wall, 21-23 CPU-s, measured on a "
                                            "2-core machine): previews and tests.")
@click.option("--K", "K", metavar="LIST", help="Children per node for the acceptance and tree figures, e.g. 1,2,4,8.")
@click.option("--deltas", metavar="GRID", help="Delta grid: comma list or START:STOP:STEP (inclusive), e.g. 0:4:0.125.")
@click.option("--weights-K", "weights_K", metavar="LIST", help="K values of the optimal-weights figure, e.g. 2,4,8.")
@click.option("--n-samples", type=int, help="Samples per verifier for the exactness certificate.")
@click.option("--seed", type=int, help="Root seed of every random draw (default 0).")
@click.option("--gm-csv", type=click.Path(exists=True, dir_okay=False),
              help="CSV from `rass-theory sweep-gm`; default: run a small embedded sweep.")
@click.option("--formats", metavar="LIST", help="Figure formats besides PNG: svg, pdf (default png,svg).")
@click.option("--sections", metavar="LIST", help=f"Subset of sections to build: {','.join(SECTION_KEYS)}.")
@click.option("--budget", type=float, metavar="SECONDS",
              help="Refuse to start if the cost model estimates the report above SECONDS (see "
                   "rass_theory.report.budget).")
@click.option("--force", is_flag=True, help="Replace --out even if it is a non-empty directory that is not a report.")
@click.option("--keep-going", is_flag=True, help="Record a failing section in the report instead of aborting "
                                                 "(the exit status is still non-zero).")
@click.option("--strict", is_flag=True, help="Exit non-zero if any section is unavailable.")
def report(out, quick, K, deltas, weights_K, n_samples, seed, gm_csv, formats, sections, budget, force, keep_going,
           strict):
    """Write the rass_theory report to --out: index.md, index.html, figures/ (PNG + vector), data/ (CSV + JSON).

    Sections: exact acceptance of RMC, D-GRS, RASS and the threshold policy against the
    list-coupling bound; optimal rank weights; predicted speedup for draft trees; an exactness
    certificate of every built-in verifier with a p-value QQ plot; the harness's power; and
    Gaussian-mixture speedups, the learned digits model and the MNIST UNet. With no option besides
    --out it runs on embedded defaults: 60-70 s wall, 68-79 CPU-s, measured on a clean clone on a
    2-core machine (bench/results/readme_figures.md). The first line printed is the cost model's estimate
    per section (rass_theory.report.budget); --budget SECONDS refuses a report estimated above it.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..report import ReportConfig, ReportError, build_report

    overrides = {}
    if K is not None:
        overrides["K_values"] = parse_int_list(K, "--K")
    if deltas is not None:
        overrides["deltas"] = parse_float_grid(deltas, "--deltas")
    if weights_K is not None:
        overrides["weights_K"] = parse_int_list(weights_K, "--weights-K")
    if n_samples is not None:
        overrides["n_samples"] = n_samples
    if seed is not None:
        overrides["seed"] = seed
    if gm_csv is not None:
        from ..plot.diffusion import read_sweep_csv

        try:
            read_sweep_csv(gm_csv)  # fail before any computation, not at the last section
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--gm-csv") from None
        overrides["gm_csv"] = gm_csv
    if formats is not None:
        overrides["formats"] = tuple(x for x in formats.replace(" ", "").split(",") if x)
    if sections is not None:
        overrides["sections"] = parse_sections(sections)
    try:
        config = ReportConfig.default(quick=quick, **overrides)
    except (ValueError, TypeError) as exc:
        raise click.UsageError(f"invalid parameter: {exc}") from None
    from ..report.budget import check_budget

    if budget is not None:
        try:
            costs = check_budget(config, budget)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--budget") from None
    else:
        costs = check_budget(config)

    console = Console(stderr=True)
    given = [("--out", out), ("--quick", quick), ("--K", K), ("--deltas", deltas), ("--weights-K", weights_K),
             ("--n-samples", n_samples), ("--seed", seed), ("--gm-csv", gm_csv), ("--formats", formats),
             ("--sections", sections), ("--budget", budget), ("--force", force), ("--keep-going", keep_going), ("--strict", strict)]
    command = "rass-theory report " + " ".join(
        flag if value is True else f"{flag} {shlex.quote(str(value))}"
        for flag, value in given if value is not None and value is not False)
    console.print(f"estimated {sum(c.seconds for c in costs.values()):.0f} s on one core: " +
                  ", ".join(f"{k} {c.seconds:.0f} s" for k, c in costs.items()))
    t0 = time.perf_counter()
    previous = _exit_on_sigterm()
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as bar:
            summary = build_report(out, config, force=force, progress=_RichProgress(bar),
                                   keep_going=keep_going, command=command, cancelled=_TERMINATED.is_set)
    except ReportError as exc:
        if _TERMINATED.is_set():
            console.print(f"[red]{exc}")
            raise SystemExit(128 + signal.SIGTERM) from None
        raise click.ClickException(str(exc)) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    elapsed = time.perf_counter() - t0
    console.print(f"[bold]report written to {summary.out}[/bold] ({len(summary.files)} files, {elapsed:.1f} s)")
    for s in summary.unavailable:
        console.print(f"[yellow]section unavailable: {s.title}: {s.reason}")
    if strict and summary.unavailable:
        raise click.ClickException(f"{len(summary.unavailable)} section(s) unavailable (--strict)")
