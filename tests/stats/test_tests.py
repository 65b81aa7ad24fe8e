"""Hypothesis tests on counts: oracles, size (calibration) and stated power."""
import numpy as np
import pytest
from scipy import special, stats

from rass_theory.stats import tests as T
from rass_theory.stats.power import detectable_ks_distance, dkw_radius, samples_for_distance


def _pit_counts(values_u, B):
    return np.bincount(np.minimum((values_u * B).astype(int), B - 1), minlength=B)


class TestBinnedKS:
    def test_binned_statistic_is_below_continuous_and_pvalue_above(self, rng):
        x = rng.standard_normal(3000) + 0.05
        u = special.ndtr(x)
        cont = stats.kstest(x, "norm")
        binned = T.binned_ks_test(_pit_counts(u, 1024))
        assert binned.statistic <= cont.statistic + 1e-12
        assert binned.pvalue >= cont.pvalue - 1e-12
        assert cont.statistic - binned.statistic <= 1 / 1024 + 1e-12

    def test_limiting_law_is_conservative_above_exact_threshold(self):
        for n in (20_001, 50_000):
            for x in (0.8, 1.3, 1.9, 2.4):
                exact = stats.kstwo.sf(x / np.sqrt(n), n)
                assert T.kolmogorov_sf(x / np.sqrt(n), n) >= exact
                assert T.kolmogorov_sf(x / np.sqrt(n), n) <= exact * 1.02

    def test_empty(self):
        assert np.isnan(T.binned_ks_test(np.zeros(8, int)).pvalue)


class TestChiSquare:
    def test_coarse_counts_and_probabilities(self):
        c, p = T.coarse_counts(np.arange(10), 3)
        assert c.sum() == 45 and np.isclose(p.sum(), 1.0) and len(c) == 3

    def test_matches_scipy_on_equal_bins(self, rng):
        counts = rng.multinomial(5000, np.full(64, 1 / 64))
        ours = T.binned_chisquare_test(counts, 16)
        ref = stats.chisquare(counts.reshape(16, 4).sum(1))
        assert np.isclose(ours.statistic, ref.statistic) and np.isclose(ours.pvalue, ref.pvalue)

    def test_bins_reduced_for_small_samples(self):
        t = T.binned_chisquare_test(np.ones(1024, int) * 0 + np.eye(1, 1024, 3, dtype=int)[0] * 50, 1024)
        assert "4 df" in t.detail  # 50 // 10 = 5 bins

    def test_joint_detects_dependence_with_uniform_margins(self):
        J, B = 8, 64
        joint = np.full((J, J), 100)
        joint[np.arange(J), np.arange(J)] += 100  # diagonal excess: margins stay uniform
        assert T.joint_chisquare_test(joint, B).pvalue < 1e-10
        assert T.joint_chisquare_test(np.full((J, J), 100), B).pvalue > 0.99


class TestBinomial:
    def test_matches_scipy_and_clopper_pearson_matches_statsmodels(self):
        from statsmodels.stats.proportion import proportion_confint
        assert np.isclose(T.binomial_test(30, 100, 0.4).pvalue, stats.binomtest(30, 100, 0.4).pvalue)
        lo, hi = T.clopper_pearson(30, 100, 0.95)
        ref = proportion_confint(30, 100, alpha=0.05, method="beta")
        assert np.allclose((lo, hi), ref)
        assert T.clopper_pearson(0, 10, 0.9)[0] == 0.0 and T.clopper_pearson(10, 10, 0.9)[1] == 1.0


class TestEnergy:
    def test_detects_a_shift_and_not_a_null(self, rng):
        x = rng.standard_normal((300, 4))
        y = rng.standard_normal((300, 4))
        null = T.energy_test(x, y, 999, rng=1)
        assert null.pvalue > 0.01 and "Besag-Clifford" in null.detail
        alt = T.energy_test(x, y + [0.5, 0, 0, 0], 999, rng=1)
        assert alt.pvalue == 1 / 1000

    def test_statistic_matches_direct_formula(self, rng):
        x, y = rng.standard_normal((40, 3)), rng.standard_normal((50, 3)) + 0.3
        dxy = np.linalg.norm(x[:, None] - y[None], axis=2).mean()
        dxx = np.linalg.norm(x[:, None] - x[None], axis=2).mean()
        dyy = np.linalg.norm(y[:, None] - y[None], axis=2).mean()
        assert np.isclose(T.energy_test(x, y, 99, rng=0).statistic, 2 * dxy - dxx - dyy)

    def test_permutation_pvalue_is_calibrated(self):
        """Under the null P(p <= a) <= a (sequential p-values over 300 seeds)."""
        ps = []
        for seed in range(300):
            g = np.random.default_rng(seed)
            ps.append(T.energy_test(g.standard_normal((30, 2)), g.standard_normal((30, 2)), 199, rng=seed).pvalue)
        ps = np.array(ps)
        for a in (0.05, 0.2, 0.5):
            assert np.mean(ps <= a) <= a + 4.5 * np.sqrt(a * (1 - a) / ps.size)
        assert stats.kstest(ps, "uniform").pvalue > 1e-3


class TestHolm:
    def test_matches_manual_step_down(self):
        p = np.array([0.01, 0.04, 0.03, 0.5, np.nan])
        reject, adj = T.holm(p, 0.05)
        # the NaN test still counts in the family (m = 5): conservative
        assert np.allclose(adj[:4], [0.05, 0.12, 0.12, 1.0]) and np.isnan(adj[4])
        assert reject.tolist() == [True, False, False, False, False]


class TestCalibration:
    """Under the null the histogram tests' p-values are uniform (chi-square) or super-uniform (KS)."""

    def test_null_pvalues(self):
        g = np.random.default_rng(2024)
        B, n, reps = 1024, 20_000, 300
        counts = g.multinomial(n, np.full(B, 1 / B), size=reps)
        ks = np.array([T.binned_ks_test(c).pvalue for c in counts])
        chi = np.array([T.binned_chisquare_test(c, 32).pvalue for c in counts])
        fine = np.array([T.binned_chisquare_test(c, B, min_expected=5).pvalue for c in counts])
        assert stats.kstest(chi, "uniform").pvalue > 1e-3
        assert stats.kstest(fine, "uniform").pvalue > 1e-3
        # KS on binned data is conservative: P(p <= a) <= a, but not grossly so
        for a in (0.01, 0.05, 0.2, 0.5):
            assert np.mean(ks <= a) <= a + 4.5 * np.sqrt(a * (1 - a) / reps)
        assert stats.kstest(ks, "uniform", alternative="greater").pvalue > 1e-3 or ks.mean() < 0.6


class TestPower:
    def test_formula(self):
        eps = detectable_ks_distance(10**6, 1e-3, 15, 0.01, 4096)
        expected = np.sqrt(np.log(2 * 15 / 1e-3) / 2e6) + np.sqrt(np.log(200) / 2e6) + 1 / 4096
        assert np.isclose(eps, expected)
        assert dkw_radius(100, 0.05) == pytest.approx(np.sqrt(np.log(40) / 200))
        n = samples_for_distance(eps, 1e-3, 15, 0.01, 4096)
        assert abs(n - 10**6) <= 1

    def test_stated_distance_is_detected(self):
        """A location shift at the stated KS distance is rejected at Holm's first threshold >= 99% of the time."""
        n, B, alpha, m = 50_000, 4096, 1e-3, 15
        eps = detectable_ks_distance(n, alpha, m, 0.01, B)
        shift = 2 * special.ndtri((1 + eps) / 2)  # KS(N(shift,1), N(0,1)) = 2 Phi(shift/2) - 1
        edges = np.concatenate([[-np.inf], special.ndtri(np.arange(1, B) / B), [np.inf]])
        probs = np.diff(special.ndtr(edges - shift))
        g = np.random.default_rng(5)
        counts = g.multinomial(n, probs / probs.sum(), size=200)
        rejected = np.mean([T.binned_ks_test(c).pvalue <= alpha / m for c in counts])
        assert rejected >= 0.99

    def test_bad_arguments(self):
        with pytest.raises(ValueError, match="alpha"):
            detectable_ks_distance(100, 0.0, 3)
        with pytest.raises(ValueError, match="eps"):
            samples_for_distance(1e-4, 1e-3, 3, n_bins=4096)
