"""``cplxnet compare --executor dask``: the same rows as the local executor, a killed worker's cell
run again (or recorded as failed), Ctrl-C leaving the folder resumable, data files checked or
shipped. Tiny grids on a 2-worker ``LocalCluster`` of single-threaded processes."""

from __future__ import annotations

import json
import os

import pytest
from compare_helpers import tiny_options

distributed = pytest.importorskip(
    "distributed",
    reason='the Dask executor tests need dask[distributed]: pip install -e ".[dev]"',
)

import cplxnet.compare.grid.dask_tasks as dask_tasks  # noqa: E402
from cplxnet.cli import main  # noqa: E402
from cplxnet.compare import (  # noqa: E402
    CompareError,
    expand_grid,
    parse_encodings,
    parse_numbers,
    render_report,
    run_grid,
)
from cplxnet.compare.grid.executors import DaskExecutor  # noqa: E402

# A Dask cluster that loses its workers for good would otherwise wait forever: fail instead.
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]  # a local Dask cluster per test

KEYS = ("cell_id", "status", "dev_accuracy", "test_accuracy", "parameters", "best_epoch")


@pytest.fixture(scope="module")
def scheduler():
    """A running 2-worker cluster (as a `dask scheduler` with two `dask worker --nthreads 1`);
    a worker that dies fails its task at once, so the client's retries are what is tested."""
    import logging

    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
        )
    yield cluster.scheduler_address
    cluster.close()


def _cells(options, data=("synthetic",), encodings="none,complex-order", seeds=(0,)):
    cells, _ = expand_grid(
        list(data),
        ["fasttext"],
        parse_encodings(encodings),
        parse_numbers("natural"),
        list(seeds),
        [None],
        options,
    )
    return cells


def _rows(rows):
    return [[r[k] for k in KEYS] for r in rows]


def test_local_and_dask_cluster_give_the_same_rows(tmp_path, capsys, length_tsv):
    """The CLI on both executors (dask: a LocalCluster of 2 worker processes started for the
    grid): the same accuracies; the user file shipped to the workers with the tasks."""
    common = [
        "compare", "--data", f"synthetic,{length_tsv}", "--families", "fasttext",
        "--encodings", "none,complex-order", "--seeds", "1", "--epochs", "1", "--set",
        "d_model=8", "--synthetic-size", "40", "--synthetic-vocab", "5", "--train-len", "6",
        "--limit", "30", "--threads", "1", "--no-report",
    ]  # fmt: skip
    local, remote = str(tmp_path / "local"), str(tmp_path / "dask")
    assert main([*common, "--out", local]) == 0
    capsys.readouterr()
    argv = [*common, "--out", remote, "--executor", "dask", "--jobs", "2", "--data-files", "ship"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "4 to run on a Dask LocalCluster of 2 worker process(es)" in printed
    assert "[4/4] " in printed and "dask: 4 cell(s) done, 0 failed" in printed
    with open(os.path.join(local, "results.json"), encoding="utf-8") as fh:
        one = json.load(fh)["rows"]
    with open(os.path.join(remote, "results.json"), encoding="utf-8") as fh:
        two = json.load(fh)["rows"]
    assert len(one) == 4 and all(r["status"] == "ok" for r in one)
    assert _rows(one) == _rows(two)
    assert {r["data"] for r in two} == {"synthetic", length_tsv}
    assert all(r["worker"].startswith("tcp://") for r in two)
    assert not os.path.exists(os.path.join(remote, "runs", two[0]["cell_id"]))
    assert main(argv) == 0  # resumes: nothing to run
    assert "4 already done; 0 to run" in capsys.readouterr().out


def test_killed_workers_rerun_the_cell_or_record_it_failed(tmp_path, options, scheduler):
    """A cell's worker dies once: the cell runs again and gives the row of a local run. With
    ``retries=0`` a cell whose worker dies is recorded as failed with the reason, the grid goes
    on, the report lists it, and ``retry_errors`` runs it again."""
    cells = _cells(options)
    logs: list[str] = []
    ex = DaskExecutor(scheduler, retries=1, kill_worker={cells[1].cell_id: 1})
    rows = run_grid(cells, str(tmp_path / "a"), options, executor=ex, log=logs.append,
                    heartbeat=0.0)  # fmt: skip
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert f"{cells[1].describe()}: its worker died; running it again (attempt 2 of 2)" in logs
    assert sum("its worker died" in m for m in logs) == 1
    assert "dask: 2 cell(s) done, 0 failed, 1 run again after a worker died" in logs
    status = [m for m in logs if m.startswith("running: ") and " worker(s), ETA " in m]
    assert any(" seed " in m and "epoch(s) done)" in m for m in status)  # a cell seen running
    alone = run_grid([cells[1]], str(tmp_path / "local"), options, threads=1, log=lambda m: None)
    assert _rows(alone) == _rows([rows[1]])

    out = str(tmp_path / "b")
    logs.clear()
    ex = DaskExecutor(scheduler, retries=0, kill_worker={cells[0].cell_id: 1})
    rows = run_grid(cells, out, options, executor=ex, log=logs.append)
    assert [r["status"] for r in rows] == ["error", "ok"]
    assert rows[0]["error"].startswith("the worker running this cell died 1 time(s)")
    assert any(m.startswith("[") and ", 1 failed] " + cells[0].describe() in m for m in logs)
    assert "dask: 1 cell(s) done, 1 failed, 0 run again after a worker died" in logs
    text, _ = render_report(out, plots=False)
    assert "## Runs that failed (1)" in text and "died 1 time(s)" in text
    rows = run_grid(cells, out, options, executor=DaskExecutor(scheduler), retry_errors=True,
                    log=logs.append)  # fmt: skip
    assert [r["status"] for r in rows] == ["ok", "ok"]


def test_ctrl_c_cancels_the_cells_and_leaves_the_folder_resumable(tmp_path, options, scheduler):
    cells = _cells(options, seeds=(0, 1))
    out = str(tmp_path / "out")
    logs: list[str] = []

    def log(message: str) -> None:
        logs.append(message)
        if message.startswith("[1/4]"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_grid(cells, out, options, executor=DaskExecutor(scheduler), log=log)
    assert any(m.startswith("dask: cancelled 3 submitted cell(s)") for m in logs)
    assert len(os.listdir(os.path.join(out, "cells"))) == 1
    assert not os.path.exists(os.path.join(out, ".lock"))
    logs.clear()
    rows = run_grid(cells, out, options, executor=DaskExecutor(scheduler), log=logs.append)
    assert "1 already done; 3 to run" in logs[0]
    assert [r["status"] for r in rows] == ["ok"] * 4


def test_shared_data_file_is_checked_and_run_folders_come_back(
    tmp_path, options, scheduler, length_tsv, monkeypatch
):
    """``--data-files shared``: the workers read the path; a copy that differs from the
    client's (here: the client's SHA-256 faked) fails the cell with the reason. With keep_runs
    the client writes the run folder the worker sent back."""
    opts = tiny_options(data={"limit": 30})
    cells = _cells(opts, data=(length_tsv,), encodings="none")
    out = str(tmp_path / "out")
    (row,) = run_grid(cells, out, opts, executor=DaskExecutor(scheduler), keep_runs=True,
                      log=lambda m: None)  # fmt: skip
    assert row["status"] == "ok", row["error"]
    run_dir = os.path.join(out, "runs", cells[0].cell_id)
    assert os.path.exists(os.path.join(run_dir, "results.json"))
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as fh:
        assert json.load(fh)["test_accuracy"] == row["test_accuracy"]
    monkeypatch.setattr(dask_tasks, "sha256_file", lambda path: "0" * 64)
    (row,) = run_grid(cells, str(tmp_path / "other"), opts,
                      executor=DaskExecutor(scheduler, retries=0), log=lambda m: None)  # fmt: skip
    assert row["status"] == "error"
    assert row["error"].startswith(f"DataFileError: {length_tsv} on worker tcp://")
    assert "differs from the client's copy" in row["error"] and "--data-files ship" in row["error"]


def test_local_path_checks_reads_or_writes_the_data_file(tmp_path, length_tsv):
    with open(length_tsv, "rb") as fh:
        content = fh.read()
    sha = dask_tasks.sha256_bytes(content)
    scratch = str(tmp_path / "scratch")
    shared = {length_tsv: {"path": length_tsv, "sha256": sha}}
    assert dask_tasks.local_path(length_tsv, shared, scratch, "w") == length_tsv
    assert dask_tasks.local_path("mr", shared, scratch, "w") == "mr"
    other = {length_tsv: {"path": length_tsv, "sha256": "f" * 64}}
    with pytest.raises(dask_tasks.DataFileError, match="differs from the client's copy"):
        dask_tasks.local_path(length_tsv, other, scratch, "w")
    gone = {"x.tsv": {"path": str(tmp_path / "gone.tsv"), "sha256": sha}}
    with pytest.raises(dask_tasks.DataFileError, match="cannot be read on worker w"):
        dask_tasks.local_path("x.tsv", gone, scratch, "w")
    shipped = {length_tsv: {"path": length_tsv, "sha256": sha, "content": content}}
    local = dask_tasks.local_path(length_tsv, shipped, scratch, "w")
    assert local.startswith(scratch) and os.path.basename(local) == "lengths.tsv"
    with open(local, "rb") as fh:
        assert fh.read() == content
    refs, contents = dask_tasks.data_refs(
        _cells(tiny_options(), data=(length_tsv, "synthetic"), encodings="none"),
        tiny_options(),
        "ship",
    )
    assert list(refs) == [length_tsv] and contents == {length_tsv: content}
    assert refs[length_tsv]["sha256"] == sha
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("w1 0.5 0.25\n", encoding="utf-8")
    with_vectors = tiny_options(vectors=str(vectors))
    refs, contents = dask_tasks.data_refs(_cells(with_vectors), with_vectors, "shared")
    assert refs == {str(vectors): {"path": str(vectors), "sha256": dask_tasks.sha256_file(
        str(vectors))}} and contents == {}  # fmt: skip


def test_unreachable_scheduler_is_a_compare_error(tmp_path, options):
    ex = DaskExecutor("tcp://127.0.0.1:9", connect_timeout=0.5)
    with pytest.raises(CompareError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        run_grid(_cells(options), str(tmp_path / "out"), options, executor=ex, log=lambda m: None)
    assert not os.path.exists(os.path.join(str(tmp_path / "out"), ".lock"))
