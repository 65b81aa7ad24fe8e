"""Two-sample tests: oracles, calibration (false-fail rate) and power."""
import numpy as np
import pytest
from scipy import stats

from rass_theory.diffusion import GaussianMixture
from rass_theory.diffusion.exactness import (compare_to_plain, energy_distance_test, occupancy_test,
                                             radial_test)


class TestValidation:
    def test_dims(self):
        with pytest.raises(ValueError, match="same dim"):
            energy_distance_test(np.zeros((5, 2)), np.zeros((5, 3)))
        with pytest.raises(ValueError, match="2-d"):
            energy_distance_test(np.zeros(5), np.zeros(5))
        with pytest.raises(ValueError, match="finite"):
            energy_distance_test(np.full((5, 2), np.nan), np.zeros((5, 2)))
        with pytest.raises(ValueError, match="means"):
            occupancy_test(np.zeros((5, 2)), np.zeros((5, 2)), np.zeros((3, 4)))
        with pytest.raises(ValueError, match="alpha"):
            occupancy_test(np.zeros((5, 2)), np.zeros((5, 2)), np.zeros((3, 2)), alpha=1.5)


class TestEnergy:
    def test_statistic_matches_scipy_1d(self, rng):
        x, y = rng.standard_normal((40, 1)), rng.standard_normal((30, 1)) + 0.3
        res = energy_distance_test(x, y, n_permutations=9, rng=rng)
        e_n = stats.energy_distance(x[:, 0], y[:, 0]) ** 2          # scipy returns sqrt(2E|X-Y|-...)
        assert res.statistic == pytest.approx(40 * 30 / 70 * e_n, rel=1e-10)

    def test_calibration(self, rng):
        """Under the null the permutation p-value is (super-)uniform: P(p <= 0.1) <= 0.1."""
        n_rep = 100
        pv = np.array([energy_distance_test(rng.standard_normal((20, 3)), rng.standard_normal((20, 3)),
                                            n_permutations=19, rng=rng, detectable=False).pvalue
                       for _ in range(n_rep)])
        # with 19 permutations P(p <= 0.1) = 2/20 exactly under the null; binomial 4.5-sd band
        assert abs(np.sum(pv <= 0.1) - 0.1 * n_rep) < 4.5 * np.sqrt(n_rep * 0.09)

    @pytest.mark.slow
    def test_power_at_detectable_shift(self, rng):
        """A mean shift of the stated detectable size is caught most of the time (~80%)."""
        n, d = 60, 4
        base = energy_distance_test(rng.standard_normal((n, d)), rng.standard_normal((n, d)),
                                    n_permutations=99, alpha=0.05, rng=rng)
        shift = base.detectable_mean_shift
        hits = 0
        n_rep = 60
        for _ in range(n_rep):
            y = rng.standard_normal((n, d))
            y[:, 0] += shift
            hits += energy_distance_test(rng.standard_normal((n, d)), y, n_permutations=99, rng=rng).pvalue <= 0.05
        # stated power 0.8 (estimated from 20 splits, +-0.09) vs 60 fresh replicates (se 0.05)
        assert abs(hits / n_rep - 0.8) < 4.5 * np.hypot(0.05, 0.09)


class TestOccupancy:
    def test_power_at_detectable_shift_by_simulation(self, rng):
        """Multinomial simulation at the reported detectable shift: power is 0.80 within MC error."""
        means = np.eye(4) * 10
        n = 500
        cells = rng.integers(0, 4, 2 * n)
        x, y = means[cells[:n]], means[cells[n:]]
        res = occupancy_test(x, y, means, alpha=0.05)
        counts = res.counts.sum(axis=0)
        p = counts / counts.sum()
        delta = res.detectable_shift
        worst = None
        for c in range(4):                      # the reported shift covers every component
            q = p - delta * np.where(np.arange(4) == c, 0, p) / (1 - p[c])
            q[c] = p[c] + delta
            n_sim = 2000
            t = np.stack([rng.multinomial(n, q, size=n_sim), rng.multinomial(n, p, size=n_sim)], axis=1)
            expected = t.sum(axis=2, keepdims=True) * t.sum(axis=1, keepdims=True) / (2 * n)
            chi2 = np.sum((t - expected) ** 2 / np.where(expected > 0, expected, 1), axis=(1, 2))
            power = np.mean(chi2 > stats.chi2.ppf(0.95, 3))
            worst = power if worst is None else min(worst, power)
        assert worst > 0.8 - 4.5 * np.sqrt(0.16 / n_sim)

    def test_detects_imbalance(self, rng):
        means = np.eye(3) * 10
        x = means[rng.choice(3, 400, p=[0.5, 0.25, 0.25])]
        y = means[rng.choice(3, 400)]
        assert occupancy_test(x, y, means).pvalue < 1e-3


class TestRadialAndCombined:
    def test_radial_sees_scale(self, rng):
        gm = GaussianMixture.random(dim=16, n_components=3, seed=0)
        x = gm.sample(500, rng)
        y = gm.means[rng.integers(0, 3, 500)] + 0.9 * gm.sds.mean() * rng.standard_normal((500, 16))
        assert radial_test(x, y, gm.means).pvalue < 1e-3

    def test_combined_passes_same_law(self, rng):
        gm = GaussianMixture.random(dim=16, n_components=3, seed=0)
        comp = compare_to_plain(gm.sample(300, rng), gm.sample(300, rng), gm.means, alpha=1e-3,
                                n_permutations=99, rng=rng)
        assert comp.passed and len(comp.tests) == 3
        assert 0 < comp.energy.detectable_mean_shift < np.inf
        assert 0 < comp.occupancy.detectable_shift < 1
        assert 0 < comp.radial.detectable_ks < 1
