"""Torch tests run single-threaded (the shared CI machine has two cores; intra-op threads only
add scheduling noise) and restore the thread count afterwards."""
import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

