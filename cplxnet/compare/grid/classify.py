"""The classification cell kinds of a comparison grid: ``grid`` (:func:`train_grid_cell`) and
``extrapolate`` (length extrapolation, trained by :mod:`~cplxnet.compare.grid.extrapolate`).
Both have the ids, splits, progress lines and ``results.csv`` of this module (an extrapolation
cell's id starts with ``x-``)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

from ...engine.runs import clear_run_folder, is_run_folder
from .cells import (
    SYNTHETIC,
    Cell,
    CellKind,
    GridOptions,
    cell_train,
    data_slug,
    data_spec,
    has_own_test,
    register_kind,
)
from .expand import cell_config
from .extrapolate import synthetic_data, train_extrapolation_cell
from .store import (
    classification_rows_to_csv,
    read_history,
    result_fields,
    stored_run_config,
)

__all__ = [
    "KIND",
    "EXTRAPOLATE",
    "classification_kind",
    "classification_split",
    "classification_id",
    "train_grid_cell",
]


def classification_split(cell: Cell) -> str:
    """``cv`` with a fold, ``test set`` on a dataset with its own test set, else ``quick``."""
    if cell.fold is not None:
        return "cv"
    return "test set" if has_own_test(cell.data) else "quick"


def classification_id(cell: Cell, prefix: str = "") -> str:
    """``{prefix}{data}-{fold or split}-{family}-{encoding}-{number}-s{seed}``."""
    fold = f"cv{cell.fold}" if cell.fold is not None else cell.split.split()[0]
    return (
        f"{prefix}{data_slug(cell.data)}-{fold}-{cell.family}-{cell.encoding.slug}-"
        f"{cell.number}-s{cell.seed}"
    )


def outcome(row: dict[str, Any]) -> str:
    """A finished classification cell's progress line: its dev and test accuracy."""
    return f"dev {row['dev_accuracy']:.4f} test {row['test_accuracy']:.4f}"


def progress(cell: Cell, options: GridOptions, epoch: int, metrics: dict[str, Any]) -> str:
    """An epoch's progress line: the epoch of the cell's budget and the dev accuracy."""
    epochs = cell_train(cell, options).get("epochs", 10)
    return (
        f"  {cell.describe()}: epoch {epoch}/{epochs} dev "
        f"{metrics['dev_accuracy']:.4f} ({metrics['seconds']:.0f}s)"
    )


def _same_run(run_dir: str, config: Any, train: Any) -> bool:
    """Whether the run folder was trained with this cell's model config and training options
    (``cplxnet train --resume RUN --epochs N`` changes them)."""
    stored = stored_run_config(run_dir, config)
    trained = json.loads(json.dumps(dataclasses.asdict(train)))
    return stored is not None and stored.get("train") == trained


def train_grid_cell(
    cell: Cell,
    options: GridOptions,
    run_dir: str,
    callback: Callable[[int, dict], None] | None = None,
) -> dict[str, Any]:
    """Train a classification cell in ``run_dir`` and return its row fields: a run that finished
    but was not recorded is read back, one with a checkpoint resumes (except on the synthetic
    task, whose data is made in memory), each only if trained with the cell's model config and
    training options (:func:`_same_run`); anything else starts afresh."""
    from ...data import prepare_data
    from ...tasks.classify import task as engine

    config = cell_config(cell.family, cell.encoding, cell.number, options, data=cell.data)
    topts = engine.TrainOptions(**cell_train(cell, options), seed=cell.seed)
    resumed = read_back = False
    if not is_run_folder(run_dir):  # an empty leftover is removed, anything else refused
        clear_run_folder(run_dir)
    done = os.path.join(run_dir, "results.json")
    same = os.path.isdir(run_dir) and _same_run(run_dir, config, topts)  # else: afresh
    if same and os.path.exists(done):  # finished but not yet recorded (interrupted in between)
        with open(done, encoding="utf-8") as fh:
            results = json.load(fh)
        resumed = read_back = True
    elif same and os.path.exists(os.path.join(run_dir, "checkpoint.pt")) and cell.data != SYNTHETIC:
        results = engine.resume(run_dir, quiet=True, callback=callback)
        resumed = True
    else:
        clear_run_folder(run_dir)
        os.makedirs(os.path.dirname(run_dir), exist_ok=True)
        if cell.data == SYNTHETIC:
            data = synthetic_data(options, cell, bins=False)
        else:
            data = prepare_data(data_spec(cell, options), model_max_len=config.max_len)
        results = engine.train(
            config, data, run_dir, topts, vectors=options.vectors, quiet=True, callback=callback
        )
    out = result_fields(results)
    out["resumed"] = resumed
    out["read_back"] = read_back  # not part of the row (run_cell pops it)
    out["history"] = read_history(run_dir)
    return out


def classification_kind(cell_id: Callable[[Cell], str], train: Callable[..., Any]) -> CellKind:
    """A classification kind: the splits, progress lines and ``results.csv`` of this module with
    its own ids and training ``train(cell, options, run_dir, callback=...)``."""
    return CellKind(
        split=classification_split,
        cell_id=cell_id,
        train=lambda cell, options, run_dir, callback: train(
            cell, options, run_dir, callback=callback
        ),
        outcome=outcome,
        progress=progress,
        to_csv=classification_rows_to_csv,
        presets=True,
    )


#: The kind of the classification cells (``compare``).
KIND = register_kind(
    "grid",
    classification_kind(classification_id, lambda *a, **k: train_grid_cell(*a, **k)),
)
#: The kind of the length-extrapolation cells (``compare --extrapolate``).
EXTRAPOLATE = register_kind(
    "extrapolate",
    classification_kind(
        lambda cell: classification_id(cell, prefix="x-"),
        lambda *a, **k: train_extrapolation_cell(*a, **k),
    ),
)
