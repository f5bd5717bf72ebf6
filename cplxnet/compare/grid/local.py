"""Cells run on this machine (:class:`cplxnet.compare.grid.executors.LocalExecutor`): one after the
other in this process (:func:`run_serial`), or each in its own worker process
(``python -m cplxnet.compare.grid.worker``), at most ``jobs`` at a time (:func:`run_parallel`).
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from .cells import Cell, GridOptions, cell_kind, next_ready
from .progress import Eta, fmt_duration
from .runner import run_cell
from .store import atomic_json, base_row

__all__ = [
    "default_threads",
    "run_serial",
    "run_parallel",
]


def default_threads(jobs: int) -> int:
    """Torch threads per cell: ``max(1, cores // jobs)``."""
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def run_serial(todo: Sequence[Cell], ctx: Any, threads: int) -> None:
    """Train the cells one after the other in this process, a log line per epoch."""
    _set_threads(threads)
    queue = list(todo)
    while queue:
        cell = queue.pop(0)
        _forget(ctx.out, cell)

        def progress(epoch: int, metrics: dict, cell: Cell = cell) -> None:
            ctx.log(cell_kind(cell.mode).progress(cell, ctx.options, epoch, metrics))

        row = run_cell(cell, ctx.out, ctx.options, keep_runs=ctx.keep_runs, callback=progress)
        ctx.finished(cell, row, {}, queue)


def _status(out: str, running: dict, queue: Sequence[Cell], jobs: int, eta: Eta) -> str:
    """One line: each running cell with its last finished epoch, the queue and the ETA."""
    now = time.perf_counter()
    parts = []
    for cid, (cell, start) in running.items():
        path = os.path.join(out, "runs", cid, "metrics.jsonl")
        epochs = 0
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                epochs = sum(1 for line in fh if line.strip())
        parts.append(f"{cell.describe()} ({fmt_duration(now - start)}, {epochs} epoch(s) done)")
    rest = eta.remaining(queue, running, jobs)
    return (
        "running: "
        + "; ".join(parts)
        + f" | {len(queue)} queued, ETA "
        + ("?" if rest is None else fmt_duration(rest))
    )


def _forget(out: str, cell: Cell) -> None:
    """Remove the old result of a cell about to run again (an error being retried)."""
    path = os.path.join(out, "cells", cell.cell_id + ".json")
    if os.path.exists(path):
        os.remove(path)


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def run_parallel(
    todo: Sequence[Cell],
    out: str,
    jobs: int,
    threads: int,
    keep_runs: bool,
    options: GridOptions,
    finished: Callable[..., None],
    log: Callable[[str], None],
    heartbeat: float,
    eta: Eta,
) -> None:
    """Run each cell in a worker process (``python -m cplxnet.compare.grid.worker``), at most
    ``jobs`` at a time with ``threads`` torch threads each, its output in ``logs/<id>.log``. A
    worker that dies without writing its result is recorded as an error from the end of its log;
    one stopped by Ctrl-C or SIGTERM is left to run again next time. Every ``heartbeat`` seconds a
    status line goes to ``log``; when this process is interrupted, its workers are stopped."""
    logs = os.path.join(out, "logs")
    last_beat = time.perf_counter()
    os.makedirs(logs, exist_ok=True)
    queue = list(todo)
    running: dict[str, tuple[Cell, float]] = {}
    procs: dict[str, tuple[subprocess.Popen, Any]] = {}
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    try:
        while queue or procs:
            while queue and len(procs) < jobs:
                ready = next_ready(queue, running)  # a re-scoring cell waits for its run
                if ready is None:
                    break
                cell = queue.pop(ready)
                _forget(out, cell)
                log_fh = open(os.path.join(logs, cell.cell_id + ".log"), "w", encoding="utf-8")  # noqa: SIM115
                cmd = [
                    sys.executable,
                    "-m",
                    "cplxnet.compare.grid.worker",
                    "--out",
                    out,
                    "--threads",
                    str(threads),
                    "--cell",
                    json.dumps(cell.to_dict()),
                    "--watch-stdin",  # the worker ends when this process dies
                ]
                if keep_runs:
                    cmd.append("--keep-runs")
                procs[cell.cell_id] = (
                    subprocess.Popen(
                        cmd, stdin=subprocess.PIPE, stdout=log_fh, stderr=subprocess.STDOUT, env=env
                    ),  # fmt: skip
                    log_fh,
                )
                running[cell.cell_id] = (cell, time.perf_counter())
            time.sleep(0.2)
            if time.perf_counter() - last_beat >= heartbeat and procs:
                last_beat = time.perf_counter()
                log(_status(out, running, queue, jobs, eta))
            for cid in list(procs):
                proc, log_fh = procs[cid]
                if proc.poll() is None:
                    continue
                proc.stdin.close()
                log_fh.close()
                del procs[cid]
                cell, start = running.pop(cid)
                path = os.path.join(out, "cells", cid + ".json")
                wall = time.perf_counter() - start
                row = None
                if os.path.exists(path):
                    with open(path, encoding="utf-8") as fh:
                        row = json.load(fh)
                elif proc.returncode in (130, -signal.SIGINT, -signal.SIGTERM):
                    log(f"{cell.describe()}: interrupted; it runs again next time")
                    continue
                if row is None:  # the worker died without recording: record it here
                    with open(
                        os.path.join(logs, cid + ".log"), encoding="utf-8", errors="replace"
                    ) as fh:
                        tail = fh.read()[-2000:]
                    row = base_row(cell, options)
                    last = (tail.strip().splitlines() or [""])[-1]
                    row.update(
                        status="error",
                        error=f"worker exited with status {proc.returncode}"
                        + (
                            " (killed: out of memory?)"
                            if proc.returncode == -signal.SIGKILL
                            else ""
                        )
                        + (f": {last}" if last else ""),
                        traceback=tail,
                        seconds=round(time.perf_counter() - start, 1),
                        finished=datetime.datetime.now().isoformat(timespec="seconds"),
                    )
                    atomic_json(path, row)
                finished(cell, row, running, queue, wall)
    except BaseException:
        for proc, _ in procs.values():
            proc.terminate()
        for proc, log_fh in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            proc.stdin.close()
            log_fh.close()
        raise
