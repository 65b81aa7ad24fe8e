"""Predicted speedup from exact acceptance vs measurement."""
import numpy as np
import pytest
from scipy import stats

import rass_theory as rt
from rass_theory.diffusion import DeltaTrace, GaussianMixture, speculative_sample
from rass_theory.diffusion.theory import acceptance_curve, expected_calls, predict_speedup
from rass_theory.diffusion.traces import SOURCE_CLASSES


@pytest.fixture(scope="module")
def gm16():
    return GaussianMixture.random(dim=16, n_components=5, seed=0)


class TestAcceptanceCurve:
    def test_rmc_closed_form(self):
        d = np.array([0.0, 0.5, 2.0])
        np.testing.assert_allclose(acceptance_curve("rmc", 1)(d), 2 * stats.norm.cdf(-d / 2))

    def test_dgrs_matches_rt(self):
        assert acceptance_curve("dgrs", 3)(np.array([1.3]))[0] == pytest.approx(rt.acceptance("dgrs", 3, 1.3))

    def test_unknown_rule(self):
        with pytest.raises(ValueError, match="rule"):
            acceptance_curve("magic", 2)(np.array([1.0]))

    def test_rmc_needs_K1(self):
        with pytest.raises(ValueError, match="K = 1"):
            acceptance_curve("rmc", 2)

    def test_max_delta_is_checked_and_the_grid_capped(self):
        """NaN raised "cannot convert float NaN to integer"; max_delta = 1e6 tabulated ten million
        optimised acceptances (it never returned)."""
        with pytest.raises(ValueError, match="max_delta must be finite"):
            acceptance_curve("rass", 2, max_delta=float("nan"))
        with pytest.raises(ValueError, match="max_delta must be >= 0"):
            acceptance_curve("rass", 2, max_delta=-1.0)
        far = acceptance_curve("rass", 2, max_delta=1e6)(np.array([1.0, 40.0, 1e6]))
        assert far[0] == pytest.approx(rt.acceptance("rass", 2, 1.0), abs=1e-3)
        assert far[1] == far[2] < 1e-80


class TestBadInput:
    """A 1-d table gave "IndexError: tuple index out of range" and None an AttributeError."""

    @pytest.mark.parametrize("A, match", [(np.array([0.5]), "shape"), (np.full((5, 3, 4), 0.5), "shape"),
                                          (np.full((10, 3, 3), 0.5), "shape"), (np.full((10, 3, 4), 1.5), r"\[0, 1\]"),
                                          (np.full((10, 3, 4), np.nan), "NaN")])
    def test_expected_calls_table(self, A, match):
        with pytest.raises(ValueError, match=match):
            expected_calls(A, n_std=10, prefetch="nearest", evaluate_leaves=False)

    def test_expected_calls_options(self):
        A = np.full((10, 3, 4), 0.5)
        with pytest.raises(ValueError, match="prefetch"):
            expected_calls(A, n_std=10, prefetch="eager", evaluate_leaves=False)
        with pytest.raises(ValueError, match="draft"):
            expected_calls(A, n_std=10, prefetch="nearest", evaluate_leaves=False, draft="x")
        with pytest.raises(ValueError, match="n_std"):
            expected_calls(A, n_std=0, prefetch="nearest", evaluate_leaves=False)

    def test_predict_speedup_needs_a_trace_or_a_run(self):
        with pytest.raises(TypeError, match="trace_or_run must be a DeltaTrace"):
            predict_speedup(None)


class TestPrediction:
    @pytest.mark.parametrize("verifier,K,L", [("rmc", 1, 3), ("dgrs", 2, 3)])
    def test_prediction_within_se(self, gm16, verifier, K, L):
        run = speculative_sample(gm16, verifier, K=K, L=L, n_samples=400, rng=7)
        pred = predict_speedup(run)
        assert abs(pred.z) < 4.5, pred
        # in-situ check of the verifier: measured acceptance rate per depth vs exact mean
        for j in range(L):
            diff = pred.acceptance_by_depth_measured[j] - pred.acceptance_by_depth_predicted[j]
            assert abs(diff) < 4.5 * pred.acceptance_by_depth_se[j] + 1e-12

    def test_prediction_exact_for_degenerate_runs(self, gm16):
        """Draft model = target: every acceptance is 1, prediction equals the count exactly."""
        run = speculative_sample(gm16, "dgrs", K=2, L=3, n_samples=5, rng=0, draft=gm16.perturbed(0.0))
        pred = predict_speedup(run)
        assert pred.predicted_speedup == pytest.approx(run.speedup)
        assert pred.predicted_calls == pytest.approx(10)


class TestCellMeans:
    """``DeltaTrace.cell_means``: what the dynamic programme reads, including the empty cells it reaches."""

    @pytest.mark.parametrize("verifier,K,L,prefetch,leaves", [
        ("dgrs", 2, 3, "nearest", True), ("dgrs", 2, 3, "nearest", False), ("rass", 3, 2, "parent", True),
        ("rmc", 1, 4, "none", False), ("rass", 2, 3, "none", True)])
    def test_indicator_alpha_reproduces_the_measured_calls(self, gm16, verifier, K, L, prefetch, leaves):
        """With the run's own accept flags as ``alpha`` the programme's flow is the empirical one, so its
        expected calls are the measured mean exactly (accounting of prefetch, leaves and root calls)."""
        run = speculative_sample(gm16, verifier, K=K, L=L, n_samples=12, rng=3, prefetch=prefetch,
                                 evaluate_leaves=leaves, protocol="paper")
        tr = DeltaTrace.from_run(run)
        flags = np.asarray(run.nodes.accepted, dtype=float)
        calls = expected_calls(tr.cell_means(flags, L), n_std=tr.n_std, prefetch=tr.prefetch,
                               evaluate_leaves=tr.evaluate_leaves, draft=tr.draft)
        assert calls == pytest.approx(np.mean(run.target_calls), abs=1e-9)

    def test_empty_cell_reads_the_nearest_steps_of_its_depth_and_class(self):
        """Step 5 of (depth 0, class parent) is empty: it interpolates steps 4 and 6 (alpha 0.2, 0.4), not
        the class pooled over every step (which the many alpha = 1 nodes at steps 20..39 would dominate)."""
        steps = np.r_[4, 6, np.arange(20, 40).repeat(5)]
        alpha = np.r_[0.2, 0.4, np.ones(100)]
        par = SOURCE_CLASSES.index("parent")
        tr = DeltaTrace(step=steps, depth=np.zeros(steps.size, dtype=int), source_class=np.full(steps.size, par),
                        delta=np.zeros(steps.size), n_std=40, first_step=0, widths=(2,))
        A = tr.cell_means(alpha, 1)
        assert A[5, 0, par] == pytest.approx(0.3)
        assert A[4, 0, par] == pytest.approx(0.2) and A[6, 0, par] == pytest.approx(0.4)   # own cells unchanged
        assert A[0, 0, par] == pytest.approx(0.2) and A[12, 0, par] == pytest.approx(0.4 + 0.6 * 6 / 14)
        # a class that never occurs takes its step pooled over classes, then the depth pooled
        ex = SOURCE_CLASSES.index("exact")
        assert A[4, 0, ex] == pytest.approx(0.2) and A[5, 0, ex] == pytest.approx(np.mean(alpha))

    def test_prediction_unbiased_where_acceptance_depends_on_the_step(self):
        """Simulated rounds (nearest prefetch, leaves evaluated) whose node deltas are a fixed function of
        (step, depth, class): visited cells are then exact, so any bias comes from the empty cells the
        programme reaches.  Acceptance is high in the first half of the schedule and low in the second,
        so ``exact`` rounds (after a leaf) crowd the first half.  Criterion: the bias of the predicted
        calls (mean over 300 seeded runs of 4 trajectories, plus 4 SE) is below 0.2 of one run's SE of
        its measured mean calls, i.e. it moves a run's z-score by less than 0.2.  The former fallback
        (the class pooled over every step) is off by -0.29 +- 0.03 calls = 0.35 of that SE here; the
        nearest-step one by -0.08 +- 0.01 (linear interpolation of a convex acceptance)."""
        n_std, L = 40, 3
        EX, NE = SOURCE_CLASSES.index("exact"), SOURCE_CLASSES.index("nearest")
        base = np.where(np.arange(n_std + L) < n_std // 2, 0.3, 2.5)

        def delta(t, j, c):
            return 0.0 if (j == 0 and c == EX) else base[t + j] + 0.4 * j

        A_true = np.zeros((n_std, L, 4))
        for t in range(n_std):
            for j in range(L):
                for c in range(4):
                    A_true[t, j, c] = 2 * stats.norm.cdf(-delta(t - j, j, c) / 2) if t >= j else 1.0
        truth = expected_calls(A_true, n_std=n_std, prefetch="nearest", evaluate_leaves=True)
        rng = np.random.default_rng(20260721)
        diffs, measured = [], []
        for _ in range(300):
            rows, calls = [], []
            for _traj in range(4):
                t, c, n_calls = 0, EX, 1
                while t < n_std:
                    ell, n_calls = min(L, n_std - t), n_calls + 1
                    for j in range(ell):
                        d = delta(t, j, c)
                        rows.append((t + j, j, c, d))
                        if rng.random() >= 2 * stats.norm.cdf(-d / 2):       # correction: commits j + 1
                            t, c = t + j + 1, NE
                            break
                    else:                                                    # leaf reached and evaluated
                        t, c = t + ell, EX
                calls.append(n_calls)
            st, dp, cl, de = (np.array(v) for v in zip(*rows))
            tr = DeltaTrace(step=st, depth=dp, source_class=cl, delta=de, n_std=n_std, first_step=0, widths=(1,) * L,
                            prefetch="nearest", evaluate_leaves=True)
            alpha = 2 * stats.norm.cdf(-de / 2)
            diffs.append(expected_calls(tr.cell_means(alpha, L), n_std=n_std, prefetch="nearest",
                                        evaluate_leaves=True) - truth)
            measured.append(np.mean(calls))
        diffs, measured = np.array(diffs), np.array(measured)
        assert abs(measured.mean() - truth) < 4 * measured.std(ddof=1) / np.sqrt(measured.size)   # the simulation
        bias_bound = abs(diffs.mean()) + 4 * diffs.std(ddof=1) / np.sqrt(diffs.size)
        assert bias_bound < 0.2 * measured.std(ddof=1), (diffs.mean(), measured.std(ddof=1))
