"""Velocity adapters: output validation, EDM conversion, Gaussian-mixture wrapper, lazy imports."""
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rass_theory.diffusion import GaussianMixture  # noqa: E402
from rass_theory.models import (ModelOutputError, edm_to_flow, from_edm_denoiser,  # noqa: E402
                                from_gaussian_mixture, from_velocity)


class TestFromVelocity:
    def test_reshapes_to_image_shape(self):
        seen = {}

        def fn(x, s):
            seen["shape"] = tuple(x.shape)
            return -x
        m = from_velocity(fn, dim=12, image_shape=(3, 2, 2))
        out = m.velocity(torch.ones(5, 12), 0.5)
        assert seen["shape"] == (5, 3, 2, 2) and out.shape == (5, 12)
        assert torch.equal(out, -torch.ones(5, 12))

    @pytest.mark.parametrize("kw,match", [(dict(dim=0), "dim"), (dict(dim=12, image_shape=(3, 3)), "image_shape"),
                                          (dict(dim=4, image_shape=()), "image_shape")])
    def test_bad_construction(self, kw, match):
        with pytest.raises(ValueError, match=match):
            from_velocity(lambda x, s: x, **kw)

    def test_not_callable(self):
        with pytest.raises(TypeError, match="callable"):
            from_velocity(3, dim=2)

    @pytest.mark.parametrize("fn,match", [
        (lambda x, s: x[:, :2], "shape"),
        (lambda x, s: x.double(), "dtype"),
        (lambda x, s: x * float("nan"), "non-finite"),
        (lambda x, s: x.numpy(), "ndarray"),
    ])
    def test_bad_outputs_name_model_and_call(self, fn, match):
        m = from_velocity(fn, dim=4, name="mynet")
        with pytest.raises(ModelOutputError, match=f"mynet', call 1 .*{match}"):
            m.velocity(torch.ones(3, 4), 0.5)

    def test_device_mismatch(self):
        m = from_velocity(lambda x, s: torch.zeros(x.shape, device="meta"), dim=4, name="meta_net")
        with pytest.raises(ModelOutputError, match="meta_net.*device"):
            m.velocity(torch.ones(2, 4), 0.5)

    def test_bad_inputs(self):
        m = from_velocity(lambda x, s: x, dim=4)
        with pytest.raises(ValueError, match="shape"):
            m.velocity(torch.ones(2, 5), 0.5)
        with pytest.raises(ValueError, match="s must"):
            m.velocity(torch.ones(2, 4), torch.ones(3))
        with pytest.raises(TypeError, match="torch.Tensor"):
            m.velocity(np.ones((2, 4)), 0.5)


class TestEDM:
    def test_conversion_formula_on_a_gaussian(self):
        """x0 ~ N(0, c^2 I): the exact EDM denoiser D(x, t) = c^2/(c^2 + t^2) x gives the exact velocity."""
        c = 0.7

        def D(x, t):
            return (c ** 2 / (c ** 2 + t ** 2))[:, None] * x
        m = from_edm_denoiser(D, dim=3, sigma_max=1e9)
        gm = GaussianMixture(means=np.zeros((1, 3)), sds=np.array([c]))
        x = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        for s in (0.1, 0.5, 0.9):
            expect = gm.velocity(x.numpy(), s)
            np.testing.assert_allclose(m.velocity(x, s).numpy(), expect, rtol=1e-9, atol=1e-12)

    def test_sigma_max_clamp(self):
        t, scale = edm_to_flow(torch.tensor([0.5, 1.0], dtype=torch.float64), sigma_max=80.0)
        assert t.tolist() == [1.0, 80.0] and scale.tolist() == [2.0, 81.0]


class TestGaussianMixture:
    def test_matches_numpy(self):
        gm = GaussianMixture.random(dim=5, n_components=3, seed=1)
        m = from_gaussian_mixture(gm)
        x = np.random.default_rng(0).standard_normal((7, 5))
        s = np.linspace(0.1, 0.9, 7)
        out = m.velocity(torch.as_tensor(x), torch.as_tensor(s))
        np.testing.assert_allclose(out.numpy(), gm.velocity(x, s), rtol=1e-12)


def test_top_level_import_does_not_import_torch():
    code = "import sys, rass_theory, rass_theory.diffusion; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
