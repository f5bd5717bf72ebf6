"""A ``cplxnet compare --jobs N`` parent ended by SIGTERM (``kill PID``, a batch system's time
limit) ends its workers with it and removes its ``.lock``, as Ctrl-C does; the cells that were
running are left to run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from waiting import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the parent, with workers that only record their pid and wait (exec keeps the pid)
PARENT = """
import sys
sys.executable = sys.argv[1]
from cplxnet.cli import main
sys.exit(main(["compare", "--data", "synthetic", "--families", "fasttext", "--encodings",
               "none,complex-order,sinusoidal", "--seeds", "1", "--epochs", "1", "--set",
               "d_model=8", "--synthetic-size", "40", "--synthetic-vocab", "5", "--train-len",
               "6", "--threads", "1", "--jobs", "2", "--out", sys.argv[2]]))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie has ended: its parent has not reaped it
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def _env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))  # fmt: skip


def _end_all(parent: subprocess.Popen, workers: list[int]) -> None:
    """Whatever a failed test left running: the parent and its workers."""
    if parent.poll() is None:
        parent.kill()
    for pid in workers:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_sigterm_ends_the_workers_and_removes_the_lock(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    worker = tmp_path / "worker"
    worker.write_text(f"#!/bin/sh\necho $$ > {pids}/$$\nexec sleep 120\n")
    worker.chmod(0o755)
    out = tmp_path / "out"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(worker), str(out)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    workers: list[int] = []
    try:
        assert wait_until(lambda: len(os.listdir(pids)) == 2, 120), "the workers did not start"
        time.sleep(0.2)  # each has written its pid
        workers = [int(name) for name in os.listdir(pids)]
        assert all(_alive(pid) for pid in workers)
        assert (out / ".lock").exists()
        parent.send_signal(signal.SIGTERM)
        stdout, stderr = parent.communicate(timeout=60)
        assert parent.returncode == 130, stderr
        assert stderr.strip().splitlines()[-1].startswith("cplxnet: error: interrupted"), stderr
        assert "Traceback" not in stderr
        assert wait_until(lambda: not any(_alive(pid) for pid in workers), 30), "orphaned workers"
        assert not (out / ".lock").exists()
        cells = out / "cells"  # nothing recorded: both cells run again next time
        assert not cells.exists() or not os.listdir(cells)
    finally:
        _end_all(parent, workers)


# a real grid whose cells train for minutes: the parent is killed while both workers train
KILLED_PARENT = """
import sys
from cplxnet.cli import main
sys.exit(main(["compare", "--task", "lm", "--data", "synthetic:copy", "--encodings", "none,rotary",
               "--seeds", "1", "--steps", "100000", "--eval-every", "50000", "--context", "8",
               "--batch-size", "4", "--set", "d_model=8", "--set", "num_heads=2", "--set",
               "dim_feedforward=16", "--set", "num_layers=1", "--threads", "1", "--jobs", "2",
               "--no-report", "--out", sys.argv[1]]))
"""


def _run_locks(out) -> list:
    runs = out / "runs"
    return sorted(runs.glob(".*.lock")) if runs.is_dir() else []


@pytest.mark.slow
def test_the_workers_end_when_their_parent_is_killed(tmp_path):
    """``kill -9`` of ``compare --jobs 2`` cannot end its workers itself: each watches its stdin
    (a pipe from the parent), ends as on Ctrl-C when the pipe closes, and lets its run go. The
    parent starts with SIGINT ignored, as a shell starts a background job (``compare ... &`` in
    a script), and its workers inherit that."""
    from cplxnet.engine.runs import run_holder

    out = tmp_path / "out"
    ignore = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    parent = subprocess.Popen([sys.executable, "-c", KILLED_PARENT, str(out)], env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=ignore)  # fmt: skip
    workers: list[int] = []
    try:
        assert wait_until(lambda: len(_run_locks(out)) == 2, 180), "the workers did not start"
        assert wait_until(lambda: all(lock.stat().st_size for lock in _run_locks(out)), 30)
        workers = [json.loads(lock.read_text())["pid"] for lock in _run_locks(out)]
        runs = [str(out / "runs" / lock.name[1 : -len(".lock")]) for lock in _run_locks(out)]
        assert all(_alive(pid) for pid in workers) and all(run_holder(r) for r in runs)
        parent.kill()
        parent.wait(timeout=30)
        assert wait_until(lambda: not any(_alive(pid) for pid in workers), 60), "orphaned workers"
        assert all(run_holder(r) is None for r in runs)  # their runs are free to resume
    finally:
        _end_all(parent, workers)
