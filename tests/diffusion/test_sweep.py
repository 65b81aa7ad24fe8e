"""Sweep and the ``rass-theory sweep-gm`` command: rows appended as arms finish, resume, figure."""
import csv
import os

import numpy as np
import pytest
from click.testing import CliRunner

from rass_theory.cli import main
from rass_theory.diffusion.sweep import build_arms, read_rows, run_sweep

SMALL = dict(dim=8, n_components=3, shapes=[(2, 2)], verifiers=["rmc", "dgrs"], n_samples=20,
             n_steps=6, n_permutations=19)


class TestArms:
    def test_rmc_chains_matched(self):
        arms = build_arms([(4, 3)], ["rmc", "dgrs"])
        chains = {a.budget: a.shape.depth for a in arms if a.verifier == "rmc"}
        assert chains == {"target_nodes": 21, "drafted_nodes": 84}
        assert [a.budget for a in arms if a.verifier == "dgrs"] == ["tree"]

    def test_bad_budget(self):
        with pytest.raises(ValueError, match="budgets"):
            build_arms([(2, 2)], ["rmc"], budgets=["flops"])


class TestRunSweep:
    def test_rows_figure_and_resume(self, tmp_path):
        rows = run_sweep(tmp_path, **SMALL)
        assert len(rows) == 2 + 1          # rmc under 2 budgets + dgrs on the tree
        assert (tmp_path / "sweep_gm.png").exists() and (tmp_path / "sweep_gm.pdf").exists()
        on_disk = read_rows(tmp_path / "sweep_gm.csv")
        assert [r["key"] for r in on_disk] == [r["key"] for r in rows]
        assert all(float(r["speedup"]) > 0 and 0 <= float(r["combined_pvalue"]) <= 1 for r in on_disk)
        # resuming runs nothing new
        calls = []
        run_sweep(tmp_path, progress=calls.append, **SMALL)
        assert calls == []

    def test_interrupted_sweep_keeps_finished_rows(self, tmp_path):
        class Stop(Exception):
            pass

        def stop_after_first(row):
            raise Stop

        with pytest.raises(Stop):
            run_sweep(tmp_path, progress=stop_after_first, **SMALL)
        with open(tmp_path / "sweep_gm.csv") as fh:
            assert len(list(csv.DictReader(fh))) == 1


class TestCommand:
    def test_help_documents_every_option(self):
        res = CliRunner().invoke(main, ["sweep-gm", "--help"])
        assert res.exit_code == 0
        for opt in ["--dim", "--K", "--L", "--verifiers", "--budgets", "--n-samples", "--n-steps", "--churn",
                    "--seed", "--alpha", "--n-permutations", "--expansion", "--out", "--resume"]:
            assert opt in res.output

    @pytest.mark.parametrize("args,needle", [
        (["--K", "1,2", "--L", "3,3,3"], "same length"),
        (["--K", "0"], "positive"),
        (["--verifiers", "magic"], "unknown verifier"),
        (["--churn", "-1"], "(0, inf)"),
        (["--budgets", "flops"], "unknown budget"),
    ])
    def test_bad_input(self, tmp_path, args, needle):
        res = CliRunner().invoke(main, ["sweep-gm", "--out", str(tmp_path)] + args)
        assert res.exit_code == 2 and needle in res.output

    def test_small_run(self, tmp_path):
        res = CliRunner().invoke(main, ["sweep-gm", "--dim", "8", "--n-components", "3", "--K", "1", "--L", "2",
                                        "--verifiers", "dgrs", "--n-samples", "30", "--n-steps", "8",
                                        "--n-permutations", "19", "--out", str(tmp_path)])
        assert res.exit_code == 0, res.output
        assert os.path.exists(tmp_path / "sweep_gm.csv")
