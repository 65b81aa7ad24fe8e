"""Quality of digit samples against scikit-learn's held-out 8x8 digits (the split the model never saw)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["DigitsQuality", "digits_quality"]


@dataclass(frozen=True)
class DigitsQuality:
    """Quality numbers of generated digits, each with its value on held-out real digits.

    Attributes
    ----------
    confidence, confidence_real : float
        Mean top-class probability of a logistic-regression digit classifier (trained on the
        training split; its held-out accuracy is ``classifier_accuracy``) on the samples and on
        the held-out digits.
    class_entropy, class_entropy_real : float
        Entropy (nats) of the predicted-class histogram; ``log 10 = 2.303`` is perfectly balanced.
    nn_distance, nn_distance_real : float
        Mean Euclidean distance (normalised pixel units) to the nearest training digit: near the
        held-out value means neither blurry nor memorised.
    c2st_accuracy, c2st_accuracy_real : float
        Held-out accuracy of a classifier telling samples (resp. training digits) from held-out
        digits (0.5 = indistinguishable).
    classifier_accuracy : float
    n : int
    """

    confidence: float
    confidence_real: float
    class_entropy: float
    class_entropy_real: float
    nn_distance: float
    nn_distance_real: float
    c2st_accuracy: float
    c2st_accuracy_real: float
    classifier_accuracy: float
    n: int


@functools.lru_cache(maxsize=1)
def _reference():
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import NearestNeighbors

    from .digits import load_digits_split

    x_tr, y_tr, x_te, y_te = load_digits_split()
    clf = LogisticRegression(max_iter=5000, C=0.5).fit(x_tr, y_tr)
    nn = NearestNeighbors(n_neighbors=1).fit(x_tr)
    return clf, nn, x_tr, x_te, float(clf.score(x_te, y_te))


def _entropy(labels):
    p = np.bincount(labels, minlength=10) / labels.size
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def digits_quality(samples, rng=0) -> DigitsQuality:
    """Quality of normalised 8x8 digit samples ``(n, 64)`` (values ``pixels / 8 - 1``).

    Samples are first put on the data's grid (pixels clipped to ``[0, 16]`` and rounded to
    integers), as real digits are.
    """
    from ..stats.two_sample import classifier_two_sample_test

    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 64:
        raise ValueError(f"samples must have shape (n, 64), got {x.shape}")
    clf, nn, x_tr, x_te, acc = _reference()
    # the data are integer pixels 0..16: compare on that grid (clip, round), or a linear classifier
    # separates continuous samples from real digits by the exact -1 background alone
    x = np.round((np.clip(x, -1.0, 1.0) + 1.0) * 8.0) / 8.0 - 1.0
    p_gen, p_real = clf.predict_proba(x), clf.predict_proba(x_te)
    c2st = classifier_two_sample_test(x, x_te, rng=rng)
    return DigitsQuality(
        confidence=float(p_gen.max(1).mean()), confidence_real=float(p_real.max(1).mean()),
        class_entropy=_entropy(p_gen.argmax(1)), class_entropy_real=_entropy(p_real.argmax(1)),
        nn_distance=float(nn.kneighbors(x)[0].mean()), nn_distance_real=float(nn.kneighbors(x_te)[0].mean()),
        c2st_accuracy=c2st.statistic,
        c2st_accuracy_real=classifier_two_sample_test(x_tr, x_te, rng=rng).statistic,
        classifier_accuracy=acc, n=int(x.shape[0]))
