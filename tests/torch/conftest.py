"""Torch tests run single-threaded: the ``one_torch_thread`` fixture of ``tests/conftest.py``."""
import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test in this folder runs with one torch thread (restored afterwards)."""
