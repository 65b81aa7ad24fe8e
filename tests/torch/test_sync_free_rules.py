"""The unified verifier classes keep the torch hot path free of host synchronisation.

Same method as ``tests/torch/test_sync_free.py`` (a ``meta`` device has shapes but no data, so
any host read raises), for the options that run on the device: the threshold verifier with
table-interpolated per-row parameters (interpolated on the device) and RASS with fresh
orthogonal parts.
"""
import pytest
import torch

from rass_theory.torch import verifiers as tv
from rass_theory.verifiers import _tensors

RULES = {
    "threshold_interpolated": lambda n: tv.threshold(),
    "rass_fresh_orthogonal": lambda n: tv.rass("uniform", orthogonal="fresh"),
}


@pytest.fixture
def meta_generator(monkeypatch):
    monkeypatch.setattr(_tensors, "as_torch_generator", lambda rng, device: None)


@pytest.mark.parametrize("rule", list(RULES))
def test_rule_runs_on_meta(rule, meta_generator):
    n, K, d = 2_000, 4, 6
    children = torch.empty(n, K, d, dtype=torch.float64, device="meta")
    mu_d = torch.empty(n, d, dtype=torch.float64, device="meta")
    res = RULES[rule](n)(children, mu_d, torch.empty_like(mu_d), 1.0, None)
    assert res.states.device.type == "meta" and res.states.shape == (n, d)
    assert res.accepted.dtype == torch.bool and res.child_index.dtype == torch.int64
