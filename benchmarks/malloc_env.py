"""The glibc malloc settings the timing scripts run under: thresholds raised so that large
tensors are not returned to the system and mapped again between calls (the timings then measure
the ops, not page faults). A script re-executes itself once with them set."""

from __future__ import annotations

import os
import sys

MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "4294967296"}


def reexec_with_malloc_settings() -> None:
    """Re-execute the running script with :data:`MALLOC_ENV` set, unless it is set already or
    the command line has ``--no-reexec``. Call it before importing torch."""
    if "--no-reexec" in sys.argv or all(os.environ.get(k) == v for k, v in MALLOC_ENV.items()):
        return
    os.environ.update(MALLOC_ENV)
    os.execv(sys.executable, [sys.executable, *sys.argv])
