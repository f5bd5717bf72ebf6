"""The scheduler and the runner without training: how many worker processes run at once, the
torch threads per cell, the ETA, the stale lock of a process that is gone, a retried cell's old
result, and the run folder a failed cell keeps."""

from __future__ import annotations

import io
import os
import subprocess

import pytest
from compare_helpers import tiny_options

from cplxnet.compare import CompareError, expand_grid, parse_encodings, parse_numbers, run_grid
from cplxnet.compare.grid.local import default_threads
from cplxnet.compare.grid.progress import Eta, fmt_duration


def _cells(options, encodings="none,complex-order,sinusoidal,complex-vanilla,trainable"):
    cells, _ = expand_grid(
        ["synthetic"], ["fasttext"], parse_encodings(encodings), parse_numbers("natural"),
        [0], [None], options,
    )  # fmt: skip
    return cells


class _FakeWorker:
    """A worker process that ends after two polls with status ``code`` without writing a
    result."""

    code = 3
    live: set[int] = set()
    most = 0
    started: list[list[str]] = []
    envs: list[dict] = []

    def __init__(self, cmd, stdin=None, stdout=None, stderr=None, env=None):
        assert stdin is subprocess.PIPE  # the worker's line to its parent (--watch-stdin)
        self.stdin = io.BytesIO()
        type(self).started.append(cmd)
        type(self).envs.append(env)
        type(self).live.add(id(self))
        type(self).most = max(type(self).most, len(type(self).live))
        self.polls = 0
        self.returncode = None

    def poll(self):
        self.polls += 1
        if self.polls >= 2:
            self.returncode = type(self).code
            type(self).live.discard(id(self))
        return self.returncode


def _fake_workers(monkeypatch, code: int) -> None:
    _FakeWorker.live, _FakeWorker.most, _FakeWorker.started, _FakeWorker.envs = set(), 0, [], []
    _FakeWorker.code = code
    monkeypatch.setattr(subprocess, "Popen", _FakeWorker)


@pytest.mark.parametrize("jobs", [2, 3])
def test_at_most_jobs_worker_processes_run_at_once(tmp_path, monkeypatch, jobs):
    _fake_workers(monkeypatch, 3)
    options = tiny_options()
    cells = _cells(options)
    rows = run_grid(
        cells, str(tmp_path / "out"), options, jobs=jobs, threads=1, log=lambda m: None,
        heartbeat=1e9,
    )  # fmt: skip
    assert _FakeWorker.most == jobs
    assert len(_FakeWorker.started) == len(cells) == len(rows)
    assert all(r["status"] == "error" for r in rows)
    assert {e["OMP_NUM_THREADS"] for e in _FakeWorker.envs} == {"1"}


def test_default_threads_share_the_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert [default_threads(j) for j in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert default_threads(4) == 1


def test_eta_from_the_cells_of_the_same_family(options):
    cells = _cells(options, "none,complex-order")
    eta = Eta([{"status": "ok", "family": "fasttext", "mode": "grid", "seconds": 10.0},
               {"status": "ok", "family": "fasttext", "mode": "grid", "seconds": 20.0},
               {"status": "error", "family": "fasttext", "mode": "grid", "seconds": 99.0},
               {"status": "ok", "family": "cnn", "mode": "grid", "seconds": 100.0}])  # fmt: skip
    assert eta.estimate(cells[0]) == 15.0
    assert eta.remaining(cells, {}, 1) == 30.0
    assert eta.remaining(cells, {}, 2) == 15.0
    assert Eta([]).remaining(cells, {}, 1) is None
    assert [fmt_duration(s) for s in (59.4, 61, 3725)] == ["59s", "1m01s", "1h02m"]


def test_a_live_lock_refuses_and_a_stale_lock_is_taken_over(tmp_path, options):
    out = tmp_path / "out"
    out.mkdir()
    lock = out / ".lock"
    lock.write_text(str(os.getpid()))  # a live process holds the folder
    with pytest.raises(CompareError, match="in use by another cplxnet compare"):
        run_grid([], str(out), options, log=lambda m: None)
    assert lock.exists()
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock.write_text(str(dead.pid))  # a process that is gone
    assert run_grid([], str(out), options, log=lambda m: None) == []
    assert not lock.exists()


def test_a_retried_cell_loses_its_old_result_before_it_runs(tmp_path, monkeypatch, options):
    """--retry-errors removes a cell's error row before the cell runs again: a retry that is
    interrupted leaves the cell to run next time, not its old error."""
    out = str(tmp_path / "out")
    cells = _cells(options, "none,complex-order")
    _fake_workers(monkeypatch, 3)
    first = run_grid(cells, out, options, jobs=2, threads=1, log=lambda m: None, heartbeat=1e9)
    assert [r["status"] for r in first] == ["error", "error"]
    _fake_workers(monkeypatch, 130)  # the retry is interrupted (Ctrl-C)
    logs: list[str] = []
    again = run_grid(
        cells, out, options, jobs=2, threads=1, retry_errors=True, log=logs.append, heartbeat=1e9
    )
    assert again == [] and sum("it runs again next time" in m for m in logs) == 2
    assert not os.listdir(os.path.join(out, "cells"))


def test_a_failed_cell_keeps_its_run_folder(tmp_path, monkeypatch, options):
    """A cell that fails keeps its run folder (a checkpoint to resume from, the files to look
    at); a cell that succeeds removes it."""
    import cplxnet.compare.grid.classify as runner

    real = runner.train_grid_cell

    def flaky(cell, opts, run_dir, **kwargs):
        if cell.encoding.label == "none":
            os.makedirs(run_dir)
            open(os.path.join(run_dir, "checkpoint.pt"), "w").close()
            raise RuntimeError("simulated failure")
        return real(cell, opts, run_dir, **kwargs)

    monkeypatch.setattr(runner, "train_grid_cell", flaky)
    out = str(tmp_path / "out")
    cells = _cells(options, "none,complex-order")
    rows = run_grid(cells, out, options, threads=1, log=lambda m: None)
    assert [r["status"] for r in rows] == ["error", "ok"]
    assert os.listdir(os.path.join(out, "runs")) == [cells[0].cell_id]
    assert os.path.exists(os.path.join(out, "runs", cells[0].cell_id, "checkpoint.pt"))


def test_a_grid_with_a_cell_twice_is_refused(tmp_path, options):
    cells = _cells(options, "none")
    with pytest.raises(CompareError, match="duplicate cells"):
        run_grid(cells + cells, str(tmp_path / "out"), options, log=lambda m: None)
