"""The accelerator code path never synchronises with the host.

On a ``meta`` device tensors have shapes but no data, so every operation that needs a value on
the host -- ``.item()``, ``bool(tensor)``, ``nonzero``, boolean-mask indexing, ``.cpu()`` --
raises.  Running every torch verifier on ``meta`` (which takes the non-CPU branch everywhere,
like CUDA) therefore proves the hot path is free of host synchronisation without a GPU.
``bench/gpu_check.py`` checks the same on CUDA with ``torch.cuda.set_sync_debug_mode("error")``.
"""
import pytest
import torch

from rass_theory.verifiers import _tensors as _core
from rass_theory.torch import mutants as tm
from rass_theory.torch import verifiers as tv

RULES = {
    "rmc": (tv.rmc, 1), "dgrs": (tv.dgrs, 4), "rass_interpolated": (lambda: tv.rass("interpolated"), 4), "rass_pinned": (lambda: tv.rass(delta=1.0), 4),
    "rass_uniform": (lambda: tv.rass("uniform"), 4),
    "threshold": (lambda: tv.threshold(t=0.5, weights=[0.1, 0.2, 0.3, 0.4]), 4), "resample": (tv.resample, 4),
}


@pytest.fixture
def meta_generator(monkeypatch):
    # torch has no Generator on "meta"; torch.rand(..., generator=None) works there
    monkeypatch.setattr(_core, "as_torch_generator", lambda rng, device: None)


def meta_batch(n, K, d, dtype):
    return (torch.empty(n, K, d, dtype=dtype, device="meta"), torch.empty(n, d, dtype=dtype, device="meta"),
            torch.empty(n, d, dtype=dtype, device="meta"))


@pytest.mark.parametrize("rule,dtype", [(r, torch.float64) for r in RULES] + [("rass_uniform", torch.float32)])
def test_verifier_runs_on_meta(rule, dtype, meta_generator):
    factory, K = RULES[rule]
    n = 17_000                                                 # > one residual block of rows
    children, mu_d, mu_t = meta_batch(n, K, 6, dtype)
    res = factory()(children, mu_d, mu_t, 1.0, None)
    assert res.states.device.type == "meta" and res.states.shape == (n, 6)
    assert res.accepted.dtype == torch.bool and res.child_index.dtype == torch.int64


def test_meta_catches_a_synchronising_verifier(meta_generator):
    """The check has teeth: a rule that reads a value on the host fails on meta."""

    def syncing(children, mu_draft, mu_target, sigma, rng):
        res = tv.dgrs()(children, mu_draft, mu_target, sigma, rng)
        if res.accepted.any():           # bool(tensor): a host synchronisation
            pass
        return res

    children, mu_d, mu_t = meta_batch(10, 4, 3, torch.float64)
    with pytest.raises(RuntimeError):
        syncing(children, mu_d, mu_t, 1.0, None)


@pytest.mark.parametrize("name", ["dgrs_sorted_order"])
def test_mutants_run_on_meta(name, meta_generator):
    children, mu_d, mu_t = meta_batch(100, 4, 3, torch.float64)
    assert tm.all_mutants(4)[name](children, mu_d, mu_t, 1.0, None).states.shape == (100, 3)
