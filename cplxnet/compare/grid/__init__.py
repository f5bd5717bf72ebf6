"""The grid wing of ``cplxnet compare``: datasets x folds x families x encodings x number fields
x seeds, every cell trained with the same budget, results stored one file per cell so a grid can
be interrupted and continued, and run in parallel processes or on a Dask cluster
(:mod:`~cplxnet.compare.grid.executors`).

This package gathers the public names of the grid's parts:

* :mod:`~cplxnet.compare.grid.cells`: the budget (:class:`GridOptions`), the per-cell presets,
  the cells, the registry of cell kinds (:class:`CellKind`) and the parsing of the axes;
  :mod:`~cplxnet.compare.grid.expand`: a cell's model config and the expansion of the axes into
  cells (:func:`expand_grid`);
* the kinds: :mod:`~cplxnet.compare.grid.classify` (``grid`` and ``extrapolate``, whose data
  and training are :mod:`~cplxnet.compare.grid.extrapolate`) and :mod:`~cplxnet.compare.grid.lm`
  (``lm``), imported here so that :data:`CELL_KINDS` holds them all;
* :mod:`~cplxnet.compare.grid.store`: the output folder (:class:`ResultStore`, its layout), the
  result rows and ``results.csv``;
* :mod:`~cplxnet.compare.grid.runner`: one cell trained and recorded (:func:`run_cell`), also in
  a worker process (:mod:`~cplxnet.compare.grid.worker`);
* :mod:`~cplxnet.compare.grid.scheduler`: :func:`run_grid`, with
  :mod:`~cplxnet.compare.grid.local` (this machine) and :mod:`~cplxnet.compare.grid.progress`
  (the ETA).
"""

from __future__ import annotations

from . import classify, lm  # noqa: F401  (each registers its cell kinds)
from .cells import (
    CELL_KINDS,
    PRESET_NUMBERS,
    REAL_WIDTHS,
    SYNTHETIC,
    Cell,
    CellKind,
    CompareError,
    GridOptions,
    cell_kind,
    cell_preset,
    cell_train,
    has_own_test,
    parse_folds,
    parse_presets,
    parse_seeds,
    parse_sets,
    register_kind,
)
from .executors import DaskExecutor, LocalExecutor
from .expand import cell_config, check_combination, expand_grid
from .local import default_threads
from .runner import run_cell
from .scheduler import run_grid
from .store import BIN_COLUMNS, FORMAT, RESULT_COLUMNS, ResultStore, rows_to_csv

__all__ = [
    "Cell",
    "GridOptions",
    "CompareError",
    "expand_grid",
    "check_combination",
    "cell_config",
    "run_cell",
    "run_grid",
    "ResultStore",
    "RESULT_COLUMNS",
    "CellKind",
    "CELL_KINDS",
    "cell_kind",
    "register_kind",
    "DaskExecutor",
    "LocalExecutor",
    "parse_folds",
    "parse_seeds",
    "parse_sets",
    "parse_presets",
    "cell_preset",
    "cell_train",
    "FORMAT",
    "REAL_WIDTHS",
    "SYNTHETIC",
    "BIN_COLUMNS",
    "PRESET_NUMBERS",
    "has_own_test",
    "rows_to_csv",
    "default_threads",
]
