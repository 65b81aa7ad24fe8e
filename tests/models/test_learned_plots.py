"""plot.learned: arms, the speedup table (predicted vs measured), sample grids, delta histograms."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from rass_theory.diffusion.torch_sampler import _SnappedThreshold, speculative_sample_torch  # noqa: E402
from rass_theory.models import digits_flow  # noqa: E402
from rass_theory.plot import learned  # noqa: E402


def test_arms_include_budget_matched_rmc_chains():
    arms = learned.digits_arms(trees=((2, 3), (4, 3)), verifiers=("rass",))
    assert ("rass", 4, 3, "tree") in arms and ("rmc", 1, 3, "tree") in arms
    assert ("rmc", 1, 7, "target_nodes") in arms and ("rmc", 1, 21, "target_nodes") in arms


def test_appended_verifiers_follow_the_chains_and_subsets_keep_seeds():
    arms = learned.digits_arms(trees=((2, 2),), verifiers=("dgrs",), appended_verifiers=("optimal_list",))
    assert arms[:2] == [("dgrs", 2, 2, "tree"), ("rmc", 1, 2, "tree")] and arms[-1] == ("optimal_list", 2, 2, "tree")
    kw = dict(trees=((2, 2),), verifiers=("dgrs",), appended_verifiers=("optimal_list",), n_samples=40)
    full = learned.digits_speedup_data(**kw)
    sub = learned.digits_speedup_data(only_verifiers=("optimal_list",), **kw)
    assert sub["verifier"].tolist() == ["optimal_list"]
    assert sub["speedup"][0] == full["speedup"][full["verifier"] == "optimal_list"][0]
    with pytest.raises(ValueError, match="only_verifiers"):
        learned.digits_speedup_data(only_verifiers=("rass",), **kw)


def test_speedup_table_and_figures():
    table, runs = learned.digits_speedup_data(trees=((2, 2),), verifiers=("dgrs",), n_samples=60, keep_runs=True)
    assert set(table["verifier"].tolist()) == {"dgrs", "rmc"}
    assert np.all(np.isfinite(table["predicted_speedup"])) and np.all(table["speedup"] > 1)
    assert np.all(np.abs(table["z"]) < 5)
    run = runs[("dgrs", 2, 2)]
    fig = learned.plot_delta_histograms(run)
    assert len(fig.axes) == 1
    fig = learned.plot_sample_grids([("a", run.samples), ("b", run.samples)], n_side=4)
    assert len(fig.axes) == 2


def test_snapped_threshold_acceptance_table_matches_exact():
    policy = _SnappedThreshold()
    deltas = np.array([0.3, 0.4, 1.6, 1.7])          # two grid cells: two policy optimisations
    table = policy.acceptance_array(2, deltas)
    exact = [policy.expected_acceptance(2, d) for d in deltas]
    np.testing.assert_allclose(table, exact, atol=2e-3)


@pytest.mark.slow
def test_snapped_threshold_prediction_close_to_measured():
    run = speculative_sample_torch(digits_flow(), "threshold", K=2, L=2, n_samples=200, rng=3)
    pred = learned.snapped_threshold_prediction(run, _SnappedThreshold())
    assert abs(run.speedup - pred) / run.speedup_se < 4.5
