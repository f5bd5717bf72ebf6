"""The registry of cell kinds: every mode of a grid (classification, length extrapolation,
language model) is one :class:`CellKind` of ``CELL_KINDS``, and its ids, splits, presets and
``results.csv`` layout come from there."""

from __future__ import annotations

import pytest

from cplxnet.compare import Cell, CompareError, parse_encoding
from cplxnet.compare.grid import CELL_KINDS, cell_kind, rows_to_csv
from cplxnet.compare.grid.lm import LM_COLUMNS
from cplxnet.compare.grid.store import RESULT_COLUMNS


def _cell(mode: str, data: str = "mr", fold: int | None = None) -> Cell:
    return Cell(data, fold, "cnn", parse_encoding("rotary"), "complex", 0, mode)


def test_every_mode_is_a_registered_kind():
    assert set(CELL_KINDS) == {"grid", "extrapolate", "lm"}
    assert [cell_kind(m).presets for m in ("grid", "extrapolate", "lm")] == [True, True, False]
    with pytest.raises(CompareError, match="unknown cell mode 'other'"):
        cell_kind("other")


def test_each_kind_names_its_cells_apart():
    grid, extrapolate = _cell("grid"), _cell("extrapolate")
    assert grid.cell_id == "mr-quick-cnn-rotary-complex-s0"
    assert extrapolate.cell_id == "x-" + grid.cell_id
    assert _cell("lm").cell_id.startswith("lm-mr-cnn-rotary-complex-s0")
    assert [grid.split, _cell("grid", fold=2).split, _cell("grid", "trec").split] == [
        "quick",
        "cv",
        "test set",
    ]
    assert _cell("grid", fold=2).cell_id == "mr-cv2-cnn-rotary-complex-s0"
    assert _cell("lm").split == "stream"


def test_results_csv_takes_the_layout_of_the_rows_kind():
    grid = {"mode": "grid", "cell_id": "a", "test_accuracy": 0.5}
    lm = {"mode": "lm", "cell_id": "b", "test": {"64": {"bpc": 2.0}}, "metric": "bpc"}
    assert rows_to_csv([grid]).splitlines()[0] == ",".join(RESULT_COLUMNS)
    assert rows_to_csv([{**grid, "mode": None}]).splitlines()[0] == ",".join(RESULT_COLUMNS)
    for rows in ([lm], [grid, lm], [lm, grid]):  # a language model's rows set the layout
        assert rows_to_csv(rows).splitlines()[0] == ",".join(LM_COLUMNS)
