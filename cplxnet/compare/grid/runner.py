"""One cell of a comparison grid trained and recorded: :func:`run_cell` trains it through its
:class:`~cplxnet.compare.grid.cells.CellKind` and writes its row to ``cells/<id>.json``."""

from __future__ import annotations

import datetime
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

from ...engine.runs import discard_run_files
from ...engine.runtime import machine
from .cells import Cell, GridOptions, cell_kind
from .store import atomic_json, base_row

__all__ = ["run_cell"]


def run_cell(
    cell: Cell,
    out: str,
    options: GridOptions,
    *,
    keep_runs: bool = False,
    callback: Callable[[int, dict], None] | None = None,
) -> dict[str, Any]:
    """Train one cell and write ``out/cells/<id>.json`` (atomically). Never raises for a failed
    training: the error is recorded in the row (``status="error"``); KeyboardInterrupt passes.
    ``callback(epoch, metrics)`` is called after each epoch (as
    :func:`cplxnet.tasks.classify.task.train`). The row's ``machine`` is
    :func:`cplxnet.engine.runtime.machine` of the process that ran it."""
    row = base_row(cell, options)
    started = time.perf_counter()
    run_dir = os.path.join(out, "runs", cell.cell_id)
    try:
        row.update(cell_kind(cell.mode).train(cell, options, run_dir, callback))
        row["status"] = "ok"
        row["error"] = ""
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - a failing cell is recorded, the grid goes on
        row["status"] = "error"
        row["error"] = f"{type(err).__name__}: {err}"
        row["traceback"] = traceback.format_exc(limit=8)
    read_back = row.pop("read_back", False)
    row["seconds"] = round(time.perf_counter() - started + row.pop("previous_seconds", 0.0), 1)
    row["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    row["machine"] = machine()
    atomic_json(os.path.join(out, "cells", cell.cell_id + ".json"), row)
    if not keep_runs and row["status"] == "ok" and not read_back:
        discard_run_files(run_dir)  # a run only read back stays: this command did not train it
    return row
