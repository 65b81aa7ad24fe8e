"""Tiny verifiers written from scratch for the harness tests (user code, not the project's classes)."""
import numpy as np
from types import SimpleNamespace


def result(states, accepted, child_index):
    return SimpleNamespace(states=states, accepted=accepted, child_index=child_index)


def resample(children, mu_draft, mu_target, sigma, rng):
    """Exact: ignore the drafts, draw the target directly (acceptance 0)."""
    n, K, d = children.shape
    return result(mu_target + sigma * rng.standard_normal((n, d)), np.zeros(n, bool), np.full(n, -1))


def make_reflection(children, mu_draft, mu_target, sigma, rng):
    """Exact RMC on child 0, written independently (acceptance 2 Phi(-delta/2))."""
    x = children[:, 0, :]
    diff = mu_target - mu_draft
    norm = np.linalg.norm(diff, axis=1)
    delta = norm / sigma
    e = np.zeros_like(diff)
    e[:, 0] = 1.0
    nz = norm > 0
    e[nz] = diff[nz] / norm[nz, None]
    s = np.einsum("nd,nd->n", x - mu_draft, e) / sigma
    log_ratio = s * delta - 0.5 * delta**2
    acc = np.log(rng.random(s.shape)) < log_ratio
    states = x.copy()
    rej = ~acc
    states[rej] = x[rej] + sigma * ((delta[rej] - s[rej]) - s[rej])[:, None] * e[rej]
    return result(states, acc, np.where(acc, 0, -1))


class Overdispersed:
    """Wrong: target draws with a slightly inflated scale along every axis."""

    def __init__(self, scale=1.05):
        self.scale = scale

    def __call__(self, children, mu_draft, mu_target, sigma, rng):
        n, K, d = children.shape
        return result(mu_target + self.scale * sigma * rng.standard_normal((n, d)), np.zeros(n, bool),
                      np.full(n, -1))


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
