"""Polling for tests that watch another process: :func:`wait_until`."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Whether ``condition()`` holds within ``timeout`` seconds, checked every ``step``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()
