"""Rank-1 frame of a node batch (rass_theory/frame.py; proof proofs/P1-rank1-reduction.md)."""
import warnings

import numpy as np
import pytest
from scipy import stats

from rass_theory.frame import Rank1Frame, degenerate_tolerance, validate_node_inputs


def _means(rng, n, d, scale=1.0):
    mu_draft = rng.normal(size=(n, d))
    mu_target = mu_draft + scale * rng.normal(size=(n, d))
    return mu_draft, mu_target


class TestValidation:
    def test_nan_and_shapes_name_the_argument(self):
        md = np.zeros((2, 3))
        with pytest.raises(ValueError, match="mu_draft must be finite"):
            Rank1Frame.from_means(np.full((2, 3), np.nan), md, 1.0)
        with pytest.raises(ValueError, match="mu_target must be finite"):
            Rank1Frame.from_means(md, np.array([[0, 0, np.inf], [0, 0, 0]]), 1.0)
        with pytest.raises(ValueError, match="mu_target must have the shape of mu_draft"):
            Rank1Frame.from_means(md, np.zeros((2, 4)), 1.0)
        with pytest.raises(ValueError, match=r"mu_draft must have shape \(n, d\)"):
            Rank1Frame.from_means(np.zeros(3), np.zeros(3), 1.0)
        with pytest.raises(TypeError, match="mu_draft must hold real numbers"):
            Rank1Frame.from_means(np.array([["a"]]), np.zeros((1, 1)), 1.0)

    @pytest.mark.parametrize("sigma", [0.0, -1.0, np.nan, np.inf, np.ones(3), np.ones((2, 1))])
    def test_bad_sigma(self, sigma):
        with pytest.raises(ValueError, match="sigma"):
            Rank1Frame.from_means(np.zeros((2, 3)), np.ones((2, 3)), sigma)

    def test_project_and_reconstruct_shapes(self, rng):
        frame = Rank1Frame.from_means(*_means(rng, 4, 3), 1.0)
        with pytest.raises(ValueError, match="x must have shape"):
            frame.project(np.zeros((4, 5)))
        with pytest.raises(ValueError, match="x must have shape"):
            frame.project(np.zeros((3, 2, 3)))
        with pytest.raises(ValueError, match="s and z_perp must have shapes"):
            frame.reconstruct(np.zeros(4), np.zeros((4, 2)))

    def test_validate_node_inputs_names_arguments(self):
        children = np.zeros((2, 3, 4))
        md = np.zeros((2, 4))
        with pytest.raises(ValueError, match="children must have 3 dimensions"):
            validate_node_inputs(np.zeros((2, 4)), md, md, 1.0)
        with pytest.raises(ValueError, match="children must be finite"):
            validate_node_inputs(np.full((2, 3, 4), np.nan), md, md, 1.0)
        with pytest.raises(ValueError, match="mu_target must have shape"):
            validate_node_inputs(children, md, np.zeros((3, 4)), 1.0)
        with pytest.raises(ValueError, match="sigma must be a scalar or have shape"):
            validate_node_inputs(children, md, md, np.ones(5))

    @pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
    @pytest.mark.parametrize("coord", [0, 2])
    def test_non_finite_child_is_found_through_the_projection(self, bad, coord):
        """The verifiers check children's finiteness on their projection ``s``: a NaN or an
        infinity, also in a coordinate orthogonal to ``e`` (``0 * inf = NaN``), still raises."""
        from rass_theory.verifiers._core import prepare

        children = np.ones((4, 3, 5))
        children[2, 1, coord] = bad
        md, mt = np.zeros((4, 5)), np.zeros((4, 5))
        mt[:, 0] = 1.0                                       # e = e_1: coordinate 2 is orthogonal
        with pytest.raises(ValueError, match="children must be finite"):
            prepare(children, md, mt, 1.0, np.random.default_rng(0))
        big = np.full((4, 3, 5), 1e308)                      # finite, but s's sum overflows
        assert np.all(np.isfinite(prepare(big, md, mt, 1.0, np.random.default_rng(0)).s))


class TestRoundTrip:
    def test_matrix_and_children(self, rng):
        n, K, d = 50, 3, 7
        md, mt = _means(rng, n, d)
        sigma = rng.uniform(0.1, 2.0, size=n)
        frame = Rank1Frame.from_means(md, mt, sigma)
        np.testing.assert_allclose(np.linalg.norm(frame.direction, axis=1), 1.0, rtol=1e-15)
        np.testing.assert_allclose(frame.delta, np.linalg.norm(mt - md, axis=1) / sigma, rtol=1e-14)
        x = md + sigma[:, None] * rng.normal(size=(n, d))
        s, zp = frame.project(x)
        assert s.shape == (n,) and zp.shape == (n, d)
        np.testing.assert_allclose(np.einsum("nd,nd->n", zp, frame.direction), 0.0, atol=1e-13)
        np.testing.assert_allclose(frame.reconstruct(s, zp), x, rtol=1e-13, atol=1e-13)
        xc = md[:, None, :] + sigma[:, None, None] * rng.normal(size=(n, K, d))
        sc, zpc = frame.project(xc)
        assert sc.shape == (n, K) and zpc.shape == (n, K, d)
        np.testing.assert_allclose(frame.reconstruct(sc, zpc), xc, rtol=1e-13, atol=1e-13)
        # the child-wise projection agrees with projecting each child as a matrix
        s1, _ = frame.project(xc[:, 1, :])
        np.testing.assert_allclose(sc[:, 1], s1, rtol=1e-14, atol=1e-14)

    def test_target_and_draft_laws(self, rng):
        """Under the target s ~ N(delta, 1); under the draft s ~ N(0, 1); ||z_perp||^2 ~ chi2(d-1)."""
        n, d = 20_000, 5
        md, mt = _means(rng, n, d, scale=0.7)
        sigma = rng.uniform(0.2, 3.0, size=n)
        frame = Rank1Frame.from_means(md, mt, sigma)
        x_target = mt + sigma[:, None] * rng.normal(size=(n, d))
        s, zp = frame.project(x_target)
        assert stats.kstest(s - frame.delta, "norm").pvalue > 1e-3
        assert stats.kstest(np.sum(zp**2, axis=1), stats.chi2(d - 1).cdf).pvalue > 1e-3
        x_draft = md + sigma[:, None] * rng.normal(size=(n, d))
        s0, zp0 = frame.project(x_draft)
        assert stats.kstest(s0, "norm").pvalue > 1e-3
        assert stats.kstest(np.sum(zp0**2, axis=1), stats.chi2(d - 1).cdf).pvalue > 1e-3


class TestDegenerate:
    def test_zero_and_tiny_displacement(self):
        md = np.zeros((3, 4))
        mt = md.copy()
        mt[1, 2] = 1e-300
        mt[2, 3] = -1e-300
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            frame = Rank1Frame.from_means(md, mt, 1.0)
            s, zp = frame.project(np.ones((3, 4)))
        np.testing.assert_allclose(np.linalg.norm(frame.direction, axis=1), 1.0, rtol=1e-15)
        np.testing.assert_array_equal(frame.direction[0], [1, 0, 0, 0])
        np.testing.assert_array_equal(frame.direction[1], [0, 0, 1, 0])
        np.testing.assert_array_equal(frame.direction[2], [0, 0, 0, -1])
        np.testing.assert_array_equal(frame.delta, [0.0, 1e-300, 1e-300])
        assert frame.degenerate.all()
        assert np.all(np.isfinite(s)) and np.all(np.isfinite(zp))

    def test_huge_displacement(self):
        md = np.zeros((1, 3))
        mt = np.array([[1e300, 1e300, 0.0]])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            frame = Rank1Frame.from_means(md, mt, 1e10)
        np.testing.assert_allclose(frame.direction, [[2**-0.5, 2**-0.5, 0.0]], rtol=1e-15)
        assert frame.delta[0] == pytest.approx(np.sqrt(2) * 1e290, rel=1e-14)

    def test_tolerance_is_float64_for_every_dtype(self):
        """The frame is float64 for float32 inputs too: one degenerate band, sqrt(eps_64) (issue 14)."""
        assert degenerate_tolerance(np.float64) == pytest.approx(np.sqrt(np.finfo(np.float64).eps))
        assert degenerate_tolerance(np.float32) == degenerate_tolerance(np.float64)
        md = np.zeros((3, 3), dtype=np.float32)
        mt = md.copy()
        mt[0, 0] = 1e-4  # below sqrt(eps_32) ~ 3.5e-4, above sqrt(eps_64): not degenerate any more
        mt[1, 0] = 1e-2
        mt[2, 0] = 1e-9  # below sqrt(eps_64) ~ 1.5e-8: degenerate in every dtype
        frame = Rank1Frame.from_means(md, mt, np.float32(1.0))
        assert frame.direction.dtype == np.float64 and frame.delta.dtype == np.float64
        assert frame.delta[0] == np.float64(np.float32(1e-4))
        assert frame.degenerate.tolist() == [False, False, True]
        frame64 = Rank1Frame.from_means(md.astype(np.float64), mt.astype(np.float64), 1.0)
        assert frame64.degenerate.tolist() == [False, False, True]
