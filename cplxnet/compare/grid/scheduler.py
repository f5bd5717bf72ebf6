""":func:`run_grid`: the cells of a grid not yet done, run by an executor
(:mod:`cplxnet.compare.grid.executors`) while this process holds the output folder's lock, writes
the tables after each cell and reports progress."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ...engine.folder_lock import FolderLock
from .cells import Cell, CompareError, GridOptions, cell_kind
from .progress import Eta, fmt_duration
from .store import ResultStore

__all__ = [
    "grid_lock",
    "run_grid",
]


def grid_lock(
    out: str, label: str = "cplxnet compare", fix: str = "wait for it or choose another --out"
) -> FolderLock:
    """``out/.lock``: one command at a time writes a comparison folder (a ``compare`` running
    its cells and writing its report, or a ``report`` re-rendering it)."""
    return FolderLock(os.path.join(out, ".lock"), out, label, fix, CompareError)


def _check_runs_free(out: str, todo: Sequence[Cell]) -> None:
    """Refuse to start while a cell's run folder is held: a worker of an earlier command (its
    parent killed before it could end it) still trains that cell."""
    from ...engine.runs import run_holder

    for cell in todo:
        holder = run_holder(os.path.join(out, "runs", cell.cell_id))
        if holder is not None:
            raise CompareError(
                f"the run of {cell.describe()} in {os.path.join(out, 'runs')} is still in use "
                f"({holder}): a worker of an earlier compare still trains it; wait for it to end "
                "(or end it), then run the command again"
            )


def run_grid(
    cells: Sequence[Cell],
    out: str,
    options: GridOptions,
    *,
    jobs: int = 1,
    threads: int | None = None,
    retry_errors: bool = False,
    keep_runs: bool = False,
    log: Callable[[str], None] = print,
    heartbeat: float = 600.0,
    executor: Any = None,
    finish: Callable[[list[dict[str, Any]]], Any] | None = None,
) -> list[dict[str, Any]]:
    """Run every cell not yet done; returns all rows of the folder (in grid order).

    ``finish(rows)``, when given, runs after the last tables are written and before the folder's
    lock is released (``cplxnet compare`` writes its report there, so that no other
    ``cplxnet compare`` writes the folder meanwhile).

    ``executor`` runs the cells (:mod:`cplxnet.compare.grid.executors`); the default,
    ``LocalExecutor(jobs, threads)``, trains in this process with ``jobs == 1`` and otherwise runs
    each cell in its own worker process (``python -m cplxnet.compare.grid.worker``), at most
    ``jobs`` at a time, each with ``threads`` torch threads (default ``max(1, cores // jobs)``); a
    ``DaskExecutor`` sends the cells to a Dask cluster. A cell that fails (or whose worker dies)
    is recorded with its error and the grid goes on. Progress goes to ``log``: a line per
    finished cell with the elapsed time and an ETA (mean time of the finished cells of the same
    family, wall clock including process start-up), a line per epoch with ``jobs == 1``, and the
    epoch each running cell has reached every ``heartbeat`` seconds otherwise.
    """
    from .executors import LocalExecutor, RunContext

    if executor is None:
        if jobs < 1:
            raise CompareError(f"--jobs must be >= 1, got {jobs}")
        executor = LocalExecutor(jobs, threads)
    store = ResultStore(out)
    store.check_out()
    os.makedirs(out, exist_ok=True)
    with grid_lock(out):
        store.check_out()  # again, as the owner: another command may have written meanwhile
        done = store.load()
        store.check_presets(cells, options, done)
        store.check_options(options)
        store.check_data(cells, options)
        order = [c.cell_id for c in cells]
        if len(set(order)) != len(order):
            raise CompareError("the grid has duplicate cells (repeated data, family or seed?)")
        errors = [c for c in cells if done.get(c.cell_id, {}).get("status") == "error"]
        todo = [
            c
            for c in cells
            if c.cell_id not in done or (retry_errors and done[c.cell_id].get("status") == "error")
        ]
        _check_runs_free(out, todo)
        n_done = len(cells) - len(todo)
        msg = f"grid: {len(cells)} cells, {n_done} already done"
        if errors:
            msg += f" ({len(errors)} ended in an error" + (
                ", running them again)" if retry_errors else "; --retry-errors runs them again)"
            )
        log(msg + f"; {len(todo)} to run {executor.describe()} -> {out}")
        eta = Eta(done.values())
        started = time.perf_counter()
        counter = [n_done, 0]

        def finished(
            cell: Cell,
            row: dict[str, Any],
            running: dict,
            queued: Sequence[Cell],
            wall: float | None = None,
        ) -> None:
            counter[0] += 1
            if row.get("status") == "ok":
                eta.add(cell.family, cell.mode, wall or float(row.get("seconds") or 0.0))
                what = cell_kind(cell.mode).outcome(row)
            else:
                counter[1] += 1
                what = f"ERROR {row.get('error', '')[:200]}"
            store.write_tables(order)
            rest = eta.remaining(queued, running, executor.slots)
            failed = f", {counter[1]} failed" if counter[1] else ""
            log(
                f"[{counter[0]}/{len(cells)}{failed}] {cell.describe()}: {what} "
                f"({fmt_duration(float(row.get('seconds') or 0))}) | elapsed "
                f"{fmt_duration(time.perf_counter() - started)}, ETA "
                + ("?" if rest is None else fmt_duration(rest))
            )

        executor.run(todo, RunContext(out, options, keep_runs, finished, log, heartbeat, eta))
        rows = store.write_tables(order)
        if finish is not None:
            finish(rows)
    return rows
