"""Torch verifiers at far displacements (``delta`` up to 1e12), both CPU engines (see tests/test_far_delta.py)."""
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from rass_theory.torch import verifiers as tv

pytestmark = pytest.mark.usefixtures("each_cpu_engine")


@pytest.mark.parametrize("rule", ["rass", "optimal_list", "threshold", "dgrs"])
def test_far_rows_rejected_and_drawn_from_the_target(rule):
    rng = np.random.default_rng(4)
    n, K, d = 3000, 4, 3
    mu_d = np.zeros((n, d))
    mu_t = np.zeros((n, d))
    mu_t[:, 0] = 10.0 ** rng.uniform(-1, 12, n)
    children = rng.standard_normal((n, K, d))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = getattr(tv, rule)()(*(torch.from_numpy(x) for x in (children, mu_d, mu_t)), 1.0,
                                  torch.Generator().manual_seed(0))
    states = res.states.numpy()
    far = mu_t[:, 0] > 100.0
    assert np.all(np.isfinite(states))
    assert not res.accepted.numpy()[far].any()
    assert stats.kstest(states[far, 0] - mu_t[far, 0], "norm").pvalue > 1e-4
