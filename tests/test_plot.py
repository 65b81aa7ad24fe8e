"""Figures of rass_theory.plot: data tables, formulas, and the figures drawn from them."""
import json
import math

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy import stats

from rass_theory import plot
from rass_theory.plot.style import RULE_STYLE, rule_style, save_figure
from rass_theory.plot.table import Table, concat
from rass_theory.plot.trees import expected_committed_length


def _texts_inside(fig):
    """Everything matplotlib draws (labels, ticks, titles, legends) lies inside the figure."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    tight = fig.get_tightbbox(canvas.get_renderer())  # inches, drawn artists only
    page = fig.bbox_inches
    tol = 0.02
    assert (tight.x0 >= page.x0 - tol and tight.y0 >= page.y0 - tol and tight.x1 <= page.x1 + tol
            and tight.y1 <= page.y1 + tol), f"drawn content {tight} exceeds the figure {page}: clipped labels"


def _labelled(ax):
    assert ax.get_xlabel().strip() and ax.get_ylabel().strip()


class TestTable:
    def test_construction_and_access(self):
        t = Table({"a": [1, 2, 3], "b": ["x", "y", "x"]}, {"units": "u"})
        assert len(t) == 3 and t.names == ["a", "b"]
        assert t.where(b="x")["a"].tolist() == [1, 3]
        assert t.records()[1] == {"a": 2, "b": "y"}

    @pytest.mark.parametrize("cols, err, match", [
        ({}, ValueError, "non-empty"),
        ({"a": [1, 2], "b": [1]}, ValueError, "same length"),
        ({"a": [[1, 2]]}, ValueError, "one-dimensional"),
    ])
    def test_invalid(self, cols, err, match):
        with pytest.raises(err, match=match):
            Table(cols)

    def test_missing_column_names_the_columns(self):
        with pytest.raises(KeyError, match="columns are"):
            Table({"a": [1]})["b"]

    def test_csv_keeps_full_precision_and_json_nulls_nan(self, tmp_path):
        x = 0.1 + 0.2
        t = Table({"x": [x, float("nan")], "k": [1, 2]}, {"m": 1})
        text = t.to_csv(tmp_path / "t.csv")
        assert text.splitlines() == ["x,k", f"{x!r},1", "nan,2"]
        payload = json.loads(t.to_json(tmp_path / "t.json"))
        assert payload["columns"]["x"] == [x, None] and payload["meta"] == {"m": 1}

    def test_concat(self):
        a, b = Table({"a": [1]}), Table({"a": [2, 3]})
        assert concat([a, b])["a"].tolist() == [1, 2, 3]
        with pytest.raises(ValueError, match="same columns"):
            concat([a, Table({"b": [1]})])


class TestStyle:
    def test_save_formats(self, tmp_path):
        fig = Figure()
        fig.add_subplot().plot([0, 1])
        paths = save_figure(fig, tmp_path / "f", ("png", "svg", "pdf"))
        assert [p.name for p in paths] == ["f.png", "f.svg", "f.pdf"]
        assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert paths[2].read_bytes()[:4] == b"%PDF" and b"<svg" in paths[1].read_bytes()

    def test_svg_is_reproducible(self, tmp_path):
        fig = Figure()
        fig.add_subplot().plot([0, 1])
        a = save_figure(fig, tmp_path / "a", ("svg",))[0].read_bytes()
        b = save_figure(fig, tmp_path / "b", ("svg",))[0].read_bytes()
        assert a == b

    def test_bad_format_and_rule(self, tmp_path):
        with pytest.raises(ValueError, match="formats"):
            save_figure(Figure(), tmp_path / "f", ("gif",))
        with pytest.raises(ValueError, match="rule must be one of"):
            rule_style("nope")

    def test_palette_distinct(self):
        colours = [RULE_STYLE[r]["color"] for r in ("rmc", "dgrs", "rass", "threshold", "bound")]
        assert len(set(colours)) == len(colours)


class TestExpectedCommittedLength:
    @pytest.mark.parametrize("a, L", [(0.3, 1), (0.5, 3), (0.9, 6), (0.0, 4), (1.0, 5)])
    def test_uniform_closed_form(self, a, L):
        expected = L if a == 1 else (1 - a**L) / (1 - a)
        assert math.isclose(expected_committed_length([a] * L), expected, rel_tol=1e-14)

    def test_matches_simulated_walk(self):
        # simulate the walk: at each depth accept w.p. a_j and move on, else commit the correction and stop
        rng = np.random.default_rng(12345)
        a = np.array([0.8, 0.6, 0.7, 0.5])
        n = 200_000
        accept = rng.random((n, a.size)) < a
        first_reject = np.where(accept.all(axis=1), a.size, np.argmin(accept, axis=1))
        committed = np.minimum(first_reject + 1, a.size)
        est, se = committed.mean(), committed.std(ddof=1) / math.sqrt(n)
        assert abs(est - expected_committed_length(a)) / se < 4.5

    @pytest.mark.parametrize("bad, err", [([], ValueError), ([1.2], ValueError), ([float("nan")], ValueError),
                                          ([[0.5]], ValueError)])
    def test_invalid(self, bad, err):
        with pytest.raises(err):
            expected_committed_length(bad)


class TestAcceptanceFigure:
    @pytest.fixture(scope="class")
    @classmethod
    def table(cls):
        return plot.acceptance_data(K_values=(1, 2, 4), deltas=np.linspace(0, 3, 5),
                                    rules=("rmc", "dgrs", "rass", "bound"))

    def test_values(self, table):
        rmc = table.where(rule="rmc")
        assert np.allclose(rmc["acceptance"], 2 * stats.norm.cdf(-rmc["delta"] / 2), atol=1e-12)
        for K in (1, 2, 4):
            b = table.where(rule="bound", K=K)["acceptance"]
            for rule in ("dgrs", "rass"):
                assert np.all(table.where(rule=rule, K=K)["acceptance"] <= b + 1e-9)
        at0 = table.where(delta=0.0)["acceptance"]
        assert np.allclose(at0, 1.0)

    def test_figure_draws_the_table(self, table):
        fig = plot.plot_acceptance(table)
        axes = [ax for ax in fig.axes if ax.get_visible()]
        assert len(axes) == 3
        ax = axes[2]  # K = 4
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        rass = table.where(rule="rass", K=4)
        np.testing.assert_allclose(lines[rule_style("rass")["label"]].get_ydata(), rass["acceptance"])
        assert "K = 4" in ax.get_title()
        _labelled(axes[0])
        assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 4
        _texts_inside(fig)

    def test_gap(self, table):
        gaps = plot.gap_data(table)
        assert set(gaps["rule"]) == {"dgrs", "rass"}
        assert np.all(gaps["gap"] >= -1e-9)
        fig = plot.plot_gap_to_bound(gaps)
        assert len([a for a in fig.axes if a.get_visible()]) == 2  # K = 1 omitted
        _texts_inside(fig)

    def test_invalid_arguments(self):
        with pytest.raises(ValueError, match="rules"):
            plot.acceptance_data(K_values=(2,), deltas=(1.0,), rules=("nope",))
        with pytest.raises(ValueError, match="deltas"):
            plot.acceptance_data(K_values=(2,), deltas=(-1.0,))
        with pytest.raises((ValueError, TypeError), match="K"):
            plot.acceptance_data(K_values=(0,), deltas=(1.0,))


class TestWeightsFigure:
    def test_weights_and_figure(self):
        t = plot.optimal_weights_data(K_values=(2, 4), deltas=(0.0, 1.0, 2.0))
        for K in (2, 4):
            for d in (0.0, 1.0, 2.0):
                w = t.where(K=K, delta=d)["weight"]
                assert w.size == K and abs(w.sum() - 1) < 1e-9 and np.all(w >= 0)
            assert np.allclose(t.where(K=K, delta=0.0)["weight"], 1 / K, atol=1e-6)
            w2 = t.where(K=K, delta=2.0)["weight"]
            assert w2[-1] == w2.max()  # mass moves to the top rank
        fig = plot.plot_optimal_weights(t)
        panels = [a for a in fig.axes if a.get_title()]
        assert [a.get_title() for a in panels] == ["K = 2", "K = 4"]
        assert len(fig.axes) == 3  # two panels and the colour bar
        _texts_inside(fig)


class TestTreeFigure:
    def test_data_and_figure(self):
        import rass_theory as rt

        t = plot.tree_speedup_data(K_values=(1, 2, 4), L_values=(1, 2, 3), delta=1.0)
        row = t.where(rule="rass", K=4, L=3)
        a = rt.acceptance("rass", 4, 1.0)
        assert math.isclose(row["speedup"][0], 1 + a + a * a, rel_tol=1e-12)
        assert row["drafted_nodes"][0] == 4 + 16 + 64 and row["target_nodes"][0] == 1 + 4 + 16
        assert np.all(t.where(L=1)["speedup"] == 1.0)
        fig = plot.plot_tree_speedup(t)
        _labelled(fig.axes[0])
        assert fig.axes[1].get_xscale() == "log"
        _texts_inside(fig)
        with pytest.raises(ValueError, match="rules"):
            plot.tree_speedup_data(rules=("rmc",))


class TestExactnessFigures:
    @pytest.fixture(scope="class")
    @classmethod
    def verifiers(cls):
        import rass_theory as rt

        return {"rass": (rt.verifiers.rass(), 4), "resample": (rt.verifiers.resample(), 4)}

    def test_certificate(self, verifiers):
        t = plot.certificate_data(verifiers, K=4, delta=0.5, dim=4, n_samples=4000, seed=3)
        assert set(t["verifier"]) == {"rass", "resample"}
        assert np.all((t["pvalue"] >= 0) & (t["pvalue"] <= 1))
        assert "contract" in set(t["test"]) and all(t["passed"])
        fig = plot.plot_certificate(t)
        ax = fig.axes[0]
        assert [lbl.get_text() for lbl in ax.get_xticklabels()] == ["rass", "resample"]
        rows = [lbl.get_text() for lbl in ax.get_yticklabels()]
        assert "contract" not in rows and len(rows) == len(set(t["test"])) - 1
        assert sum(txt.get_text() == "PASS" for txt in ax.texts) == 2
        _texts_inside(fig)

    def test_qq(self, verifiers):
        t = plot.pvalue_qq_data(verifiers, n_seeds=2, K=4, delta=0.5, dim=4, n_samples=2000, seed=4)
        assert set(t["rep"]) == {0, 1} and "contract" not in set(t["test"])
        fig = plot.plot_pvalue_qq(t)
        _labelled(fig.axes[0])
        _texts_inside(fig)

    def test_seeds_are_reproducible_and_distinct(self):
        from rass_theory.plot.exactness import derive_seed

        assert derive_seed(0, 1) == derive_seed(0, 1) != derive_seed(0, 2)
        assert 0 <= derive_seed(7, 1000, 3) < 2**63


class TestPowerFigure:
    def test_detectable_distance_is_the_harness_formula(self):
        from rass_theory.stats.power import detectable_ks_distance

        t = plot.detectable_distance_data((1000, 10_000), alpha=1e-3, n_tests=11, n_bins=4096)
        assert set(t.where(on_grid=True)["n"]) == {1000, 10_000}
        assert np.all(np.diff(t["detectable_ks_distance"]) < 0)
        row = t.where(n=10_000)
        assert row["detectable_ks_distance"][0] == detectable_ks_distance(10_000, 1e-3, 11, 0.01, 4096)

    def test_family_matches_a_harness_run(self):
        from rass_theory.plot.power import harness_family

        fam = harness_family()
        assert fam["n_tests"] >= 5 and fam["n_bins"] >= 2

    def test_mutant_power_and_figure(self):
        from rass_theory.plot.power import default_mutant

        mutant = default_mutant("orth_zeroed_on_correction")
        emp = plot.mutant_power_data(mutant, (20_000,), reps=2, seed=1)
        assert emp["rejections"][0] == 2  # this mutant is caught at n = 20,000
        assert emp["ci_low"][0] < 1 and emp["ci_high"][0] == 1
        det = plot.detectable_distance_data((1000, 20_000), n_tests=11, n_bins=4096)
        fig = plot.plot_power(det, emp)
        assert fig.axes[0].get_yscale() == "log" and len(fig.axes) == 2
        _texts_inside(fig)
        with pytest.raises(ValueError, match="mutant must be one of"):
            default_mutant("no_such_mutant")


class TestDiffusionFigure:
    def _csv(self, tmp_path, header, rows):
        path = tmp_path / "sweep.csv"
        path.write_text("\n".join([",".join(header)] + [",".join(map(str, r)) for r in rows]) + "\n")
        return path

    def test_read_csv_and_plot(self, tmp_path):
        path = self._csv(tmp_path, ["rule", "K", "L", "speedup", "se", "budget"],
                         [["D-GRS", 2, 3, 1.8, 0.02, "target"], ["RASS", 2, 3, 1.9, 0.02, "target"],
                          ["rmc", 1, 3, 1.7, 0.02, "target"], ["RASS", 2, 3, 1.7, 0.02, "drafted"]])
        t = plot.read_sweep_csv(path)
        assert t["verifier"].tolist() == ["dgrs", "rass", "rmc", "rass"]
        assert t["speedup_se"].tolist() == [0.02] * 4
        fig = plot.plot_gm_speedup(t)
        assert [a.get_title() for a in fig.axes] == ["budget: target", "budget: drafted"]
        heights = sorted(p.get_height() for p in fig.axes[0].patches)
        assert heights == [1.7, 1.8, 1.9]
        _texts_inside(fig)

    def test_sweep_gm_columns_panel_per_matching(self, tmp_path):
        from rass_theory.diffusion.sweep import CSV_FIELDS

        assert {"verifier", "base_K", "base_L", "budget", "speedup", "speedup_se", "predicted_speedup"} <= set(CSV_FIELDS)
        path = self._csv(tmp_path, ["verifier", "base_K", "base_L", "budget", "speedup", "speedup_se",
                                    "predicted_speedup"],
                         [["rmc", 2, 3, "target_nodes", 1.41, 0.01, 1.40], ["rmc", 2, 3, "drafted_nodes", 1.5, 0.01, ""],
                          ["dgrs", 2, 3, "tree", 1.47, 0.01, 1.47], ["rass", 2, 3, "tree", 1.51, 0.01, 1.51]])
        t = plot.read_sweep_csv(path)
        assert t["K"].tolist() == ["2"] * 4 and np.isnan(t["predicted_speedup"][1])
        fig = plot.plot_gm_speedup(t)
        assert [a.get_title() for a in fig.axes] == ["RMC chains matched on target nodes",
                                                     "RMC chains matched on drafted nodes"]
        assert sorted(p.get_height() for p in fig.axes[0].patches) == [1.41, 1.47, 1.51]
        assert sorted(p.get_height() for p in fig.axes[1].patches) == [1.47, 1.5, 1.51]
        diamonds = [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == "D"]
        assert sorted(float(ln.get_ydata()[0]) for ln in diamonds) == [1.40, 1.47, 1.51]
        _texts_inside(fig)

    @pytest.mark.parametrize("header, rows, match", [
        (["verifier", "K", "L"], [["rass", 2, 3]], "lacks column"),
        (["verifier", "K", "L", "speedup"], [["rass", 2, 3, "fast"]], "must be numbers"),
        (["verifier", "K", "L", "speedup"], [], "no rows"),
    ])
    def test_bad_csv(self, tmp_path, header, rows, match):
        with pytest.raises(ValueError, match=match):
            plot.read_sweep_csv(self._csv(tmp_path, header, rows))

    def test_embedded_sweep(self):
        t = plot.embedded_sweep(dim=4, n_samples=20, trees=((1, 2), (2, 2)), verifiers=("rass",), seed=0)
        assert t["verifier"].tolist() == ["rmc", "rass"]
        assert np.all(t["speedup"] >= 1.0) and np.all(t["speedup"] <= 2.0)  # at most L = 2 steps per call
