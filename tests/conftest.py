"""Shared fixtures: every test that takes ``device`` runs on each device present (CPU always, CUDA/MPS
where available), so running the suite on a GPU machine proves GPU support."""

from __future__ import annotations

import os

import pytest
import torch

# The unit tests use up to two threads, shared among the pytest-xdist processes when `make test` runs
# several (PYTEST_XDIST_WORKER_COUNT), so two processes on two cores do not fight over them. nbval's
# notebooks set their own (a kernel is a process of its own). VITEDU_TEST_THREADS overrides it (make
# mutation runs the tests on one thread, beside other work).
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_threads = max(1, min(2, os.cpu_count() or 1) // _workers)
torch.set_num_threads(int(os.environ.get("VITEDU_TEST_THREADS", "0")) or _threads)


def _devices() -> list[str]:
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        devices.append("mps")
    return devices


@pytest.fixture(params=_devices())
def device(request) -> torch.device:
    return torch.device(request.param)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """The tiny models of the training tests: one thread avoids the overhead of splitting them over cores
    (``pytestmark = pytest.mark.usefixtures("one_thread")`` in test_train.py, test_checkpoints.py, ...)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def fused_calls(monkeypatch) -> list:
    """Counts the calls of PyTorch's fused attention kernel: one entry per call, made while the test runs."""
    calls = []
    fused = torch.nn.functional.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
    return calls
