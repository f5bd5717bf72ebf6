"""One owner per run folder: a new run, ``--force`` and ``--resume`` (classifier and language
model, one process or data-parallel) take the folder's lock before they write or remove
anything; a second command gets one line naming the owner (pid, host, start time) and changes
nothing; evaluate and predict only read and are not blocked; a lock whose process is gone is
taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import test_train_zoo as toy
import torch
import torch.distributed as dist
from spawn_ranks import spawn_ranks
from test_cli import TINY

from cplxnet.cli import main
from cplxnet.engine import runs
from cplxnet.engine.folder_lock import FolderLock

LM_TINY = ["--task", "lm", "--data", "synthetic:copy", "--context", "4", "--d-model", "8",
           "--steps", "4", "--eval-every", "2", "--batch-size", "4", "--quiet"]  # fmt: skip
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return toy.write_toy_tsv(tmp_path_factory.mktemp("lock") / "toy.tsv", n=120)


def snapshot(folder) -> dict[str, bytes]:
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as fh:
                out[os.path.relpath(os.path.join(root, name), folder)] = fh.read()
    return out


def refused(capsys, argv, pid: int) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert "is in use by another cplxnet process" in err, err
    assert f"pid {pid} on host {socket.gethostname()}, started " in err, err
    return err


def lock_file(run: str) -> str:
    parent, name = os.path.split(os.path.abspath(run))
    return os.path.join(parent, f".{name}.lock")


def env() -> dict[str, str]:
    path = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)


@pytest.mark.parametrize("task", ["classify", "lm"])
def test_a_held_folder_refuses_train_force_and_resume_and_lets_evaluate_read(
    toy_file, tmp_path, capsys, task
):
    """In-process: the lock held (as another command holds it) refuses a new run into a missing
    folder, --force and --resume, before anything is written; evaluate still reads."""
    tiny = LM_TINY if task == "lm" else ["--data", toy_file, *TINY]
    run, fresh = str(tmp_path / "run"), str(tmp_path / "fresh")
    assert main(["train", *tiny, "--run-dir", run]) == 0
    capsys.readouterr()
    os.remove(os.path.join(run, "results.json"))  # an unfinished run, so --resume has work
    before = snapshot(tmp_path)
    with runs.run_lock(run), runs.run_lock(fresh):
        assert os.path.exists(lock_file(run))
        refused(capsys, ["train", *tiny, "--run-dir", run, "--force"], os.getpid())
        refused(capsys, ["train", "--resume", run, "--quiet"], os.getpid())
        refused(capsys, ["train", *tiny, "--run-dir", fresh], os.getpid())
        assert not os.path.exists(fresh)
        assert main(["evaluate", run]) == 0  # reading needs no lock
        capsys.readouterr()
    assert snapshot(tmp_path) == before  # nothing written, replaced or removed
    assert not os.path.exists(lock_file(run))
    assert main(["train", "--resume", run, "--quiet"]) == 0  # the folder is free again
    assert not os.path.exists(lock_file(run))
    assert os.path.exists(os.path.join(run, "results.json"))


@pytest.mark.parametrize("stale", ["json", "bare-pid"])
def test_a_lock_left_by_a_process_that_is_gone_is_taken_over(toy_file, tmp_path, stale):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run = str(tmp_path / "run")
    with open(lock_file(run), "w") as fh:  # a killed run's lock file: nobody holds it
        if stale == "json":
            json.dump({"pid": dead.pid, "host": socket.gethostname(), "started": "then"}, fh)
        else:
            fh.write(str(dead.pid))
    assert main(["train", "--data", toy_file, "--run-dir", run, *TINY]) == 0
    assert os.path.exists(os.path.join(run, "results.json"))
    assert not os.path.exists(lock_file(run))


def test_a_bare_pid_of_a_live_process_still_holds(toy_file, tmp_path, capsys):
    """A lock file holding only a bare pid (no flock) counts while the pid lives."""
    run = str(tmp_path / "run")
    with open(lock_file(run), "w") as fh:
        fh.write(str(os.getpid()))
    status = main(["train", "--data", toy_file, "--run-dir", run, *TINY])
    assert status == 1 and "in use by another cplxnet process" in capsys.readouterr().err
    assert not os.path.exists(run)


HOLDER = """
import sys
from cplxnet.engine import runs
lock = runs.run_lock(sys.argv[1]).acquire()
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


@pytest.mark.slow
def test_a_folder_held_by_another_process_refuses_force_and_resume(toy_file, tmp_path):
    """Real processes: one holds the folder; --force and --resume started meanwhile exit 1 with
    one line naming it and change nothing; once it ends the folder is free."""
    run = str(tmp_path / "run")
    assert main(["train", "--data", toy_file, "--run-dir", run, *TINY]) == 0
    os.remove(os.path.join(run, "results.json"))
    before = snapshot(run)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, run], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env())  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        for argv in (["--data", toy_file, *TINY, "--run-dir", run, "--force"],
                     ["--resume", run, "--quiet"]):  # fmt: skip
            p = subprocess.run([sys.executable, "-m", "cplxnet", "train", *argv], env=env(),
                               capture_output=True, text=True, timeout=300)  # fmt: skip
            assert p.returncode == 1, p.stderr
            assert p.stderr.count("\n") == 1 and p.stderr.startswith("cplxnet: error: ")
            assert f"in use by another cplxnet process (pid {holder.pid} on host " in p.stderr
        assert snapshot(run) == before
    finally:
        holder.communicate("", timeout=60)
    assert holder.returncode == 0
    assert not os.path.exists(lock_file(run))


def _history(run: str) -> list[dict]:
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.mark.slow
def test_two_force_runs_started_together_never_mix(toy_file, tmp_path):
    """Two ``train --force`` (different seeds) started at once: each either owns the folder or
    exits 1 with the in-use line; the folder holds one run (metrics, checkpoint and results
    agree), never a mix."""
    run = str(tmp_path / "run")
    assert main(["train", "--data", toy_file, "--run-dir", run, *TINY]) == 0
    argv = [sys.executable, "-m", "cplxnet", "train", "--data", toy_file, "--run-dir", run,
            "--force", "--model", "fasttext", "--d-model", "8", "--epochs", "4", "--lr", "0.05",
            "--quiet", "--threads", "1"]  # fmt: skip
    procs = [subprocess.Popen([*argv, "--seed", str(seed)], env=env(), stderr=subprocess.PIPE,
                              text=True) for seed in (1, 2)]  # fmt: skip
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for status, err in outcomes:
        assert status == 0 or (status == 1 and "is in use by another cplxnet process" in err
                               and err.count("\n") == 1), err  # fmt: skip
    assert any(status == 0 for status, _ in outcomes)
    history = _history(run)
    assert [m["epoch"] for m in history] == [1, 2, 3, 4]
    state = runs.load_checkpoint(os.path.join(run, "checkpoint.pt"))
    assert state["history"] == history
    with open(os.path.join(run, "results.json"), encoding="utf-8") as fh:
        results = json.load(fh)
    assert results["dev_accuracy"] == state["best"]["dev_accuracy"]
    best = runs.load_checkpoint(os.path.join(run, "best.pt"))
    assert best["epoch"] == results["best_epoch"]
    assert sorted(os.listdir(tmp_path)) == ["run"]  # no .lock, .new- or .old- folder left


def test_folder_lock_is_per_open_file_and_names_its_owner(tmp_path):
    path = str(tmp_path / ".lock")
    first = FolderLock(path, "out", "cplxnet compare", "choose another --out", RuntimeError)
    with first:
        with open(path) as fh:
            info = json.load(fh)
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        with pytest.raises(
            RuntimeError,
            match=r"^out is in use by another cplxnet compare "
            rf"\(pid {os.getpid()} on host .*, started .*\); choose another",
        ):
            FolderLock(path, "out", "cplxnet compare", "choose another --out",
                       RuntimeError).acquire()  # fmt: skip
    assert not os.path.exists(path)
    with FolderLock(path, "out", "x", "y", RuntimeError):  # free again
        pass


# -- data parallel: rank 0 owns the folder -------------------------------------------------------


def ddp_lock_worker(rank, world, init_file, toy_file, run, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    from cplxnet.data import DataSpec, prepare_data
    from cplxnet.tasks.classify.task import train

    try:
        train(toy.make_config(d_model=8, dropout=0.0), prepare_data(DataSpec(toy_file)), run,
              toy.ddp_options(False), zoo=sys.modules[toy.__name__], quiet=True)  # fmt: skip
        message = "ok"
    except runs.RunError as err:
        message = str(err)
    finally:
        dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as fh:
        fh.write(message)


def _spawn(args, timeout=240.0) -> None:
    spawn_ranks(ddp_lock_worker, args, timeout=timeout,
                hang="a rank is still waiting: rank 0's refusal did not reach it")  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")
def test_data_parallel_ranks_all_stop_when_rank_0_cannot_own_the_folder(toy_file, tmp_path):
    run, out = str(tmp_path / "ddp"), str(tmp_path / "message")
    with runs.run_lock(run):
        _spawn((2, str(tmp_path / "init1"), toy_file, run, out))
    for rank in (0, 1):
        with open(f"{out}.{rank}") as fh:
            assert f"in use by another cplxnet process (pid {os.getpid()}" in fh.read()
    assert not os.path.exists(run)
    _spawn((2, str(tmp_path / "init2"), toy_file, run, out))  # free: rank 0 owns and writes
    for rank in (0, 1):
        with open(f"{out}.{rank}") as fh:
            assert fh.read() == "ok"
    assert os.path.exists(os.path.join(run, "results.json"))
    assert not os.path.exists(lock_file(run))
