"""``cplxnet compare`` and ``cplxnet report`` never delete or overwrite what they did not write: a
cell's run folder holding the user's files, an ``--out`` folder that is not a comparison, a run
folder of ``cplxnet train``, a foreign file in ``cells/``, a ``report.md`` of the user's."""

from __future__ import annotations

import json
import os

import pytest

from cplxnet.cli import main

TINY = [
    "--data", "synthetic", "--families", "fasttext", "--encodings", "none", "--seeds", "1",
    "--epochs", "1", "--set", "d_model=8", "--synthetic-size", "40", "--synthetic-vocab", "5",
    "--train-len", "6", "--threads", "1", "--no-report",
]  # fmt: skip
CELL = "x-synthetic-fasttext-none-real-s0"


def _compare(out, *extra) -> int:
    return main(["compare", *TINY, *extra, "--out", str(out)])


def _cell_id(out) -> str:
    (name,) = os.listdir(out / "cells")
    return name[: -len(".json")]


def test_a_cell_run_folder_with_the_users_files_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "grid"
    assert _compare(out, "--keep-runs") == 0
    cell = _cell_id(out)
    run = out / "runs" / cell
    notes = run / "NOTES.md"
    notes.write_text("mine", encoding="utf-8")
    (run / "results.json").unlink()  # unfinished: the cell trains again from scratch
    before = sorted(os.listdir(run))
    (out / "cells" / f"{cell}.json").unlink()
    assert _compare(out) == 0
    assert notes.read_text(encoding="utf-8") == "mine"  # the user's file stays
    row = json.loads((out / "cells" / f"{cell}.json").read_text(encoding="utf-8"))
    assert row["status"] == "error"
    assert "holds files cplxnet did not write (NOTES.md)" in row["error"]
    assert sorted(os.listdir(run)) == before  # nothing deleted


def test_a_kept_run_read_back_stays(tmp_path):
    """A run kept by an earlier ``--keep-runs`` and read back (its results.json) by a command
    without the flag stays whole: that command did not train it, so it deletes nothing of it."""
    out = tmp_path / "grid"
    assert _compare(out, "--keep-runs") == 0
    cell = _cell_id(out)
    run = out / "runs" / cell
    (run / "NOTES.md").write_text("mine", encoding="utf-8")
    (out / "cells" / f"{cell}.json").unlink()  # recorded again from the kept results.json
    assert _compare(out) == 0
    row = json.loads((out / "cells" / f"{cell}.json").read_text(encoding="utf-8"))
    assert row["status"] == "ok" and row["resumed"] is True
    assert {"NOTES.md", "best.pt", "results.json", "config.json"} <= set(os.listdir(run))


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"report.md": "mine"}, "holds files cplxnet compare did not write (report.md)"),
        ({"results.csv": "a,b"}, "holds files cplxnet compare did not write (results.csv)"),
        ({"grid.json": "{}"}, "is not the budget file of a cplxnet comparison"),
        ({"config.json": json.dumps({"cplxnet_run": 1})}, "is a run folder of cplxnet train"),
    ],
)
def test_an_out_folder_that_is_not_a_comparison_is_refused_untouched(
    tmp_path, capsys, setup, message
):
    out = tmp_path / "out"
    out.mkdir()
    for name, text in setup.items():
        (out / name).write_text(text, encoding="utf-8")
    assert _compare(out) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert sorted(os.listdir(out)) == sorted(setup)
    assert all((out / n).read_text(encoding="utf-8") == t for n, t in setup.items())


def test_an_out_file_and_a_foreign_cell_file_are_one_line_errors(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine", encoding="utf-8")
    assert _compare(afile) == 1
    assert "is a file, not a folder" in capsys.readouterr().err
    out = tmp_path / "grid"
    assert _compare(out) == 0
    foreign = out / "cells" / "mine.json"
    foreign.write_text(json.dumps({"mine": True}), encoding="utf-8")
    assert _compare(out) == 1
    err = capsys.readouterr().err
    assert "mine.json is not a cell file of cplxnet compare" in err and "Traceback" not in err
    assert json.loads(foreign.read_text(encoding="utf-8")) == {"mine": True}


def test_report_never_overwrites_a_report_it_did_not_write(tmp_path, capsys):
    grid = tmp_path / "grid"
    assert _compare(grid) == 0
    target = tmp_path / "r"
    target.mkdir()
    (target / "report.md").write_text("mine", encoding="utf-8")
    assert main(["report", str(grid), "--out", str(target), "--no-plot"]) == 1
    assert "report.md is not listed as written by cplxnet report" in capsys.readouterr().err
    assert (target / "report.md").read_text(encoding="utf-8") == "mine"
    # a results file of the user's beside a report.md of the user's
    mine = tmp_path / "p"
    mine.mkdir()
    (mine / "results.json").write_text((grid / "results.json").read_text(encoding="utf-8"))
    (mine / "report.md").write_text("mine", encoding="utf-8")
    assert main(["report", str(mine / "results.json"), "--no-plot"]) == 1
    assert (mine / "report.md").read_text(encoding="utf-8") == "mine"
    # a new folder: written, and written again (its own report)
    new = tmp_path / "new"
    for _ in range(2):
        assert main(["report", str(grid), "--out", str(new), "--no-plot"]) == 0
    assert (new / "report.md").read_text(encoding="utf-8").startswith("# Encodings compared")
    # the comparison's own folder: its report is replaced
    assert main(["report", str(grid), "--no-plot"]) == 0
    assert (grid / "report.md").exists()


def test_an_out_folder_a_train_holds_is_refused(tmp_path, capsys):
    from cplxnet.engine.runs import run_lock

    out = tmp_path / "busy"
    with run_lock(str(out)):  # a train writing the run folder ``busy``
        assert _compare(out) == 1
    err = capsys.readouterr().err
    assert "is in use by cplxnet train" in err and "Traceback" not in err
    assert not out.exists()


def test_a_target_that_is_not_an_encoding_of_the_grid_is_refused(tmp_path, capsys):
    out = tmp_path / "grid"
    assert _compare(out, "--target", "bogus") == 1
    assert "--target bogus is not an encoding of this grid; give one of none" in (
        capsys.readouterr().err
    )
    assert not out.exists()
    assert _compare(out, "--target", "none") == 0
    capsys.readouterr()
    assert main(["report", str(out), "--no-plot", "--target", "bogus"]) == 1
    assert "--target bogus is not an encoding of these results; give one of none" in (
        capsys.readouterr().err
    )
    assert main(["report", str(out), "--no-plot", "--target", "none"]) == 0


def test_report_on_a_folder_with_a_foreign_cell_file_is_one_line(tmp_path, capsys):
    out = tmp_path / "cells-only"
    (out / "cells").mkdir(parents=True)
    (out / "cells" / "mine.json").write_text(json.dumps({"mine": True}), encoding="utf-8")
    assert main(["report", str(out), "--no-plot"]) == 1
    err = capsys.readouterr().err
    assert "mine.json is not a cell file of cplxnet compare" in err and "Traceback" not in err


def test_a_train_into_a_folder_a_comparison_holds_names_it(tmp_path, capsys):
    from cplxnet.compare.grid.scheduler import grid_lock

    out = tmp_path / "grid"
    out.mkdir()
    with grid_lock(str(out)):
        argv = ["train", "--model", "fasttext", "--epochs", "1", "--run-dir", str(out)]
        assert main(argv) == 1
    err = capsys.readouterr().err
    assert "is in use by another cplxnet process" in err and f"pid {os.getpid()}" in err
    assert os.listdir(out) == []  # the lock file is gone with its owner


def test_a_report_that_failed_midway_can_be_rerun(tmp_path):
    """The marker lists the report's files before any is written: what a failed report left
    (here a report.md) is replaced by the next one, and a later report lists only what exists."""
    from cplxnet.compare.report.render import REPORT_FILES, REPORT_MARKER, check_report_folder

    out = tmp_path / "r"
    out.mkdir()
    check_report_folder(str(out))
    assert set(json.loads((out / REPORT_MARKER).read_text(encoding="utf-8"))) == set(REPORT_FILES)
    (out / "report.md").write_text("half", encoding="utf-8")  # the failed report's
    grid = tmp_path / "grid"
    assert _compare(grid) == 0
    assert main(["report", str(grid), "--out", str(out), "--no-plot"]) == 0
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# Encodings compared")
    assert json.loads((out / REPORT_MARKER).read_text(encoding="utf-8")) == ["report.md"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"config.json": json.dumps({"cplxnet_run": 1})}, "is a run folder of cplxnet train"),
        (
            {".cplxnet-inspect": json.dumps(["inspect.md"]), "inspect.md": "# inspect"},
            "is an output folder of cplxnet inspect",
        ),
    ],
)
def test_report_refuses_a_run_folder_or_an_inspect_folder_untouched(
    tmp_path, capsys, setup, message
):
    """A report written into a run folder (or inspect's folder) would be files its owner did
    not write: ``train --force`` and ``inspect`` would refuse the folder from then on."""
    grid = tmp_path / "grid"
    assert _compare(grid) == 0
    target = tmp_path / "run"
    target.mkdir()
    for name, text in setup.items():
        (target / name).write_text(text, encoding="utf-8")
    assert main(["report", str(grid), "--out", str(target), "--no-plot"]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert sorted(os.listdir(target)) == sorted(setup)


def test_compare_writes_its_report_while_it_holds_the_folder(tmp_path, monkeypatch, capsys):
    """The report of ``compare`` is written before the folder's lock is released, so that another
    ``compare`` of the folder cannot start between the last cell and the report; the results
    line and the report are printed as before."""
    from cplxnet.compare.report import render as render_module
    from cplxnet.engine.folder_lock import lock_holder

    real_render = render_module.render_report
    holders = []

    def render(out, **kwargs):
        holders.append(lock_holder(os.path.join(out, ".lock")))
        return real_render(out, **kwargs)

    monkeypatch.setattr(render_module, "render_report", render)
    out = tmp_path / "grid"
    args = [a for a in TINY if a != "--no-report"]
    assert main(["compare", *args, "--out", str(out)]) == 0
    assert len(holders) == 1 and holders[0] is not None and str(os.getpid()) in holders[0]
    assert lock_holder(str(out / ".lock")) is None  # released at the end
    printed = capsys.readouterr().out
    assert printed.index("results: ") < printed.index("wrote ")
    assert (out / "report.md").is_file()


def test_no_report_when_every_run_ended_in_an_error(tmp_path, capsys):
    """No report when no run of the folder succeeded; the results line is still printed and
    the lock released."""
    out = tmp_path / "grid"
    assert _compare(out, "--keep-runs") == 0
    (name,) = os.listdir(out / "cells")
    run = out / "runs" / name[: -len(".json")]
    (run / "NOTES.md").write_text("mine", encoding="utf-8")  # the cell now ends in an error
    (run / "results.json").unlink()
    (out / "cells" / name).unlink()
    capsys.readouterr()
    args = [a for a in TINY if a != "--no-report"]
    assert main(["compare", *args, "--out", str(out)]) == 0
    row = json.loads((out / "cells" / name).read_text(encoding="utf-8"))
    assert row["status"] == "error"
    printed = capsys.readouterr().out
    assert "(1 runs, 1 errors)" in printed and "wrote " not in printed
    assert not (out / "report.md").exists() and not (out / ".lock").exists()


def test_report_into_a_comparison_a_compare_holds_is_refused(tmp_path, capsys):
    """``cplxnet report`` into a comparison folder takes the folder's lock: refused while a
    ``compare`` holds it (the compare writes its own report at the end), with ``--out`` elsewhere
    still possible; a ``compare`` is refused while a report writes."""
    from cplxnet.compare.grid.scheduler import grid_lock

    grid = tmp_path / "grid"
    assert _compare(grid) == 0
    capsys.readouterr()
    before = sorted(os.listdir(grid))
    with grid_lock(str(grid)):
        for source in (grid, grid / "results.json"):
            assert main(["report", str(source), "--no-plot"]) == 1
            err = capsys.readouterr().err
            assert "is in use by another cplxnet compare" in err and "give --out" in err
            assert "Traceback" not in err and err.count("\n") == 1
        assert sorted(os.listdir(grid)) == sorted([*before, ".lock"])
        assert main(["report", str(grid), "--out", str(tmp_path / "now"), "--no-plot"]) == 0
        assert main(["report", str(grid / "missing.json"), "--no-plot"]) == 1
        err = capsys.readouterr().err
        assert "missing.json" in err and "in use" not in err  # not found, not the lock
    assert (tmp_path / "now" / "report.md").exists()
    assert main(["report", str(grid), "--no-plot"]) == 0
    assert not (grid / ".lock").exists()  # released

    held = []

    def render(*args, **kwargs):  # a compare started while the report writes
        held.append(_compare(grid))
        return "", []

    import cplxnet.compare.report.render as render_module

    original = render_module.render_report
    render_module.render_report = render
    try:
        assert main(["report", str(grid), "--no-plot"]) == 0
    finally:
        render_module.render_report = original
    assert held == [1]
    assert "is in use by another cplxnet report" in capsys.readouterr().err


def test_report_of_other_results_into_a_held_comparison_is_refused(tmp_path, capsys):
    """``--out`` naming a comparison folder a compare holds is refused as the folder itself is,
    whatever results the report reads; nothing is written into it."""
    from cplxnet.compare.grid.scheduler import grid_lock

    grid, other = tmp_path / "grid", tmp_path / "other"
    assert _compare(grid) == 0
    other.mkdir()
    text = (grid / "results.json").read_text(encoding="utf-8")
    (other / "results.json").write_text(text, encoding="utf-8")
    capsys.readouterr()
    before = sorted(os.listdir(grid))
    with grid_lock(str(grid)):
        assert main(["report", str(other), "--out", str(grid), "--no-plot"]) == 1
        err = capsys.readouterr().err
        assert "is in use by another cplxnet compare" in err and err.count("\n") == 1
        assert sorted(os.listdir(grid)) == sorted([*before, ".lock"])


def test_cmd_report_itself_refuses_a_held_folder_in_one_line(tmp_path, capsys):
    """``cmd_report`` (not only ``main``) turns the lock's refusal into its one-line failure."""
    import argparse

    from cplxnet.cli.report import add_report_command, cmd_report
    from cplxnet.compare.grid.scheduler import grid_lock

    grid = tmp_path / "grid"
    assert _compare(grid) == 0
    capsys.readouterr()
    parser = argparse.ArgumentParser()
    add_report_command(parser.add_subparsers())
    args = parser.parse_args(["report", str(grid), "--no-plot"])
    with grid_lock(str(grid)):
        assert cmd_report(args) == 1
    err = capsys.readouterr().err
    assert "is in use by another cplxnet compare" in err and err.count("\n") == 1
