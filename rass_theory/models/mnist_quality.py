"""Quality of MNIST samples against the 1,000 held-out digits (the split the models never saw).

:func:`mnist_quality` reports, for generated digits ``(n, 784)`` in the normalised space
``pixels / 127.5 - 1``: the shipped classifier's held-out accuracy, the class confidence and class
entropy of the samples, a Fréchet distance in the classifier's 64-d feature space (generated
against held-out, with training digits against held-out at the same ``n`` as the reference), and
a classifier two-sample test (C2ST, :func:`rass_theory.stats.two_sample.classifier_two_sample_test`)
of generated against held-out digits.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from .._validation import as_generator

__all__ = ["MnistQuality", "mnist_quality", "frechet_distance", "class_entropy", "classifier_outputs"]


@dataclass(frozen=True)
class MnistQuality:
    """Quality numbers of generated MNIST digits, each beside its value on real digits.

    Attributes
    ----------
    classifier_accuracy : float
        Held-out accuracy of the shipped CNN classifier (trained on the training split).
    confidence, confidence_real : float
        Mean top-class probability on the samples and on the held-out digits.
    class_entropy, class_entropy_real : float
        Entropy (nats) of the predicted-class histogram; ``log 10 = 2.303`` is perfectly balanced.
    frechet, frechet_real : float
        Fréchet distance in the classifier's feature space: samples against held-out digits, and
        ``n`` training digits against held-out digits (same ``n``, so the same small-sample bias).
    c2st_accuracy, c2st_pvalue, c2st_accuracy_real : float
        Held-out accuracy (0.5 = indistinguishable) and exact binomial p-value of a C2ST of the
        samples against held-out digits; ``c2st_accuracy_real``: training against held-out.
    n : int
    """

    classifier_accuracy: float
    confidence: float
    confidence_real: float
    class_entropy: float
    class_entropy_real: float
    frechet: float
    frechet_real: float
    c2st_accuracy: float
    c2st_pvalue: float
    c2st_accuracy_real: float
    n: int


def frechet_distance(features_a, features_b) -> float:
    """Fréchet distance between Gaussians fitted to two feature samples ``(n, p)``, ``(m, p)``.

    Notes
    -----
    ``FD = ||m_a - m_b||^2 + tr(S_a + S_b - 2 (S_a S_b)^{1/2})`` with sample means ``m`` and
    (unbiased) covariances ``S``: the 2-Wasserstein distance squared between the fitted
    Gaussians (Dowson & Landau 1982), as in FID.  ``tr (S_a S_b)^{1/2}`` is computed as the sum
    of the square roots of the eigenvalues of the symmetric ``S_a^{1/2} S_b S_a^{1/2}`` (same
    spectrum), which stays accurate when a covariance is singular (dead features).
    """
    a = np.asarray(features_a, dtype=np.float64)
    b = np.asarray(features_b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"features_a and features_b must be 2-d with the same number of columns, got "
                         f"{a.shape} and {b.shape}")
    if a.shape[0] < 2 or b.shape[0] < 2:
        raise ValueError(f"features_a and features_b need at least 2 rows each, got {a.shape[0]} and {b.shape[0]}")
    ma, mb = a.mean(0), b.mean(0)
    sa, sb = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    lam, vec = linalg.eigh(sa)
    half = (vec * np.sqrt(np.clip(lam, 0.0, None))) @ vec.T
    cross = np.sqrt(np.clip(linalg.eigvalsh(half @ sb @ half), 0.0, None)).sum()
    return float(max(0.0, ((ma - mb) ** 2).sum() + np.trace(sa) + np.trace(sb) - 2.0 * cross))


def class_entropy(labels, n_classes: int = 10) -> float:
    """Entropy (nats) of the histogram of integer ``labels`` over ``n_classes`` classes."""
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.size == 0 or not np.issubdtype(lab.dtype, np.integer):
        raise ValueError(f"labels must be a non-empty 1-d integer array, got shape {lab.shape}, dtype {lab.dtype}")
    if lab.min() < 0 or lab.max() >= n_classes:
        raise ValueError(f"labels must lie in [0, {n_classes}), got range [{lab.min()}, {lab.max()}]")
    p = np.bincount(lab, minlength=n_classes) / lab.size
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def classifier_outputs(x, net=None, batch: int = 500):
    """``(probabilities (n, 10), features (n, 64))`` of the classifier on digits ``(n, 784)`` (clipped to [-1, 1])."""
    import torch

    net = _classifier() if net is None else net
    x = np.clip(np.asarray(x, dtype=np.float32), -1.0, 1.0)
    probs, feats = [], []
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            xb = torch.as_tensor(x[i:i + batch]).reshape(-1, 1, 28, 28)
            f = net.features(xb)
            probs.append(torch.softmax(net.head(f), dim=1).numpy())
            feats.append(f.numpy())
    return np.concatenate(probs).astype(np.float64), np.concatenate(feats).astype(np.float64)


@functools.lru_cache(maxsize=1)
def _classifier():
    from .mnist_classifier import mnist_classifier

    return mnist_classifier()


@functools.lru_cache(maxsize=1)
def _reference():
    from .mnist_data import load_mnist_split

    x_tr, y_tr, x_te, y_te = load_mnist_split()
    p_te, f_te = classifier_outputs(x_te)
    _, f_tr = classifier_outputs(x_tr)
    acc = float((p_te.argmax(1) == y_te).mean())
    return x_tr, x_te, p_te, f_te, f_tr, acc


def mnist_quality(samples, rng=0) -> MnistQuality:
    """Quality of normalised MNIST samples ``(n, 784)``, ``n >= 10`` (see :class:`MnistQuality`).

    Samples are clipped to ``[-1, 1]`` and rounded to the data's 256-level pixel grid before
    every comparison (real digits are integer pixels; otherwise the C2ST separates the two by
    the exact background value alone).
    """
    from ..stats.two_sample import classifier_two_sample_test
    from .mnist_data import from_pixels, to_pixels

    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 784:
        raise ValueError(f"samples must have shape (n, 784), got {x.shape}")
    if x.shape[0] < 10:
        raise ValueError(f"samples need at least 10 rows, got {x.shape[0]}")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples must be finite")
    gen = as_generator(rng)
    x = from_pixels(np.round(to_pixels(x)))
    x_tr, x_te, p_te, f_te, f_tr, acc = _reference()
    p_gen, f_gen = classifier_outputs(x)
    n = x.shape[0]
    ref_rows = gen.choice(f_tr.shape[0], size=min(n, f_tr.shape[0]), replace=False)
    c2st = classifier_two_sample_test(x, x_te, rng=gen)
    c2st_real = classifier_two_sample_test(x_tr[ref_rows], x_te, rng=gen)
    return MnistQuality(
        classifier_accuracy=acc,
        confidence=float(p_gen.max(1).mean()), confidence_real=float(p_te.max(1).mean()),
        class_entropy=class_entropy(p_gen.argmax(1)), class_entropy_real=class_entropy(p_te.argmax(1)),
        frechet=frechet_distance(f_gen, f_te), frechet_real=frechet_distance(f_tr[ref_rows], f_te),
        c2st_accuracy=c2st.statistic, c2st_pvalue=c2st.pvalue, c2st_accuracy_real=c2st_real.statistic, n=n)
