"""Shared test setup: deterministic seeds, one thread per test process, helpers on sys.path,
the ``--device`` option (the ``device`` fixture) and the accuracy benchmark script as a module."""

import importlib.util
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
torch.set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        default="cpu",
        help="device of the device-parametrised tests (module table, zoo models, host syncs): "
        "cpu (default) or e.g. cuda; benchmarks/device_check.py passes it",
    )


@pytest.fixture(scope="session")
def device(request) -> torch.device:
    """The device the device-parametrised tests run on (``--device``, default cpu)."""
    dev = torch.device(request.config.getoption("--device"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        pytest.skip("--device cuda: CUDA is not available")
    return dev


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def accuracy_benchmark():
    """``benchmarks/accuracy.py`` loaded as a module (it is a script, not part of the package)."""
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks", "accuracy.py")
    spec = importlib.util.spec_from_file_location("accuracy_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
