"""Spawned data-parallel ranks for the tests, with a deadline: a rank that hangs fails its test
in minutes instead of waiting for gloo's 30-minute collective timeout, and every rank's threads'
Python stacks are written to the test's captured stderr before it is killed."""

from __future__ import annotations

import faulthandler
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch.multiprocessing as mp

_DUMP_BEFORE_KILL = 5.0  # seconds between the ranks' stack dumps and the kill


def _with_stack_dump(rank: int, fn: Callable[..., None], dump_after: float, *args: Any) -> None:
    faulthandler.dump_traceback_later(dump_after, exit=False)
    try:
        fn(rank, *args)
    finally:
        faulthandler.cancel_dump_traceback_later()


def spawn_ranks(fn: Callable[..., None], args: tuple[Any, ...], nprocs: int = 2,
                timeout: float = 600.0, hang: str = "a rank did not finish") -> None:  # fmt: skip
    """``fn(rank, *args)`` in ``nprocs`` spawned processes; a rank's exception is raised as
    :func:`torch.multiprocessing.spawn` raises it, and after ``timeout`` seconds every rank is
    killed and the test fails with ``hang`` (each rank dumps its stacks a few seconds before)."""
    dump_after = timeout - min(_DUMP_BEFORE_KILL, timeout / 5)
    context = mp.start_processes(_with_stack_dump, args=(fn, dump_after, *args), nprocs=nprocs,
                                 join=False, start_method="spawn")  # fmt: skip
    deadline = time.monotonic() + timeout
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"{hang} within {timeout:.0f} s")
