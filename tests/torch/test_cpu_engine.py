"""The two engines of CPU tensors make the same decisions from the same generator.

``cpu_engine("numpy")`` (the default) decides CPU tensors on NumPy views with the generator's
uniforms; ``cpu_engine("torch")`` runs the torch namespace (the accelerator code).  For every
rule, dtype and batch kind the two give the same accept/reject decisions, the same committed
children, the same generator state afterwards, and states equal to rounding; the host path keeps
the tensor contract (result type, dtype, fresh memory) and checks values as NumPy does.
"""
import threading

import numpy as np
import pytest
import torch

from rass_theory.torch import CPU_ENGINES, TorchVerifierResult, cpu_engine
from rass_theory.torch import verifiers as tv
from rass_theory.verifiers._tensors import _cpu_engine

RULES = {
    "rass": tv.rass, "rass_interpolated": lambda: tv.rass("interpolated"), "rass_uniform": lambda: tv.rass("uniform"),
    "rass_fresh": lambda: tv.rass(orthogonal="fresh"), "optimal_list": tv.optimal_list, "threshold": tv.threshold,
    "dgrs": tv.dgrs, "rmc": tv.rmc, "resample": tv.resample,
}


def node_batch(n, K, d, per_row, dtype, seed=1):
    rng = np.random.default_rng(seed)
    mu_d = rng.standard_normal((n, d)) * 3.0
    e = rng.standard_normal((n, d))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    sigma = np.exp(rng.uniform(-1.0, 1.0, n))
    delta = np.exp(rng.uniform(np.log(0.05), np.log(6.0), n)) if per_row else np.full(n, 1.2)
    delta[:2] = 0.0                                   # degenerate rows
    mu_t = mu_d + (sigma * delta)[:, None] * e
    children = mu_d[:, None, :] + sigma[:, None, None] * rng.standard_normal((n, K, d))
    return tuple(torch.from_numpy(a).to(dtype) for a in (children, mu_d, mu_t)) + (torch.from_numpy(sigma).to(dtype),)


def run(engine, verifier, args, seed=7):
    gen = torch.Generator().manual_seed(seed)
    with cpu_engine(engine):
        result = verifier(*args, gen)
    return result, gen.get_state()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("per_row", [True, False], ids=["per_row", "one_delta"])
@pytest.mark.parametrize("rule", list(RULES))
def test_same_decisions_and_stream(rule, per_row, dtype):
    K = 1 if rule == "rmc" else 3
    args = node_batch(2000, K, 6, per_row, dtype)
    (host, g_host), (dev, g_dev) = (run(e, RULES[rule](), args) for e in ("numpy", "torch"))
    assert isinstance(host, TorchVerifierResult)
    assert host.states.dtype == dtype and host.accepted.dtype == torch.bool and host.child_index.dtype == torch.int64
    assert torch.equal(g_host, g_dev)                                  # the same stream positions
    assert torch.equal(host.accepted, dev.accepted)
    assert torch.equal(host.child_index, dev.child_index)
    acc = host.accepted
    assert torch.equal(host.states[acc], dev.states[acc])            # exact copies of the children
    if rule != "resample":
        assert 0.02 < acc.double().mean() < 0.99                      # both branches ran
    tol = 1e-10 if dtype == torch.float64 else 0.0
    # float32 corrections: rounded in float32 from float64 values that agree to ~1e-14 (one ulp apart at most)
    ulp = torch.finfo(dtype).eps * host.states.abs().double().clamp(min=1.0)
    assert bool(((host.states.double() - dev.states.double()).abs() <= torch.maximum(ulp, torch.tensor(tol))).all())


def test_default_engine_is_numpy_and_restored():
    assert _cpu_engine.get() == "numpy" and CPU_ENGINES == ("numpy", "torch")
    with cpu_engine("torch"):
        assert _cpu_engine.get() == "torch"
        with pytest.raises(RuntimeError):
            with cpu_engine("numpy"):
                raise RuntimeError("inside")
        assert _cpu_engine.get() == "torch"
        seen = []
        worker = threading.Thread(target=lambda: seen.append(_cpu_engine.get()))
        worker.start()
        worker.join()
        assert seen == ["numpy"]                                      # another thread keeps the default
    assert _cpu_engine.get() == "numpy"


def test_bad_engine_name():
    with pytest.raises(ValueError, match="name must be one of"):
        with cpu_engine("cuda"):
            pass


def test_host_result_is_fresh_memory():
    args = node_batch(500, 3, 4, True, torch.float64)
    children = args[0]
    before = children.clone()
    res, _ = run("numpy", tv.rass(), args)
    assert torch.equal(children, before)                              # inputs untouched
    res.states.add_(1.0)                                              # the result owns its memory
    assert torch.equal(children, before)


@pytest.mark.parametrize("where", ["children", "mu_draft", "mu_target"])
def test_host_engine_rejects_non_finite_values(where):
    args = list(node_batch(50, 3, 4, True, torch.float64))
    i = ["children", "mu_draft", "mu_target"].index(where)
    args[i] = args[i].clone()
    args[i].view(-1)[7] = float("nan")
    with pytest.raises(ValueError, match=where):
        run("numpy", tv.rass(), args)


def test_host_engine_keeps_tensor_rules():
    args = node_batch(300, 3, 2, True, torch.float64)
    with pytest.raises(TypeError, match="residual='rejection' runs on NumPy arrays only"):
        run("numpy", tv.rass("uniform", residual="rejection"), args)
    seen = []

    def weights(K, delta):
        seen.append(type(delta))
        return torch.full((K,), 1.0 / K, dtype=delta.dtype)

    res_host, _ = run("numpy", tv.rass(weights), args)
    res_dev, _ = run("torch", tv.rass(weights), args)
    assert seen == [torch.Tensor, torch.Tensor] and torch.equal(res_host.accepted, res_dev.accepted)
    with pytest.raises(TypeError, match="torch.Tensor on the inputs' device"):
        run("numpy", tv.rass(lambda K, delta: np.full(K, 1.0 / K)), args)


def test_requires_grad_inputs():
    args = list(node_batch(200, 3, 4, False, torch.float64))
    args[0] = args[0].clone().requires_grad_(True)
    (host, _), (dev, _) = (run(e, tv.dgrs(), tuple(args)) for e in ("numpy", "torch"))
    assert torch.equal(host.accepted, dev.accepted)
