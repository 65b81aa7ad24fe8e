"""What a report section gets and may raise: :class:`SectionContext` and :class:`SectionUnavailable`.

Kept below :mod:`.builder` (which runs the sections) so that the section modules import only
this module, not the builder that imports them.
"""
from __future__ import annotations

from pathlib import Path

from ..plot.style import save_figure
from ..plot.table import Table
from .config import ReportConfig
from .document import FigureBlock

__all__ = ["SectionUnavailable", "SectionContext", "unavailable_from", "is_missing_dependency"]


class SectionUnavailable(Exception):
    """A section's data source is missing; the message says which and why."""


def unavailable_from(exc: BaseException, what: str) -> SectionUnavailable:
    """Turn an import failure of another package into a :class:`SectionUnavailable`."""
    return SectionUnavailable(f"{what} is not available in this installation "
                              f"({type(exc).__name__}: {exc})")


def is_missing_dependency(exc: BaseException) -> bool:
    """True for an import of a ``rass_theory`` module or name that does not exist (yet)."""
    if isinstance(exc, ModuleNotFoundError):
        return (exc.name or "").startswith("rass_theory")
    if isinstance(exc, ImportError):
        return (getattr(exc, "name", None) or "").startswith("rass_theory")
    return False


class SectionContext:
    """What a section function gets: the config, an output root, and save helpers."""

    def __init__(self, root: Path, config: ReportConfig, key: str, progress=None):
        self.root, self.config, self.key = Path(root), config, key
        self.progress = progress
        self.files: list[str] = []
        (self.root / "figures").mkdir(exist_ok=True)
        (self.root / "data").mkdir(exist_ok=True)

    def save_data(self, name: str, table: Table) -> str:
        """Write ``data/<name>.csv`` and ``data/<name>.json``; return the CSV's relative path."""
        csv_rel, json_rel = f"data/{name}.csv", f"data/{name}.json"
        table.to_csv(self.root / csv_rel)
        table.to_json(self.root / json_rel)
        self.files += [csv_rel, json_rel]
        return csv_rel

    def save_figure(self, name: str, fig, *, caption: str, alt: str, data: str | None = None) -> FigureBlock:
        """Write ``figures/<name>.<fmt>`` for every configured format; return the figure block."""
        paths = save_figure(fig, self.root / "figures" / name, self.config.formats)
        rels = [p.relative_to(self.root).as_posix() for p in paths]
        self.files += rels
        png = next(r for r in rels if r.endswith(".png"))
        links = tuple((r.rsplit(".", 1)[1].upper(), r) for r in rels if not r.endswith(".png"))
        if data:
            links += (("data (CSV)", data),)
        return FigureBlock(image=png, alt=alt, caption=caption, links=links)
