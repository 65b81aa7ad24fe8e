"""Fixtures for the verifier tests: synthetic node batches and law checks in rank-1 coordinates."""
import numpy as np
import pytest
from scipy import stats


class NodeFactory:
    """Build node batches ``(children, mu_draft, mu_target, sigma)`` with known rank-1 frame."""

    @staticmethod
    def build(n, K, d, delta, rng, sigma=1.0, dtype=np.float64, same_mean=True):
        delta = np.broadcast_to(np.asarray(delta, dtype=np.float64), (n,))
        sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (n,))
        if same_mean:
            mu_draft = np.broadcast_to(rng.standard_normal(d), (n, d)).copy()
            e = rng.standard_normal(d)
            e = np.broadcast_to(e / np.linalg.norm(e), (n, d)).copy()
        else:
            mu_draft = rng.standard_normal((n, d))
            e = rng.standard_normal((n, d))
            e /= np.linalg.norm(e, axis=1, keepdims=True)
        mu_target = mu_draft + (sig * delta)[:, None] * e
        children = mu_draft[:, None, :] + sig[:, None, None] * rng.standard_normal((n, K, d))
        return children.astype(dtype), mu_draft.astype(dtype), mu_target.astype(dtype), sigma, e

    @staticmethod
    def coordinates(states, mu_draft, sigma, e):
        """Return ``s`` and ``||z_perp||^2`` of states."""
        sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (states.shape[0],))
        z = (np.asarray(states, dtype=np.float64) - mu_draft) / sig[:, None]
        s = np.einsum("nd,nd->n", z, e)
        zp = z - s[:, None] * e
        return s, np.einsum("nd,nd->n", zp, zp)

    @staticmethod
    def assert_target_law(states, mu_draft, sigma, e, delta, alpha=1e-4):
        """KS tests: ``s - delta ~ N(0, 1)`` and ``||z_perp||^2 ~ chi2(d - 1)`` (one delta)."""
        s, r = NodeFactory.coordinates(states, mu_draft, sigma, e)
        d = states.shape[1]
        p_s = stats.kstest(s - delta, "norm").pvalue
        p_r = stats.kstest(r, "chi2", args=(d - 1,)).pvalue if d > 1 else 1.0
        assert p_s > alpha, f"s is not N(delta, 1): KS p = {p_s:.3g}"
        assert p_r > alpha, f"||z_perp||^2 is not chi2(d-1): KS p = {p_r:.3g}"
        return p_s, p_r


@pytest.fixture
def nodes():
    return NodeFactory
