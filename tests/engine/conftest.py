"""Engine tests run with one torch thread: on a shared 2-core machine OpenMP's second thread mostly waits
(measured 2-10x slower for these tiny models); the previous setting is restored afterwards."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
