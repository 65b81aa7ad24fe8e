"""Report machinery: document rendering, atomic directory writing, section handling."""
import hashlib
import json
import os

import pytest

from rass_theory.report import ReportConfig, ReportError, SectionUnavailable, build_report
from rass_theory.report import builder as builder_mod
from rass_theory.report.document import (BulletList, CodeBlock, Document, FigureBlock, Heading, Note, Paragraph,
                                         TableBlock, render_html, render_markdown)
from rass_theory.report.writer import MANIFEST_NAME, AtomicDirectory


def _doc():
    return Document("T <1>", [
        Heading("Sec", 2, anchor="sec"),
        Paragraph("see `x < y` and [proofs](proofs/P1.md) and **bold** <script>"),
        FigureBlock("figures/a.png", "alt", "cap", (("SVG", "figures/a.svg"),)),
        TableBlock(("a", "b|c"), (("1", "2|3"),), caption="tab", align=("l", "r")),
        BulletList(("one", "two")),
        CodeBlock("rass-theory report --out r"),
        Note("missing thing", "unavailable"),
    ])


class TestDocument:
    def test_markdown(self):
        md = render_markdown(_doc())
        assert md.startswith("# T <1>\n")
        assert "## Sec" in md and '<a id="sec"></a>' in md
        assert "![alt](figures/a.png)" in md and "[SVG](figures/a.svg)" in md
        assert "| a | b\\|c |" in md and "| --- | ---: |" in md and "| 1 | 2\\|3 |" in md
        assert "- one\n- two" in md
        assert "```\nrass-theory report --out r\n```" in md
        assert "> **Unavailable:** missing thing" in md

    def test_html_escapes_and_inline_markup(self):
        page = render_html(_doc())
        assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
        assert "<script>" not in page and "&lt;script&gt;" in page
        assert "<code>x &lt; y</code>" in page
        assert '<a href="proofs/P1.md">proofs</a>' in page and "<strong>bold</strong>" in page
        assert '<img src="figures/a.png" alt="alt">' in page
        assert '<td class=r>2|3</td>' in page
        assert 'class="note unavailable"' in page
        assert "<title>T &lt;1&gt;</title>" in page


class TestAtomicDirectory:
    def test_success_moves_into_place_without_leftovers(self, tmp_path):
        out = tmp_path / "rep"
        with AtomicDirectory(out) as tmp:
            assert tmp.parent == tmp_path and tmp.name.startswith(".rep.partial-")
            (tmp / MANIFEST_NAME).write_text("{}")
            assert not out.exists()
        assert (out / MANIFEST_NAME).is_file()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]

    def test_failure_leaves_nothing(self, tmp_path):
        out = tmp_path / "rep"
        with pytest.raises(RuntimeError, match="boom"):
            with AtomicDirectory(out) as tmp:
                (tmp / "half.txt").write_text("x")
                raise RuntimeError("boom")
        assert list(tmp_path.iterdir()) == []

    def test_existing_report_replaced_only_on_success(self, tmp_path):
        out = tmp_path / "rep"
        out.mkdir()
        (out / MANIFEST_NAME).write_text('{"old": true}')
        with pytest.raises(RuntimeError):
            with AtomicDirectory(out) as tmp:
                (tmp / MANIFEST_NAME).write_text('{"new": true}')
                raise RuntimeError("fail midway")
        assert json.loads((out / MANIFEST_NAME).read_text()) == {"old": True}
        with AtomicDirectory(out) as tmp:
            (tmp / MANIFEST_NAME).write_text('{"new": true}')
        assert json.loads((out / MANIFEST_NAME).read_text()) == {"new": True}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]

    def test_refuses_foreign_directory_unless_forced(self, tmp_path):
        out = tmp_path / "mydata"
        out.mkdir()
        (out / "precious.txt").write_text("keep me")
        with pytest.raises(ReportError, match="not a previous rass-theory report"):
            with AtomicDirectory(out):
                pass
        assert (out / "precious.txt").read_text() == "keep me"
        with AtomicDirectory(out, force=True) as tmp:
            (tmp / MANIFEST_NAME).write_text("{}")
        assert not (out / "precious.txt").exists()

    def test_empty_directory_is_replaced(self, tmp_path):
        out = tmp_path / "empty"
        out.mkdir()
        with AtomicDirectory(out) as tmp:
            (tmp / MANIFEST_NAME).write_text("{}")
        assert (out / MANIFEST_NAME).exists()

    def test_destination_is_a_file(self, tmp_path):
        f = tmp_path / "file"
        f.write_text("x")
        with pytest.raises(ReportError, match="not a directory"):
            with AtomicDirectory(f):
                pass

    def test_unwritable_parent(self, tmp_path):
        blocker = tmp_path / "blocker"
        blocker.write_text("a file, so nothing can be created below it")
        with pytest.raises(ReportError, match="cannot write the report"):
            with AtomicDirectory(blocker / "sub" / "rep"):
                pass


def _fake_registry(monkeypatch, sections):
    monkeypatch.setattr(builder_mod, "_section_registry", lambda: sections)


class TestBuildReportMechanics:
    """Section handling, with sections defined here (no other package needed)."""

    def _sections(self, trouble=None):
        from rass_theory.plot.table import Table

        def ok(ctx):
            import matplotlib.figure

            fig = matplotlib.figure.Figure()
            fig.add_subplot().plot([0, 1], [1, 0])
            data = ctx.save_data("line", Table({"x": [0.0, 1.0], "y": [1.0, 0.0]}))
            return [Paragraph("fine"), ctx.save_figure("line", fig, caption="c", alt="a", data=data)]

        def missing(ctx):
            raise SectionUnavailable("the widget module is not installed")

        def import_missing(ctx):
            import rass_theory.this_module_does_not_exist  # noqa: F401

        def broken(ctx):
            raise ZeroDivisionError("bug in section")

        reg = {"acceptance": ("OK section", ok), "weights": ("Missing", missing),
               "trees": ("Import missing", import_missing)}
        if trouble:
            reg["exactness"] = ("Broken", broken)
        return reg

    def test_report_files_and_manifest(self, tmp_path, monkeypatch):
        _fake_registry(monkeypatch, self._sections())
        cfg = ReportConfig.default(quick=True, sections=("acceptance", "weights", "trees"), formats=("svg", "pdf"))
        summary = build_report(tmp_path / "r", cfg, command="rass-theory report --out r")
        out = tmp_path / "r"
        assert [s.status for s in summary.sections] == ["ok", "unavailable", "unavailable"]
        for name in ("index.md", "index.html", MANIFEST_NAME, "figures/line.png", "figures/line.svg",
                     "figures/line.pdf", "data/line.csv", "data/line.json"):
            assert (out / name).is_file(), name
        md = (out / "index.md").read_text()
        assert "![a](figures/line.png)" in md
        assert "the widget module is not installed" in md
        assert "rass_theory.this_module_does_not_exist" in md
        manifest = json.loads((out / MANIFEST_NAME).read_text())
        assert manifest["complete"] is True and manifest["config"]["quick"] is True
        for entry in manifest["files"]:
            data = (out / entry["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"]
        assert sorted(summary.files) == sorted([e["path"] for e in manifest["files"]] + [MANIFEST_NAME])

    def test_failing_section_aborts_and_keeps_old_report(self, tmp_path, monkeypatch):
        _fake_registry(monkeypatch, self._sections())
        out = tmp_path / "r"
        build_report(out, ReportConfig.default(quick=True, sections=("acceptance",)))
        before = (out / MANIFEST_NAME).read_text()
        _fake_registry(monkeypatch, self._sections(trouble=True))
        with pytest.raises(ReportError, match="section 'exactness'.*ZeroDivisionError"):
            build_report(out, ReportConfig.default(quick=True, sections=("acceptance", "exactness")))
        assert (out / MANIFEST_NAME).read_text() == before
        assert sorted(os.listdir(tmp_path)) == ["r"]

    def test_cancelled_run_writes_nothing(self, tmp_path, monkeypatch):
        _fake_registry(monkeypatch, self._sections())
        with pytest.raises(ReportError, match="cancelled"):
            build_report(tmp_path / "r", ReportConfig.default(quick=True, sections=("acceptance",)),
                         cancelled=lambda: True)
        assert list(tmp_path.iterdir()) == []

    def test_keep_going_marks_failure(self, tmp_path, monkeypatch):
        _fake_registry(monkeypatch, self._sections(trouble=True))
        out = tmp_path / "r"
        with pytest.raises(ReportError, match="FAILED: exactness"):
            build_report(out, ReportConfig.default(quick=True, sections=("acceptance", "exactness")), keep_going=True)
        manifest = json.loads((out / MANIFEST_NAME).read_text())
        assert manifest["complete"] is False
        assert [s["status"] for s in manifest["sections"]] == ["ok", "failed"]
        assert "FAILED:" in (out / "index.md").read_text()


class TestReportConfig:
    def test_quick_is_smaller(self):
        q, d = ReportConfig.default(quick=True), ReportConfig.default()
        assert len(q.deltas) < len(d.deltas) and q.n_samples < d.n_samples and q.qq_seeds < d.qq_seeds

    @pytest.mark.parametrize("kwargs, match", [
        ({"K_values": (0, 2)}, "K"),
        ({"deltas": (-1.0, 1.0)}, "deltas"),
        ({"deltas": (float("nan"),)}, "deltas"),
        ({"n_samples": 10}, "n_samples"),
        ({"alpha": 1.5}, "alpha"),
        ({"formats": ("gif",)}, "formats"),
        ({"sections": ("nope",)}, "sections"),
        ({"tree_L": (1, 40)}, "tree_L"),
        ({"seed": -1}, "seed"),
    ])
    def test_invalid(self, kwargs, match):
        with pytest.raises((ValueError, TypeError), match=match):
            ReportConfig.default(**kwargs)

    def test_png_always_written_and_sections_ordered(self):
        cfg = ReportConfig.default(formats=("pdf",), sections=("power", "acceptance"))
        assert cfg.formats == ("png", "pdf") and cfg.sections == ("acceptance", "power")
        json.dumps(cfg.to_dict())
