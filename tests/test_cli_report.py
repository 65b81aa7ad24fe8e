"""`rass-theory report`: the quick report end to end, and clear errors for bad input."""
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from rass_theory.cli import main
from rass_theory.report.writer import MANIFEST_NAME


def test_quick_report_end_to_end(tmp_path):
    """One quick report (a single test, so pytest-xdist never builds it twice), checked throughout."""
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["report", "--out", str(out), "--quick", "--formats", "svg,pdf"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "report written to" in result.output

    # index.md / index.html with every section, nothing unavailable, and how to reproduce it
    md = (out / "index.md").read_text()
    html = (out / "index.html").read_text()
    for title in ("Acceptance and the bound", "Optimal rank weights", "Predicted speedup for draft trees",
                  "Exactness certificate", "Power of the exactness harness", "Gaussian-mixture speedups",
                  "Learned model: 8x8 digits"):
        assert f"## {title}" in md and title in html
    assert "**Unavailable:**" not in md and "FAILED" not in md
    assert f"rass-theory report --out {out} --quick --formats svg,pdf" in md

    # every figure in three formats, and the data behind each
    images = re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.png)\)", md)
    assert len(images) >= 8
    for png in images:
        stem = Path(png).stem
        for ext in ("png", "svg", "pdf"):
            assert (out / "figures" / f"{stem}.{ext}").stat().st_size > 1000
        assert f'src="{png}"' in html
    csvs = re.findall(r"\((data/[^)]+\.csv)\)", md)
    assert len(csvs) >= len(images)
    for csv in csvs:
        assert len((out / csv).read_text().splitlines()) >= 2
        assert (out / csv).with_suffix(".json").is_file()

    # the manifest lists exactly the files on disk
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["complete"] and manifest["config"]["quick"]
    assert {s["status"] for s in manifest["sections"]} == {"ok"}
    listed = {f["path"] for f in manifest["files"]}
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {MANIFEST_NAME}
    assert listed == on_disk

    # every built-in verifier passes its certificate
    cert = (out / "data" / "exactness_certificate.csv").read_text().splitlines()
    header = cert[0].split(",")
    passed = {line.split(",")[header.index("verifier")]: line.split(",")[header.index("passed")] for line in cert[1:]}
    assert set(passed) >= {"rmc", "dgrs", "rass", "resample"} and set(passed.values()) == {"True"}

    # no temporary directory left next to the report
    assert [p.name for p in out.parent.iterdir()] == ["report"]


class TestBadInput:
    def run(self, *args):
        return CliRunner().invoke(main, ["report", *args])

    def test_help(self):
        res = self.run("--help")
        assert res.exit_code == 0 and "--out" in res.output and "--quick" in res.output

    def test_out_is_required(self):
        res = self.run()
        assert res.exit_code == 2 and "Missing option '--out'" in res.output

    def test_unknown_option(self, tmp_path):
        res = self.run("--out", str(tmp_path / "r"), "--colour", "red")
        assert res.exit_code == 2 and "No such option" in res.output

    @pytest.mark.parametrize("args, match", [
        (("--K", "2,x"), "--K"),
        (("--K", "0,2"), "K must be >= 1"),
        (("--deltas", "0:-1:0.5"), "STOP >= START"),
        (("--deltas", "-1,2"), "deltas must be >= 0"),
        (("--deltas", "0,nan"), "deltas must be finite"),
        (("--n-samples", "5"), "n_samples must be >= 1000"),
        (("--formats", "gif"), "formats"),
        (("--sections", "acceptance,bogus"), "sections"),
        (("--seed", "-3"), "seed must be >= 0"),
    ])
    def test_invalid_parameters(self, tmp_path, args, match):
        res = self.run("--out", str(tmp_path / "r"), *args)
        assert res.exit_code == 2, res.output
        assert match in res.output
        assert not (tmp_path / "r").exists()

    def test_unwritable_destination(self, tmp_path):
        blocker = tmp_path / "file"
        blocker.write_text("not a directory")
        res = self.run("--out", str(blocker / "r"), "--sections", "trees", "--quick")
        assert res.exit_code == 1 and "cannot write the report" in res.output

    def test_foreign_directory_is_not_replaced(self, tmp_path):
        d = tmp_path / "mine"
        d.mkdir()
        (d / "notes.txt").write_text("precious")
        res = self.run("--out", str(d), "--sections", "trees", "--quick")
        assert res.exit_code == 1 and "refusing to replace" in res.output
        assert (d / "notes.txt").read_text() == "precious"

    def test_malformed_gm_csv(self, tmp_path):
        bad = tmp_path / "sweep.csv"
        bad.write_text("verifier,K\nrass,2\n")
        res = self.run("--out", str(tmp_path / "r"), "--gm-csv", str(bad))
        assert res.exit_code == 2 and "lacks column" in res.output and not (tmp_path / "r").exists()

    def test_missing_gm_csv(self, tmp_path):
        res = self.run("--out", str(tmp_path / "r"), "--gm-csv", str(tmp_path / "nope.csv"))
        assert res.exit_code == 2 and "does not exist" in res.output


def test_terminated_run_leaves_nothing(tmp_path):
    """SIGTERM during a run: non-zero exit, no report, no partial directory left behind."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "report"
    proc = subprocess.Popen([sys.executable, "-c", "from rass_theory.cli import main; main()", "report",
                             "--out", str(out), "--quick", "--sections", "exactness"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(".report.partial-*")):
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline, "the run never created its partial directory"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert list(tmp_path.iterdir()) == []
