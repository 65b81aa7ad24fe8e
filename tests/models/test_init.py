"""init_parameters_: seeded initialisation without global seeding."""
import math

import pytest

torch = pytest.importorskip("torch")

from rass_theory.models.digits import DigitsVelocityNet  # noqa: E402
from rass_theory.models.init import init_parameters_  # noqa: E402


def _net(seed):
    return init_parameters_(DigitsVelocityNet(dim=64, hidden=32, depth=2), torch.Generator().manual_seed(seed))


def test_same_generator_seed_same_parameters_and_global_state_untouched():
    before = torch.random.get_rng_state()
    a, b, c = _net(3), _net(3), _net(4)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb)
        assert not torch.equal(pa, pc)
    # building the net draws from the global generator, but the parameters do not depend on it
    torch.random.set_rng_state(before)


def test_fan_in_uniform_law():
    net = init_parameters_(torch.nn.Linear(400, 300), torch.Generator().manual_seed(0))
    bound = 1 / math.sqrt(400)
    w = net.weight.detach().flatten()
    assert w.abs().max() <= bound and net.bias.abs().max() <= bound
    # U(-b, b) has variance b^2/3; 120,000 draws: the sample variance's relative SE is about 0.0026
    rel = (w.var() / (bound ** 2 / 3)).item() - 1
    assert abs(rel) < 5 * 0.0026


def test_rejects_a_non_generator():
    with pytest.raises(TypeError, match="generator"):
        init_parameters_(torch.nn.Linear(2, 2), 0)
