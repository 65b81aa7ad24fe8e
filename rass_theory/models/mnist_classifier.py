"""A small CNN digit classifier for judging MNIST samples, shipped as data.

Trained on the 4,000-digit training split (:func:`~rass_theory.models.mnist_data.load_mnist_split`)
by :func:`train_classifier` (``python bench/train_mnist.py --classifier``); the weights live in
``rass_theory/models/data/mnist_classifier.pt``.  Its 64-dimensional penultimate layer is the
feature space of the Fréchet distance in :mod:`rass_theory.models.mnist_quality` (the role the
Inception network plays in FID).
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .init import init_parameters_
from .shipped import load_weights_blob

__all__ = ["MnistClassifier", "train_classifier", "mnist_classifier", "CLASSIFIER_FILE"]

#: package-data file holding the classifier's state dict
CLASSIFIER_FILE = "mnist_classifier.pt"


class MnistClassifier(nn.Module):
    """``conv(1->16) -> pool -> conv(16->32) -> pool -> linear(1568->n_features) -> linear(->10)``.

    Inputs are normalised digits ``(n, 1, 28, 28)`` in ``[-1, 1]`` (samples are clipped to that
    range first by the quality functions).
    """

    def __init__(self, n_features: int = 64):
        super().__init__()
        self.n_features = int(n_features)
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 7 * 7, self.n_features)
        self.head = nn.Linear(self.n_features, 10)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return F.relu(self.fc(h.flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def train_classifier(x, y, *, epochs: int = 12, batch: int = 64, lr: float = 2e-3, seed: int = 0,
                     n_features: int = 64) -> MnistClassifier:
    """Train :class:`MnistClassifier` on normalised digits ``x`` ``(n, 784)`` with labels ``y``.

    Adam with cross-entropy; every draw (initialisation, shuffling, the one-pixel random shifts
    used as augmentation) comes from one ``torch.Generator(seed)``.  Returns the network in eval
    mode.
    """
    gen = torch.Generator().manual_seed(int(seed))
    data = torch.as_tensor(np.asarray(x), dtype=torch.float32).reshape(-1, 1, 28, 28)
    labels = torch.as_tensor(np.asarray(y), dtype=torch.int64)
    net = init_parameters_(MnistClassifier(n_features), gen)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    n = data.shape[0]
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, batch):
            idx = perm[i:i + batch]
            xb = data[idx]
            dy, dx = (int(v) for v in torch.randint(-1, 2, (2,), generator=gen))
            xb = torch.roll(xb, shifts=(dy, dx), dims=(2, 3))
            loss = F.cross_entropy(net(xb), labels[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return copy.deepcopy(net).eval()


def mnist_classifier(path=None) -> MnistClassifier:
    """The shipped classifier (CPU, float32, eval mode), loaded with ``weights_only=True``.

    Raises
    ------
    ValueError
        If the file's tensors do not fit the architecture.
    """
    blob = load_weights_blob(CLASSIFIER_FILE, path, made_by="bench/train_mnist.py --classifier")
    net = MnistClassifier(int(blob["config"]["n_features"]))
    try:
        net.load_state_dict(blob["state_dict"], strict=True)
    except RuntimeError as exc:
        raise ValueError(f"classifier weights do not match MnistClassifier: {exc}") from exc
    for p in net.parameters():
        p.requires_grad_(False)
    return net.eval()
