"""The report's cost model: every section within its budget at the defaults, and the budgets enforced."""
import numpy as np
import pytest
from click.testing import CliRunner

from rass_theory.report import ReportConfig
from rass_theory.report import budget as B
from rass_theory.report.config import SECTION_KEYS


class TestBudgets:
    @pytest.mark.parametrize("quick", [False, True])
    def test_every_section_within_its_budget(self, quick):
        cfg = ReportConfig.default(quick=quick)
        budgets, limit = B.budgets_for(cfg)
        costs = B.estimate(cfg)
        assert set(costs) == set(SECTION_KEYS)
        over = {k: (round(c.seconds, 1), budgets[k]) for k, c in costs.items() if c.seconds > budgets[k]}
        assert not over, f"sections over budget (estimate, budget): {over}"
        total = sum(c.seconds for c in costs.values())
        assert total + B.RESERVED_SECONDS["quick" if quick else "default"] <= limit

    @pytest.mark.parametrize("budgets, limit, mode", [(B.BUDGETS, B.DEFAULT_LIMIT_SECONDS, "default"),
                                                      (B.QUICK_BUDGETS, B.QUICK_LIMIT_SECONDS, "quick")])
    def test_budgets_fit_the_stated_limit(self, budgets, limit, mode):
        assert set(budgets) == set(SECTION_KEYS)
        assert sum(budgets.values()) + B.RESERVED_SECONDS[mode] <= limit

    @pytest.mark.parametrize("overrides, section", [
        ({"n_samples": 2_000_000}, "exactness"),
        ({"K_values": (1, 2, 4, 8, 16, 32)}, "acceptance"),     # K = 16, 32: one optimisation per delta
        ({"weights_deltas": tuple(np.round(np.arange(0.0, 4.0 + 1e-9, 0.01), 10))}, "weights"),
    ])
    def test_growth_is_caught(self, overrides, section):
        cfg = ReportConfig.default(**overrides)
        costs = B.estimate(cfg)
        assert costs[section].seconds > B.BUDGETS[section]

    def test_progress_total_is_the_cost_model(self, tmp_path):
        """The cheap sections' progress bars count exactly the cost model's units."""
        from rass_theory.report.builder import SectionContext
        from rass_theory.report.sections import SECTIONS

        cfg = ReportConfig.default(quick=True, K_values=(1, 2, 4, 9), deltas=(0.0, 0.5, 1.0),
                                   policy_deltas=(0.5, 1.0), weights_K=(2,), weights_deltas=(0.5, 1.0),
                                   tree_L=(1, 2), formats=("png",))
        for key in ("acceptance", "weights", "trees"):
            seen = []
            ctx = SectionContext(tmp_path, cfg, key, progress=lambda d, t: seen.append((d, t)))
            SECTIONS[key][1](ctx)
            units = B.section_work(key, cfg)
            expected = sum(v for u, v in units.items() if not u.endswith(".fixed"))
            assert seen[-1] == (expected, expected), (key, seen[-1], units)
        # K = 9 has no threshold table: its policy points are optimisations, priced as such
        assert B.section_work("acceptance", cfg)["acceptance.policy"] == 2

    def test_check_budget(self):
        cfg = ReportConfig.default(quick=True)
        assert set(B.check_budget(cfg)) == set(SECTION_KEYS)
        with pytest.raises(ValueError, match=r"over the budget of 1 s \(.*exactness"):
            B.check_budget(cfg, 1.0)
        for bad in (0, -5.0, float("nan"), float("inf"), True, "60"):
            with pytest.raises(ValueError, match="budget must be a positive number of seconds"):
                B.check_budget(cfg, bad)
        with pytest.raises(ValueError, match="unknown report section 'nope'"):
            B.section_work("nope", cfg)


class TestValidation:
    @pytest.mark.parametrize("sections, match", [
        (("acceptance", "bogus"), "unknown section\\(s\\) 'bogus'; sections are acceptance, weights"),
        ((), "sections must name at least one"),
        (("trees", "trees"), "section\\(s\\) listed twice: trees"),
    ])
    def test_config_sections(self, sections, match):
        with pytest.raises(ValueError, match=match):
            ReportConfig.default(sections=sections)

    def test_config_harness_options(self):
        with pytest.raises(ValueError, match="cert_harness accepts"):
            ReportConfig.default(cert_harness={"n_samples": 5})
        assert ReportConfig.default(cert_harness={"dtype": "float64"}).cert_harness["dtype"] == ("float64",)

    @pytest.mark.parametrize("args, match", [
        (("--sections", "acceptance,bogus"), "unknown section(s) 'bogus'"),
        (("--sections", ","), "must list at least one section"),
        (("--sections", "trees,trees"), "listed twice: trees"),
        (("--budget", "-1"), "budget must be a positive number"),
        (("--budget", "2", "--quick"), "over the budget of 2 s"),
    ])
    def test_cli(self, tmp_path, args, match):
        from rass_theory.cli import main

        res = CliRunner().invoke(main, ["report", "--out", str(tmp_path / "r"), *args])
        assert res.exit_code == 2, res.output
        assert match in " ".join(res.output.split())
        assert not (tmp_path / "r").exists()
