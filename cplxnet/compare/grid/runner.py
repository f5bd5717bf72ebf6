"""One cell of a comparison grid trained and recorded: :func:`run_cell` trains it (a
classification cell with :func:`train_grid_cell`, an extrapolation cell with
:func:`cplxnet.compare.grid.extrapolate.train_extrapolation_cell`, another kind through its
:class:`~cplxnet.compare.grid.cells.CellKind`) and writes its row to ``cells/<id>.json``.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import time
import traceback
from collections.abc import Callable
from typing import Any

from .cells import SYNTHETIC, Cell, GridOptions, cell_kind, cell_train, data_spec
from .expand import cell_config
from .store import atomic_json, base_row, read_history, result_fields

__all__ = [
    "run_cell",
    "train_grid_cell",
]


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
    :func:`cplxnet.tasks.classify.train.train`)."""
    row = base_row(cell, options)
    started = time.perf_counter()
    run_dir = os.path.join(out, "runs", cell.cell_id)
    kind = cell_kind(cell.mode)
    try:
        if kind is not None:
            result = kind.train(cell, options, run_dir, callback)
        elif cell.mode == "extrapolate":
            from .extrapolate import train_extrapolation_cell

            result = train_extrapolation_cell(cell, options, run_dir, callback=callback)
        else:
            result = train_grid_cell(cell, options, run_dir, callback=callback)
        row.update(result)
        row["status"] = "ok"
        row["error"] = ""
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - a failing cell is recorded, the grid goes on
        row["status"] = "error"
        row["error"] = f"{type(err).__name__}: {err}"
        row["traceback"] = traceback.format_exc(limit=8)
    row["seconds"] = round(time.perf_counter() - started + row.pop("previous_seconds", 0.0), 1)
    row["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    atomic_json(os.path.join(out, "cells", cell.cell_id + ".json"), row)
    if not keep_runs and row["status"] == "ok":
        shutil.rmtree(run_dir, ignore_errors=True)
    return row


def train_grid_cell(
    cell: Cell,
    options: GridOptions,
    run_dir: str,
    callback: Callable[[int, dict], None] | None = None,
) -> dict[str, Any]:
    """Train a classification cell in ``run_dir`` and return its row fields: a run that finished
    but was not recorded is read back, one with a checkpoint resumes (except on the synthetic
    task, whose data is made in memory), anything else starts afresh."""
    from ...data import prepare_data
    from ...tasks.classify import train as engine

    config = cell_config(cell.family, cell.encoding, cell.number, options, data=cell.data)
    topts = engine.TrainOptions(**cell_train(cell, options), seed=cell.seed)
    resumed = False
    done = os.path.join(run_dir, "results.json")
    if os.path.exists(done):  # finished but not yet recorded (interrupted in between)
        with open(done, encoding="utf-8") as fh:
            results = json.load(fh)
        resumed = True
    elif os.path.exists(os.path.join(run_dir, "checkpoint.pt")) and cell.data != SYNTHETIC:
        results = engine.resume(run_dir, quiet=True, callback=callback)
        resumed = True
    else:
        if os.path.lexists(run_dir):
            shutil.rmtree(run_dir)
        os.makedirs(os.path.dirname(run_dir), exist_ok=True)
        if cell.data == SYNTHETIC:
            from .extrapolate import synthetic_data

            data = synthetic_data(options, cell, bins=False)
        else:
            data = prepare_data(data_spec(cell, options), model_max_len=config.max_len)
        results = engine.train(
            config, data, run_dir, topts, vectors=options.vectors, quiet=True, callback=callback
        )
    out = result_fields(results)
    out["resumed"] = resumed
    out["history"] = read_history(run_dir)
    return out
