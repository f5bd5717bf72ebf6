"""Running a comparison again into its folder: a run an earlier worker still holds, a data file
changed in between, a damaged ``grid.json``, a budget no cell was trained on yet, a report sent
into another comparison's folder. Each is refused in one line (or, where nothing was trained,
allowed) and nothing of the folder is lost."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from test_compare_ownership import TINY

from cplxnet.cli import main
from cplxnet.engine import runs


def _compare(out, *extra, data: str = "synthetic") -> int:
    args = [*TINY, *extra, "--out", str(out)]
    args[args.index("--data") + 1] = data
    return main(["compare", *args])


def _snapshot(folder) -> dict[str, bytes]:
    return {
        os.path.relpath(os.path.join(root, name), folder): _read(os.path.join(root, name))
        for root, _, names in os.walk(folder)
        for name in names
    }


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    return err


def test_a_run_another_process_holds_stops_the_grid_before_it_writes(tmp_path, capsys):
    out = tmp_path / "grid"
    assert _compare(out, "--seeds", "2") == 0
    (cell,) = [n[:-5] for n in os.listdir(out / "cells") if n.endswith("-s1.json")]
    (out / "cells" / f"{cell}.json").unlink()  # the cell is to run again
    before = _snapshot(out)
    with runs.run_lock(str(out / "runs" / cell)):  # as a worker of a killed compare holds it
        assert _compare(out, "--seeds", "2") == 1
    err = _err(capsys)
    assert f"seed 1 in {out / 'runs'} is still in use (pid {os.getpid()}" in err, err
    assert "wait for it to end (or end it), then run the command again" in err
    assert _snapshot(out) == before
    assert _compare(out, "--seeds", "2") == 0  # free again: the cell runs
    assert (out / "cells" / f"{cell}.json").exists()


def test_a_data_file_changed_between_runs_is_refused(tmp_path, capsys, length_tsv):
    out = tmp_path / "grid"
    assert _compare(out, "--families", "fasttext", data=length_tsv) == 0
    grid = json.loads((out / "grid.json").read_text(encoding="utf-8"))
    original = _read(length_tsv)
    assert grid["data_sha256"] == {length_tsv: hashlib.sha256(original).hexdigest()}
    with open(length_tsv, "ab") as fh:
        fh.write(b"a\tw1 w2\n")
    before = _snapshot(out)
    assert _compare(out, "--seeds", "2", data=length_tsv) == 1  # a new seed on the new file
    err = _err(capsys)
    assert f"{length_tsv} changed since {out} first read it" in err
    assert "restore the file, or compare on the changed one in another --out" in err
    assert _snapshot(out) == before
    with open(length_tsv, "wb") as fh:
        fh.write(original)
    assert _compare(out, "--seeds", "2", data=length_tsv) == 0


@pytest.mark.parametrize(
    "options", [[1], {"train": 5}, {"data": "x"}], ids=["a-list", "train-a-number", "data-a-str"]
)
def test_a_damaged_grid_json_is_one_line(tmp_path, capsys, options):
    out = tmp_path / "grid"
    assert _compare(out) == 0
    grid = out / "grid.json"
    grid.write_text(json.dumps({"format": "cplxnet-compare-1", "options": options}))
    before = _snapshot(out)
    assert _compare(out) == 1
    err = _err(capsys)
    assert f"{grid} is damaged (its options: " in err and "restore it" in err, err
    assert _snapshot(out) == before


def test_a_budget_no_cell_was_trained_on_is_replaced(tmp_path, capsys):
    """A compare that failed before its first cell (a wrong option found late) leaves its
    grid.json; the corrected command is not held to it."""
    out = tmp_path / "grid"
    out.mkdir()
    (out / "grid.json").write_text(json.dumps({"format": "cplxnet-compare-1",
                                               "options": {"train": {"epochs": 7}}}))  # fmt: skip
    assert _compare(out) == 0
    assert json.loads((out / "grid.json").read_text())["options"]["train"]["epochs"] == 1
    assert _compare(out, "--epochs", "2") == 1  # now a cell ran: the budget is fixed
    assert "holds a grid run with other options (train.epochs: was 1, now 2)" in _err(capsys)


def test_report_refuses_another_comparison_s_folder(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    assert _compare(first) == 0 and _compare(second) == 0
    assert main(["report", str(second), "--no-plot"]) == 0
    capsys.readouterr()
    report = (second / "report.md").read_bytes()
    assert main(["report", str(first), "--out", str(second), "--no-plot"]) == 1
    err = _err(capsys)
    assert f"{second} is the folder of another comparison, whose report it holds" in err
    assert (second / "report.md").read_bytes() == report
    results = first / "results.json"
    assert main(["report", str(results), "--out", str(first), "--no-plot"]) == 0  # its own
    assert main(["report", str(first), "--out", str(first), "--no-plot"]) == 0


@pytest.mark.parametrize(
    ("content", "problem"),
    [({}, "no 'mode'"), ({"encoding": ["none"]}, "'encoding' is ['none']"),
     ({"status": 5}, "'status' is 5, not 'ok' or 'error'")],
)  # fmt: skip
def test_a_cell_file_edited_into_nonsense(tmp_path, capsys, content, problem):
    """Valid JSON that is no longer a row: ``report`` names the file; ``compare`` trains the
    cell again instead of counting it as done."""
    out = tmp_path / "grid"
    assert _compare(out) == 0
    (name,) = os.listdir(out / "cells")
    path = out / "cells" / name
    row = json.loads(path.read_text(encoding="utf-8"))
    damaged = {**row, **content} if content else {"cell_id": row["cell_id"]}
    path.write_text(json.dumps(damaged), encoding="utf-8")
    assert main(["report", str(out), "--no-plot"]) == 1
    err = _err(capsys)
    assert f"{path} is damaged ({problem}); restore it, or move it away" in err, err
    assert _compare(out) == 0
    assert "0 already done; 1 to run" in capsys.readouterr().out
    assert json.loads(path.read_text(encoding="utf-8"))["status"] == "ok"


def test_the_recorded_data_hashes_outlive_a_new_preset(tmp_path, length_tsv):
    """grid.json is rewritten when a later command adds a preset; the hashes stay in it, so a
    file changed meanwhile is still refused."""
    from compare_helpers import tiny_options

    from cplxnet.compare.grid import parse_presets
    from cplxnet.compare.grid.cells import Cell, CompareError
    from cplxnet.compare.grid.store import ResultStore
    from cplxnet.encodings.specs import parse_encoding

    store = ResultStore(str(tmp_path / "grid"))
    cells = [Cell(length_tsv, None, "cnn", parse_encoding("none"), "real", 0)]
    store.check_options(
        tiny_options(train={}, presets=parse_presets([f"{length_tsv}:cnn=kim-cnn"]))
    )
    store.check_data(cells, tiny_options())
    (tmp_path / "grid" / "runs" / "a-cell").mkdir(parents=True)  # a cell ran
    with open(length_tsv, "ab") as fh:
        fh.write(b"a\tw1 w2\n")
    both = parse_presets([f"{length_tsv}:cnn=kim-cnn", "trec:cnn=kim-cnn"])
    store.check_options(tiny_options(train={}, presets=both))  # grid.json rewritten
    assert "data_sha256" in json.loads((tmp_path / "grid" / "grid.json").read_text())
    with pytest.raises(CompareError, match="changed since .* first read it"):
        store.check_data(cells, tiny_options())


@pytest.mark.parametrize("value", [["x"], {"f": 5}])
def test_a_damaged_data_hash_record_is_one_line(tmp_path, capsys, value):
    out = tmp_path / "grid"
    assert _compare(out) == 0
    grid = json.loads((out / "grid.json").read_text())
    (out / "grid.json").write_text(json.dumps({**grid, "data_sha256": value}))
    assert _compare(out) == 1
    assert "is damaged (its data_sha256 is not a mapping of file to hash)" in _err(capsys)


def test_a_grid_of_the_other_task_in_the_folder_is_one_line(tmp_path, capsys):
    """A language-model grid run into a classification grid's folder, and the other way round,
    is refused naming both kinds (not a diff of every option), and the folder is unchanged."""
    from test_compare_lm import TINY_MODEL

    lm = ["compare", "--task", "lm", "--data", "synthetic:copy", "--encodings", "none",
          "--seeds", "1", "--steps", "2", "--eval-every", "2", "--context", "8",
          "--batch-size", "4", "--threads", "1", "--no-report", *TINY_MODEL]  # fmt: skip
    classify, language = tmp_path / "classify", tmp_path / "lm"
    assert _compare(classify) == 0 and main([*lm, "--out", str(language)]) == 0
    for folder, kind, command in ((classify, "a classification grid", lm),
                                  (language, "a language-model grid (--task lm)",
                                   ["compare", *TINY]),):  # fmt: skip
        before = _snapshot(folder)
        assert main([*command, "--out", str(folder)]) == 1
        err = _err(capsys)
        assert f"{folder} holds {kind}, and this command runs a " in err, err
        assert err.rstrip().endswith("; give it another --out") and "was " not in err
        assert _snapshot(folder) == before
