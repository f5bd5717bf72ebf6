"""Spawned data-parallel ranks for the tests, with a deadline: a rank that hangs fails its test
in minutes instead of waiting for gloo's 30-minute collective timeout."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import torch.multiprocessing as mp


def spawn_ranks(fn: Callable[..., None], args: tuple[Any, ...], nprocs: int = 2,
                timeout: float = 600.0, hang: str = "a rank did not finish") -> None:  # fmt: skip
    """``fn(rank, *args)`` in ``nprocs`` spawned processes; a rank's exception is raised as
    :func:`torch.multiprocessing.spawn` raises it, and after ``timeout`` seconds every rank is
    killed and the test fails with ``hang``."""
    context = mp.start_processes(fn, args=args, nprocs=nprocs, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"{hang} within {timeout:.0f} s")
