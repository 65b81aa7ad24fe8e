"""MNIST figures (plot.mnist), the report's ``mnist`` section on a saved summary, and the protocol's arm list."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

from rass_theory.plot import mnist as mplot  # noqa: E402

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _summary(rng):
    rows, gains, pred = [], [], []
    for mode in ("verification", "budget"):
        for eps in (0.1, 0.3):
            for v, base in (("rass", 2.6), ("dgrs", 2.5), ("optimal_list", 2.65), ("rmc", 2.4)):
                rows.append(dict(key=f"{mode}|eps={eps}|{v}|2x3", mode=mode, eps=eps, verifier=v, K=2, L=3, n=20,
                                 leaves=mode == "budget", speedup=base, speedup_se=0.02, speedup_mor=base + 0.01,
                                 speedup_mor_se=0.02, predicted=base + 0.01, z=-0.5, check_pvalue=0.4,
                                 check_passed=True, widths=[2, 2, 2]))
            gains.append(dict(mode=mode, eps=eps, K=2, L=3, rass_over_dgrs=0.04, rass_over_dgrs_se=0.01,
                              optimal_list_over_rass=0.02, optimal_list_over_rass_se=0.01))
            for K, L in ((2, 3), (4, 4)):
                pred.append(dict(mode=mode, eps=eps, K=K, L=L, rass_over_dgrs=0.03 / eps))
    rows.append(dict(key="verification|eps=0.3|control_greedy_nearest|2x3", mode="verification", eps=0.3,
                     verifier="control_greedy_nearest", K=2, L=3, n=20, leaves=False, speedup=2.9, speedup_se=0.0,
                     speedup_mor=2.9, speedup_mor_se=0.0, check_pvalue=1e-200, check_passed=False, widths=[2, 2, 2]))
    bins = np.linspace(0, 4, 41)
    hist = {str(eps): {"tree": "2x3", "bins": bins.tolist(),
                       "counts": [np.histogram(rng.gamma(2, 0.2 * (j + 1), 200), bins)[0].tolist() for j in range(3)],
                       "quantiles": [[0.1, 0.3, 0.8]] * 3} for eps in (0.1, 0.3)}
    x = np.clip(rng.standard_normal((16, 784)), -1, 1).round(3).tolist()
    return dict(meta={"command": "python bench/mnist_speedup.py --n 20"}, rows=rows, gains=gains,
                predicted_gains=pred, cross_predicted_gains=pred, delta_histograms=hist, pooled=[], quality={},
                not_run=["budget|eps=0.6|rass|4x4"],
                grid={"eps": 0.3, "speculative_key": "verification|eps=0.3|rass|2x3", "plain": x, "speculative": x})


class TestFigures:
    def test_mosaic(self, rng):
        m = mplot.mnist_mosaic(np.zeros((9, 784)), 3)
        assert m.shape == (3 * 29 - 1, 3 * 29 - 1)
        assert np.nanmax(m) == 127.5 and np.isnan(m[28, 0])
        with pytest.raises(ValueError, match=r"\(n, 784\)"):
            mplot.mnist_mosaic(np.zeros((9, 64)), 3)
        with pytest.raises(ValueError, match="needs 16 samples"):
            mplot.mnist_mosaic(np.zeros((9, 784)), 4)

    def test_all_figures(self, rng):
        s = _summary(rng)
        x = np.asarray(s["grid"]["plain"])
        assert len(mplot.plot_mnist_samples([("a", x), ("b", x)]).axes) == 2
        assert len(mplot.plot_mnist_speedups(s["rows"]).axes) == 4              # 2 modes x 2 eps
        assert len(mplot.plot_mnist_delta_histograms(s["delta_histograms"]).axes) == 2
        assert len(mplot.plot_mnist_predicted_gain(s["predicted_gains"], s["gains"]).axes) == 1

    def test_empty_inputs(self):
        with pytest.raises(ValueError, match="no arm"):
            mplot.plot_mnist_speedups([])
        with pytest.raises(ValueError, match="empty"):
            mplot.plot_mnist_delta_histograms({})
        with pytest.raises(ValueError, match="empty"):
            mplot.plot_mnist_predicted_gain([])


class TestReportSection:
    def test_section_reads_the_saved_summary(self, tmp_path, rng, monkeypatch):
        from rass_theory.report.builder import SectionContext, SectionUnavailable
        from rass_theory.report.config import ReportConfig
        from rass_theory.report.document import FigureBlock
        from rass_theory.report.mnist import section_mnist

        path = tmp_path / "summary.json"
        path.write_text(json.dumps(_summary(rng)))
        monkeypatch.setenv("RASS_MNIST_SUMMARY", str(path))
        (tmp_path / "out").mkdir()
        ctx = SectionContext(tmp_path / "out", ReportConfig.default(), "mnist")
        blocks = section_mnist(ctx)
        figs = [b for b in blocks if isinstance(b, FigureBlock)]
        assert len(figs) == 4
        assert all((tmp_path / "out" / f.image).is_file() for f in figs)
        text = " ".join(getattr(b, "text", "") for b in blocks)
        assert "max |z| = 0.50" in text and "1 of 1 arms" not in text and "p = 1e-200" in text
        monkeypatch.setenv("RASS_MNIST_SUMMARY", str(tmp_path / "missing.json"))
        with pytest.raises(SectionUnavailable, match="bench/mnist_speedup.py"):
            section_mnist(ctx)


class TestProtocolArms:
    def test_every_cell_of_the_protocol_in_cost_order(self, monkeypatch):
        monkeypatch.syspath_prepend(str(BENCH))
        import mnist_speedup as ms

        arms = ms.arm_list()
        assert len(arms) == 2 * 4 * 3 * 4 + 1 and len({a["key"] for a in arms}) == len(arms)
        cells = {(a["mode"], a["eps"], a["K"], a["L"]) for a in arms if a["verifier"] != ms.CONTROL}
        assert len(cells) == 2 * 3 * 4
        for mode, eps, K, L in cells:
            got = {a["verifier"] for a in arms if (a["mode"], a["eps"], a["K"], a["L"]) == (mode, eps, K, L)
                   and a["verifier"] != ms.CONTROL}
            assert got == {"rass", "dgrs", "optimal_list", "rmc"}
        costs = [ms.tree_cost(a["K"], a["L"], a["leaves"]) for a in arms if a["verifier"] != ms.CONTROL]
        assert costs == sorted(costs)
        chain = next(a for a in arms if a["key"] == "budget|eps=0.1|rmc|4x4")
        assert len(chain["widths"]) == 4 + 16 + 64 + 256 and chain["leaves"]          # drafted nodes, leaves on
        chain = next(a for a in arms if a["key"] == "verification|eps=0.1|rmc|4x4")
        assert len(chain["widths"]) == 1 + 4 + 16 + 64 and not chain["leaves"]        # target-evaluated nodes
        assert sys.modules["mnist_speedup"] is ms
