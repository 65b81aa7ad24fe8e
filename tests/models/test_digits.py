"""The shipped digits flow model: loading, sample quality, and whole-run exactness of the torch tree sampler."""
from importlib import resources

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from rass_theory.diffusion.torch_sampler import plain_sample_torch, speculative_sample_torch  # noqa: E402
from rass_theory.models import digits_flow  # noqa: E402
from rass_theory.models.exactness import (classifier_two_sample_test, compare_samples,  # noqa: E402
                                          marginal_ks_test)
from rass_theory.models.quality import digits_quality  # noqa: E402
from rass_theory.verifiers._tensors import TorchVerifierResult  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return digits_flow()


def greedy_nearest(children, mu_draft, mu_target, sigma, rng):
    """Known-wrong: always commit the child nearest to the target mean (shrinks the noise)."""
    n = children.shape[0]
    idx = ((children - mu_target[:, None, :]) ** 2).sum(dim=2).argmin(dim=1)
    return TorchVerifierResult(children[torch.arange(n), idx], torch.ones(n, dtype=torch.bool, device=children.device),
                               idx)


class TestShippedWeights:
    def test_file_is_small_and_loads_weights_only(self):
        ref = resources.files("rass_theory.models") / "data" / "digits_flow.pt"
        with resources.as_file(ref) as p:
            assert p.stat().st_size < 1_000_000
            blob = torch.load(p, map_location="cpu", weights_only=True)
        assert set(blob) == {"config", "state_dict"} and blob["config"]["dim"] == 64

    def test_model(self, model):
        assert model.dim == 64 and model.image_shape == (8, 8) and model.name == "digits_flow"
        v = model.velocity(torch.zeros(3, 64), torch.tensor([1.0, 0.5, 0.05]))
        assert v.shape == (3, 64) and torch.isfinite(v).all()

    def test_float64(self):
        m = digits_flow(dtype=torch.float64)
        assert m.dtype == torch.float64
        assert m.velocity(torch.zeros(2, 64, dtype=torch.float64), 0.5).dtype == torch.float64

    def test_samples_look_like_digits(self, model):
        """Observed (n = 1000): confidence 0.86 (held-out real 0.93), class entropy 2.29 (max 2.30),
        C2ST accuracy 0.63; bounds are >= 4 standard errors away at n = 400."""
        q = digits_quality(plain_sample_torch(model, 400, rng=0), rng=0)
        assert q.confidence > 0.78 and q.class_entropy > 2.2 and q.c2st_accuracy < 0.75
        assert abs(q.nn_distance - q.nn_distance_real) < 0.5        # neither blurry nor memorised


class TestTwoSampleTests:
    def test_validation(self):
        with pytest.raises(ValueError, match="same number of columns"):
            marginal_ks_test(np.zeros((20, 3)), np.zeros((20, 4)))
        with pytest.raises(ValueError, match="at least 10"):
            classifier_two_sample_test(np.zeros((5, 3)), np.zeros((20, 3)))

    def test_null_and_alternative(self):
        rng = np.random.default_rng(0)
        x, y = rng.standard_normal((500, 8)), rng.standard_normal((500, 8))
        assert compare_samples(x, y, rng=1, detectable=False, n_permutations=499).passed
        y[:, 3] += 0.4                                # one coordinate shifted by 0.4 sd
        res = compare_samples(x, y, rng=1, detectable=False, n_permutations=499)
        assert not res.passed and res.marginal.worst == 3

    def test_detectable_effects_shrink_with_n(self):
        rng = np.random.default_rng(0)
        small = classifier_two_sample_test(rng.standard_normal((100, 4)), rng.standard_normal((100, 4)))
        large = classifier_two_sample_test(rng.standard_normal((1000, 4)), rng.standard_normal((1000, 4)))
        assert 0.5 < large.detectable_accuracy < small.detectable_accuracy < 1.0


class TestExactnessOnTheLearnedModel:
    def test_smoke_rass(self, model):
        run = speculative_sample_torch(model, "rass", K=2, L=3, n_samples=400, rng=1)
        ref = plain_sample_torch(model, 400, rng=2)
        res = compare_samples(run.samples, ref, alpha=0.01, rng=0, detectable=False, n_permutations=499)
        assert res.passed, res
        assert run.speedup > 1.5

    def test_known_wrong_verifier_is_caught(self, model):
        """Power: a greedy rule (nearest child to the target mean, always accepted) is detected."""
        run = speculative_sample_torch(model, greedy_nearest, K=4, L=3, n_samples=1000, rng=1)
        ref = plain_sample_torch(model, 1000, rng=2)
        res = compare_samples(run.samples, ref, alpha=0.01, rng=0, detectable=False, n_permutations=999)
        assert not res.passed

    @pytest.mark.slow
    @pytest.mark.parametrize("verifier,K,L", [("rmc", 1, 3), ("rmc", 1, 7), ("dgrs", 2, 3), ("dgrs", 4, 3),
                                              ("rass", 2, 3), ("rass", 4, 3), ("threshold", 2, 3),
                                              ("threshold", 4, 3)])
    def test_whole_run_exact(self, model, verifier, K, L):
        """n = 2000 per side; each arm at alpha = 0.01 (Bonferroni over its three tests).
        Detectable effects at 80 % power are printed by ``bench/digits_exactness.py``."""
        run = speculative_sample_torch(model, verifier, K=K, L=L, n_samples=2000, rng=10 + K + L)
        ref = plain_sample_torch(model, 2000, rng=20 + K + L)
        res = compare_samples(run.samples, ref, alpha=0.01, rng=0, detectable=False)
        assert res.passed, res
