"""``cplxnet report`` on a comparison folder that was damaged or edited by hand: the cell files
are the results (``results.json`` only orders them), and a file it cannot read is refused in one
line that names it, with nothing written."""

from __future__ import annotations

import json
import os

import pytest

from cplxnet.cli import main
from cplxnet.compare.grid.store import FORMAT


def _cell(encoding: str, seed: int, bpc: float) -> dict:
    test = {str(n): {"bpc": bpc + i / 10} for i, n in enumerate((64, 128, 256, 512))}
    return {"cell_id": f"lm-mr-decoder-{encoding}-real-s{seed}", "mode": "lm", "data": "mr",
            "encoding": encoding, "number": "real", "seed": seed, "metric": "bpc",
            "test": test, "status": "ok", "train_seconds": 10.0}  # fmt: skip


def _grid(folder, cells, listed=None) -> None:
    """A comparison folder: grid.json, the cell files, and a results.json listing ``listed``."""
    (folder / "cells").mkdir(parents=True)
    grid = {"format": FORMAT, "options": {"lm": {"context": 64}}}
    (folder / "grid.json").write_text(json.dumps(grid), encoding="utf-8")
    for c in cells:
        (folder / "cells" / f"{c['cell_id']}.json").write_text(json.dumps(c), encoding="utf-8")
    if listed is not None:
        rows = {"format": FORMAT, "grid": grid["options"], "rows": listed}
        (folder / "results.json").write_text(json.dumps(rows), encoding="utf-8")


def _report(folder, capsys) -> tuple[int, str]:
    code = main(["report", str(folder), "--no-plot"])
    return code, capsys.readouterr().err


CELLS = [_cell("alibi", 0, 2.0), _cell("alibi", 1, 2.2), _cell("none", 0, 2.5)]


def test_a_cell_newer_than_results_json_is_reported(tmp_path, capsys):
    """results.json is written at the end of a grid; a cell added or changed since then is in
    the report, and the rows keep results.json's order."""
    changed = {**CELLS[0], "test": {**CELLS[0]["test"], "64": {"bpc": 1.5}}}
    _grid(tmp_path, [changed, *CELLS[1:]], listed=[CELLS[2], CELLS[0]])
    assert _report(tmp_path, capsys)[0] == 0
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    rows = [x for x in text.splitlines() if x.startswith(("| alibi", "| none"))]
    assert rows[0].startswith("| none |") and rows[1].startswith("| alibi |")  # listed order
    assert rows[1].split(" | ")[1] == "**1.850 ± 0.495**"  # the changed cell, and seed 1


def test_a_cell_results_json_lists_but_cells_lacks_is_not_reported(tmp_path, capsys):
    _grid(tmp_path, CELLS[:2], listed=CELLS)
    assert _report(tmp_path, capsys)[0] == 0
    assert "| none |" not in (tmp_path / "report.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: (f / "cells" / f"{CELLS[1]['cell_id']}.json").write_text('{"cell_id": "lm'),
         f"{CELLS[1]['cell_id']}.json cannot be read (Unterminated string"),
        (lambda f: (f / "grid.json").write_text("{\n"), "grid.json is not valid JSON"),
        (lambda f: (f / "grid.json").write_text("[1]"),
         "grid.json is not the grid.json of cplxnet compare"),
        (lambda f: (f / "cells" / f"{CELLS[0]['cell_id']}.json").write_text(
            json.dumps({**CELLS[0], "seed": None})),
         f"the result of {CELLS[0]['cell_id']} has no integer seed (None)"),
    ],
)  # fmt: skip
def test_a_damaged_file_is_one_line_that_names_it(tmp_path, capsys, damage, message):
    _grid(tmp_path, CELLS)
    damage(tmp_path)
    before = sorted(os.listdir(tmp_path))
    code, err = _report(tmp_path, capsys)
    assert code == 1 and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == before  # no report written


def test_a_folder_with_only_results_csv_points_at_it(tmp_path, capsys):
    (tmp_path / "results.csv").write_text("cell_id\n", encoding="utf-8")
    code, err = _report(tmp_path, capsys)
    assert code == 1 and "has no results.json or cells/*.json" in err
    assert "or a results.json or results.csv" in err


def test_a_comparison_with_no_finished_cell_says_so(tmp_path, capsys):
    """A grid stopped before its first cell finished: its folder is named as a comparison."""
    (tmp_path / "grid.json").write_text('{"format": "cplxnet-compare-1", "options": {}}')
    (tmp_path / "cells").mkdir()
    code, err = _report(tmp_path, capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"{tmp_path} is a comparison with no finished cell yet; run its compare command " in err
    assert sorted(os.listdir(tmp_path)) == ["cells", "grid.json"]


def test_a_report_it_cannot_write_names_the_fix(tmp_path, capsys, monkeypatch):
    import cplxnet.compare.report.lm_report as lm_report

    def refuse(out_dir, parts, written):
        raise PermissionError(13, "Permission denied", os.path.join(out_dir, "report.md"))

    _grid(tmp_path, CELLS)
    monkeypatch.setattr(lm_report, "write_report", refuse)
    code, err = _report(tmp_path, capsys)
    assert code == 1 and "report.md: permission denied; give --out a folder you can write" in err
