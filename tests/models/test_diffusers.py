"""diffusers adapter on tiny randomly initialised networks built here (UNet2DModel, SD3Transformer2DModel).

Exactness holds for any velocity field, so untrained networks are valid targets: speculative and
plain runs must agree in law, and the model must be called exactly as often as the count says.
"""
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from rass_theory.diffusion import energy_distance_test  # noqa: E402
from rass_theory.diffusion.torch_sampler import plain_sample_torch, speculative_sample_torch  # noqa: E402
from rass_theory.models import from_diffusers  # noqa: E402
from rass_theory.models.init import init_parameters_  # noqa: E402

SCHED = dict(n_steps=12, churn=0.1)      # 10 stochastic steps, 2 deterministic tail steps


def tiny_unet(seed=0):
    return init_parameters_(diffusers.UNet2DModel(sample_size=8, in_channels=1, out_channels=1, layers_per_block=1,
                                 block_out_channels=(8, 16), down_block_types=("DownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "UpBlock2D"), norm_num_groups=4),
                            torch.Generator().manual_seed(seed)).eval()


def tiny_sd3(seed=0):
    return init_parameters_(diffusers.SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, out_channels=4, num_layers=1,
                                           attention_head_dim=8, num_attention_heads=2, joint_attention_dim=16,
                                           caption_projection_dim=16, pooled_projection_dim=8),
                            torch.Generator().manual_seed(seed)).eval()


@pytest.fixture(scope="module")
def unet_edm():
    return from_diffusers(tiny_unet(), diffusers.EDMEulerScheduler())


@pytest.fixture(scope="module")
def sd3_flow():
    g = torch.Generator().manual_seed(1)
    cond = dict(encoder_hidden_states=torch.randn(1, 3, 16, generator=g),
                pooled_projections=torch.randn(1, 8, generator=g))
    return from_diffusers(tiny_sd3(), diffusers.FlowMatchEulerDiscreteScheduler(), model_kwargs=cond)


class TestAdapter:
    def test_shapes_from_config(self, unet_edm, sd3_flow):
        assert unet_edm.image_shape == (1, 8, 8) and unet_edm.dim == 64
        assert sd3_flow.image_shape == (4, 8, 8) and sd3_flow.dim == 256
        assert unet_edm.dtype == torch.float32 and unet_edm.device.type == "cpu"

    def test_velocity_finite_and_shaped(self, unet_edm, sd3_flow):
        for m in (unet_edm, sd3_flow):
            x = torch.randn(5, m.dim, generator=torch.Generator().manual_seed(0))
            v = m.velocity(x, torch.tensor([1.0, 0.9, 0.5, 0.1, 0.01]))
            assert v.shape == (5, m.dim) and torch.isfinite(v).all()

    def test_flow_velocity_is_the_model_output(self):
        net = tiny_unet()
        m = from_diffusers(net, diffusers.FlowMatchEulerDiscreteScheduler())
        x = torch.randn(3, 64, generator=torch.Generator().manual_seed(0))
        s = torch.tensor([0.2, 0.5, 0.8])
        with torch.no_grad():
            ref = net(x.reshape(3, 1, 8, 8), s * 1000).sample.reshape(3, 64)
        torch.testing.assert_close(m.velocity(x, s), ref)

    def test_half_precision_model_gets_float32_states(self):
        m = from_diffusers(tiny_unet().to(torch.bfloat16), diffusers.FlowMatchEulerDiscreteScheduler())
        assert m.dtype == torch.float32
        v = m.velocity(torch.randn(3, 64, generator=torch.Generator().manual_seed(0)), 0.5)
        assert v.dtype == torch.float32 and torch.isfinite(v).all()

    def test_wrong_scheduler(self):
        with pytest.raises(TypeError, match="FlowMatchEulerDiscreteScheduler"):
            from_diffusers(tiny_unet(), diffusers.DDPMScheduler())

    def test_missing_diffusers_names_the_extra(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "diffusers", None)
        with pytest.raises(ImportError, match=r"rass_theory\[diffusers\]"):
            from_diffusers(torch.nn.Linear(2, 2), object())


@pytest.mark.parametrize("fixture,verifier,K,L", [("unet_edm", "rass", 2, 2), ("sd3_flow", "dgrs", 2, 3)])
def test_speculative_agrees_with_plain_and_counts_calls(request, fixture, verifier, K, L):
    m = request.getfixturevalue(fixture)
    n = 150
    before = m.n_calls
    run = speculative_sample_torch(m, verifier, K=K, L=L, n_samples=n, rng=0, **SCHED)
    invocations = m.n_calls - before
    # model invocations: initial + one batched call per loop round + 2 tail steps
    # (round records are written loop by loop, trajectories ascending within a loop)
    n_loop_rounds = 1 + np.count_nonzero(np.diff(run.rounds.trajectory) <= 0)
    assert invocations == 1 + n_loop_rounds + 2
    # per-trajectory count: initial + one per round
    assert np.array_equal(run.target_calls, 1 + np.bincount(run.rounds.trajectory, weights=run.rounds.called))
    assert run.speedup > 1.0
    before = m.n_calls
    ref = plain_sample_torch(m, n, rng=1, **SCHED)
    assert m.n_calls - before == run.n_standard_steps + 2
    res = energy_distance_test(run.samples, ref, n_permutations=999, rng=0, detectable=False)
    assert res.pvalue > 0.005, res           # fixed seeds; false-fail rate 0.5 % per arm

