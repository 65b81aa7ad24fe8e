"""``rass-theory report``: every theory figure, the exactness certificate and the data behind them.

>>> from rass_theory.report import ReportConfig, build_report        # doctest: +SKIP
>>> build_report("report/", ReportConfig.default(quick=True))        # doctest: +SKIP

The report is written to a temporary directory next to the destination and renamed into place
only when complete (:class:`~rass_theory.report.writer.AtomicDirectory`).
"""
from .builder import ReportSummary, SectionUnavailable, build_report
from .config import SECTION_KEYS, ReportConfig
from .writer import ReportError

__all__ = ["build_report", "ReportConfig", "ReportSummary", "ReportError", "SectionUnavailable", "SECTION_KEYS"]
