"""A small column table: the data behind a figure, written next to it as CSV or JSON.

Every figure function in :mod:`rass_theory.plot` has a companion ``*_data`` function returning a
:class:`Table`; the figure is drawn from that table only, so the CSV a report writes is exactly
what the figure shows.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Table", "concat"]


def _as_column(name, values) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"column {name!r} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind not in "biufUSO":
        raise TypeError(f"column {name!r} has unsupported dtype {arr.dtype}")
    return arr


@dataclass(frozen=True)
class Table:
    """Named, equal-length columns plus free-form metadata (units, parameters, provenance).

    Parameters
    ----------
    columns : dict[str, array_like]
        Column name to a one-dimensional array; all columns have the same length.
    meta : dict, optional
        JSON-serialisable description (units, parameters, source) stored with the data.
    """

    columns: dict
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.columns, dict) or not self.columns:
            raise ValueError("columns must be a non-empty dict of name -> 1-d array")
        cols = {str(k): _as_column(k, v) for k, v in self.columns.items()}
        lengths = {len(v) for v in cols.values()}
        if len(lengths) != 1:
            raise ValueError(f"columns must all have the same length, got lengths {sorted(lengths)}")
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "meta", dict(self.meta))

    @classmethod
    def from_records(cls, records, meta=None, columns=None) -> "Table":
        """Build a table from a list of dicts (all with the same keys)."""
        records = list(records)
        if not records:
            raise ValueError("records must not be empty")
        names = list(columns) if columns is not None else list(records[0])
        return cls({n: [r[n] for r in records] for n in names}, meta or {})

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.columns[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; columns are {self.names}") from None

    def where(self, **equal) -> "Table":
        """Rows whose columns equal the given values, e.g. ``t.where(K=4, rule="rass")``."""
        mask = np.ones(len(self), dtype=bool)
        for name, value in equal.items():
            mask &= self[name] == value
        return Table({k: v[mask] for k, v in self.columns.items()}, self.meta)

    def records(self) -> list[dict]:
        """Rows as dicts of Python scalars."""
        cols = {k: v.tolist() for k, v in self.columns.items()}
        return [{k: cols[k][i] for k in cols} for i in range(len(self))]

    # -- output -----------------------------------------------------------------------------
    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """Write (or return) CSV text; floats keep full precision (``repr``)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.names)
        for row in self.records():
            writer.writerow([_fmt_csv(v) for v in row.values()])
        text = buf.getvalue()
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """Write (or return) JSON ``{"meta": ..., "columns": {name: [...]}}``; NaN becomes null."""
        payload = {"meta": self.meta,
                   "columns": {k: [_json_value(x) for x in v.tolist()] for k, v in self.columns.items()}}
        text = json.dumps(payload, indent=1, allow_nan=False, default=_json_default)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def format_rows(self, digits: int = 4) -> list[list[str]]:
        """Rows as strings for display (``digits`` significant digits for floats)."""
        return [[_fmt_display(v, digits) for v in row.values()] for row in self.records()]


def _fmt_csv(v):
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return v


def _fmt_display(v, digits):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if v != 0 and (abs(v) < 10 ** -(digits - 1) or abs(v) >= 10 ** (digits + 2)):
            return f"{v:.{digits - 1}e}"
        return f"{v:.{digits}g}" if abs(v) >= 1 else f"{v:.{digits}f}".rstrip("0").rstrip(".") or "0"
    return str(v)


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot serialise {type(o).__name__} to JSON")


def concat(tables) -> Table:
    """Stack tables with the same columns (metadata of the first is kept)."""
    tables = list(tables)
    if not tables:
        raise ValueError("tables must not be empty")
    names = tables[0].names
    for t in tables[1:]:
        if t.names != names:
            raise ValueError(f"tables must have the same columns, got {names} and {t.names}")
    return Table({n: np.concatenate([t[n] for t in tables]) for n in names}, tables[0].meta)
