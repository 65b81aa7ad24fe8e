"""Torch tests run single-threaded: the ``one_torch_thread`` fixture of ``tests/conftest.py``."""
import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test in this folder runs with one torch thread (restored afterwards)."""


@pytest.fixture(params=["numpy", "torch"], ids=lambda name: f"cpu_engine={name}")
def each_cpu_engine(request):
    """Run a test under both engines of CPU tensors (``rass_theory.torch.cpu_engine``): the default
    NumPy views, and the torch namespace that accelerators run."""
    from rass_theory.torch import cpu_engine

    with cpu_engine(request.param):
        yield request.param
