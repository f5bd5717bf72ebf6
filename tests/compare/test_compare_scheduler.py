"""The scheduler's arithmetic without training: how many worker processes run at once, the torch
threads per cell, the ETA, and the stale lock of a process that is gone."""

from __future__ import annotations

import os
import subprocess

import pytest
from compare_helpers import tiny_options

from cplxnet.compare import CompareError, expand_grid, parse_encodings, parse_numbers, run_grid
from cplxnet.compare.local import default_threads
from cplxnet.compare.progress import Eta, fmt_duration


def _cells(options, encodings="none,complex-order,sinusoidal,complex-vanilla,trainable"):
    cells, _ = expand_grid(
        ["synthetic"], ["fasttext"], parse_encodings(encodings), parse_numbers("natural"),
        [0], [None], options,
    )  # fmt: skip
    return cells


class _FakeWorker:
    """A worker process that ends after two polls without writing a result."""

    live: set[int] = set()
    most = 0
    started: list[list[str]] = []
    envs: list[dict] = []

    def __init__(self, cmd, stdout=None, stderr=None, env=None):
        type(self).started.append(cmd)
        type(self).envs.append(env)
        type(self).live.add(id(self))
        type(self).most = max(type(self).most, len(type(self).live))
        self.polls = 0
        self.returncode = None

    def poll(self):
        self.polls += 1
        if self.polls >= 2:
            self.returncode = 3
            type(self).live.discard(id(self))
        return self.returncode


@pytest.mark.parametrize("jobs", [2, 3])
def test_at_most_jobs_worker_processes_run_at_once(tmp_path, monkeypatch, jobs):
    _FakeWorker.live, _FakeWorker.most, _FakeWorker.started, _FakeWorker.envs = set(), 0, [], []
    monkeypatch.setattr(subprocess, "Popen", _FakeWorker)
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
