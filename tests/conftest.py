"""Shared pytest configuration: the ``slow`` marker and per-test seeded generators."""
import numpy as np
import pytest


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name, so each test is reproducible on its own."""
    seed = abs(hash(request.node.nodeid)) % (2**32)
    # hash() is salted per process; use a stable digest instead
    import hashlib

    seed = int.from_bytes(hashlib.sha256(request.node.nodeid.encode()).digest()[:8], "little")
    return np.random.default_rng(seed)


@pytest.fixture
def one_torch_thread():
    """Run the test with one torch intra-op thread and restore the count afterwards.

    The shared CI machine has two cores; intra-op threads only add scheduling noise.  Folders of
    torch tests make it autouse in their own ``conftest.py``.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
