"""Tiny verifiers written from scratch for the harness tests (user code, not the project's classes).

Each accepts ``sigma`` as a scalar or an ``(n,)`` array, as the verifier contract allows.
"""
import numpy as np
from types import SimpleNamespace


def result(states, accepted, child_index):
    return SimpleNamespace(states=states, accepted=accepted, child_index=child_index)


def _sigma(sigma, n):
    return np.broadcast_to(np.asarray(sigma, dtype=np.float64), (n,))


def resample(children, mu_draft, mu_target, sigma, rng):
    """Exact: ignore the drafts, draw the target directly (acceptance 0)."""
    n, K, d = children.shape
    states = mu_target + _sigma(sigma, n)[:, None] * rng.standard_normal((n, d))
    return result(states.astype(children.dtype), np.zeros(n, bool), np.full(n, -1))


def make_reflection(children, mu_draft, mu_target, sigma, rng):
    """Exact RMC on child 0, written independently (acceptance 2 Phi(-delta/2))."""
    x = children[:, 0, :].astype(np.float64)
    mu_draft = np.asarray(mu_draft, dtype=np.float64)
    diff = np.asarray(mu_target, dtype=np.float64) - mu_draft
    sig = _sigma(sigma, x.shape[0])
    norm = np.linalg.norm(diff, axis=1)
    delta = norm / sig
    e = np.zeros_like(diff)
    e[:, 0] = 1.0
    nz = norm > 0
    e[nz] = diff[nz] / norm[nz, None]
    s = np.einsum("nd,nd->n", x - mu_draft, e) / sig
    log_ratio = s * delta - 0.5 * delta**2
    acc = np.log(rng.random(s.shape)) < log_ratio
    states = children[:, 0, :].copy()
    rej = ~acc
    states[rej] = (x[rej] + (sig[rej] * ((delta[rej] - s[rej]) - s[rej]))[:, None] * e[rej]).astype(states.dtype)
    return result(states, acc, np.where(acc, 0, -1))


def reflection_acceptance(K, delta):
    from scipy.stats import norm
    return float(2 * norm.cdf(-delta / 2))


class Overdispersed:
    """Wrong: target draws with a slightly inflated scale along every axis."""

    def __init__(self, scale=1.05):
        self.scale = scale

    def __call__(self, children, mu_draft, mu_target, sigma, rng):
        n, K, d = children.shape
        states = mu_target + self.scale * _sigma(sigma, n)[:, None] * rng.standard_normal((n, d))
        return result(states, np.zeros(n, bool), np.full(n, -1))


class Named:
    """Wrap a verifier under a fixed name; optionally raise at a given call (interrupt tests)."""

    def __init__(self, inner, name="stub", interrupt_at=None, exc=KeyboardInterrupt):
        self.inner, self.name, self.interrupt_at, self.exc, self.calls = inner, name, interrupt_at, exc, 0

    def __call__(self, *args):
        if self.interrupt_at is not None and self.calls == self.interrupt_at:
            self.calls += 1
            raise self.exc()
        self.calls += 1
        return self.inner(*args)
