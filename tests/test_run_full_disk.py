"""A full disk while a run saves (``torch.save`` of a checkpoint, a JSON file, a metrics line)
ends the command with one line naming the folder and "no space left on device"; the last good
checkpoint stays and the run resumes from it once there is space. Simulated (the writer raises
what a full disk raises: ``OSError(ENOSPC)``, or torch's ``RuntimeError: ... unexpected pos``) and,
where this process may mount one, on a real 2 MiB tmpfs."""

from __future__ import annotations

import builtins
import errno
import json
import os
import subprocess

import pytest
import test_train_zoo as toy
import torch
from test_cli import TINY

import cplxnet.engine.loop as engine
from cplxnet.cli import main
from cplxnet.engine import runs

LM_TINY = ["--task", "lm", "--data", "synthetic:copy", "--context", "4", "--d-model", "8",
           "--steps", "4", "--eval-every", "2", "--batch-size", "4", "--quiet"]  # fmt: skip
KEY = {"results.json": "test_accuracy", "config.json": runs.RUN_MARKER}
TORCH_FULL = "[enforce fail at inline_container.cc:672] . unexpected pos 1600 vs 1492"


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return toy.write_toy_tsv(tmp_path_factory.mktemp("disk") / "toy.tsv", n=120)


def full_disk_line(capsys, argv, folder) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.startswith("cplxnet: error: no space left on device") and err.count("\n") == 1, err
    assert f" in {os.path.abspath(folder)} failed" in err, err
    assert "Traceback" not in err
    return err


def saves_fail_from(monkeypatch, call: int, error: Exception) -> None:
    """``torch.save`` writes part of the file and then fails with ``error`` from its ``call``-th
    call on, as it does on a full disk."""
    real, count = torch.save, [0]

    def save(obj, fh, *args, **kwargs):
        count[0] += 1
        if count[0] < call:
            return real(obj, fh, *args, **kwargs)
        fh.write(b"PK\x03\x04 half a zip")
        raise error

    monkeypatch.setattr(torch, "save", save)


@pytest.mark.parametrize("task", ["classify", "lm"])
@pytest.mark.parametrize("error", ["torch", "oserror"])
def test_a_full_disk_at_a_checkpoint_keeps_the_last_good_one(
    toy_file, tmp_path, capsys, monkeypatch, task, error
):
    run = str(tmp_path / "run")
    tiny = LM_TINY if task == "lm" else ["--data", toy_file, *TINY[:-4], "3", *TINY[-3:]]
    raised = RuntimeError(TORCH_FULL) if error == "torch" else OSError(errno.ENOSPC, "full")
    saves_fail_from(monkeypatch, 3, raised)  # best.pt and checkpoint.pt of the first save fit
    full_disk_line(capsys, ["train", *tiny, "--run-dir", run], run)
    monkeypatch.undo()
    state = runs.load_checkpoint(os.path.join(run, "checkpoint.pt"))
    assert state["step" if task == "lm" else "epoch"] == (2 if task == "lm" else 1)  # intact
    assert not [n for n in os.listdir(run) if n.startswith(runs.TEMP_PREFIX)]
    assert "results.json" not in os.listdir(run)
    assert main(["train", "--resume", run, "--quiet"]) == 0  # space again: it goes on
    assert "results.json" in os.listdir(run)


@pytest.mark.parametrize("task", ["classify", "lm"])
def test_an_interrupt_inside_torch_save_is_an_interrupt_not_a_full_disk(
    toy_file, tmp_path, capsys, monkeypatch, task
):
    """Ctrl-C or SIGTERM while ``torch.save`` writes a checkpoint: torch's zip writer turns the
    KeyboardInterrupt raised in its write into ``RuntimeError: ... unexpected pos``, which is no
    full disk; the command ends as interrupted and the run resumes from its last checkpoint."""
    run = str(tmp_path / "run")
    tiny = LM_TINY if task == "lm" else ["--data", toy_file, *TINY[:-4], "3", *TINY[-3:]]
    real, count = torch.save, [0]

    class Interrupted:
        def __init__(self, fh):
            self.fh, self.writes = fh, 0

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def write(self, data):
            self.writes += 1
            if self.writes == 3:  # the signal handler's exception, amid torch's writes
                raise KeyboardInterrupt
            return self.fh.write(data)

    def save(obj, fh, *args, **kwargs):
        count[0] += 1
        return real(obj, fh if count[0] < 3 else Interrupted(fh), *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)  # best.pt and checkpoint.pt of the first save fit
    assert main(["train", *tiny, "--run-dir", run]) == 130
    err = capsys.readouterr().err
    assert err == (
        f"cplxnet: error: interrupted; continue the run with: cplxnet train --resume {run}\n"
    )
    monkeypatch.undo()
    state = runs.load_checkpoint(os.path.join(run, "checkpoint.pt"))
    assert state["step" if task == "lm" else "epoch"] == (2 if task == "lm" else 1)  # intact
    assert not [n for n in os.listdir(run) if n.startswith(runs.TEMP_PREFIX)]
    assert main(["train", "--resume", run, "--quiet"]) == 0
    assert "results.json" in os.listdir(run)


@pytest.mark.parametrize("name", ["results.json", "config.json"])
def test_a_full_disk_writing_json_is_one_line(toy_file, tmp_path, capsys, monkeypatch, name):
    real = json.dump

    def dump(obj, fh, *args, **kwargs):
        if isinstance(obj, dict) and KEY[name] in obj:
            fh.write('{"half": ')
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(obj, fh, *args, **kwargs)

    monkeypatch.setattr(json, "dump", dump)
    run = str(tmp_path / "run")
    err = full_disk_line(capsys, ["train", "--data", toy_file, "--run-dir", run, *TINY], run)
    assert f"writing {name} in" in err
    if name == "config.json":  # before the first checkpoint: nothing of the run is left
        assert not os.path.exists(run)
    else:
        assert runs.load_checkpoint(os.path.join(run, "checkpoint.pt"))["epoch"] == 2


def test_a_full_disk_appending_metrics_is_one_line(toy_file, tmp_path, capsys, monkeypatch):
    real = builtins.open

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fake_open(path, mode="r", *args, **kwargs):
        fh = real(path, mode, *args, **kwargs)
        return Full(fh) if "a" in mode and str(path).endswith("metrics.jsonl") else fh

    monkeypatch.setattr(builtins, "open", fake_open)
    run = str(tmp_path / "run")
    err = full_disk_line(capsys, ["train", "--data", toy_file, "--run-dir", run, *TINY], run)
    assert "writing metrics.jsonl in" in err


def test_a_real_full_disk(toy_file, tmp_path, capsys, monkeypatch):
    """A 2 MiB tmpfs that fills up after the first epoch (needs the right to mount)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                             capture_output=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        real_save_epoch = engine.save_round

        def save_epoch_then_fill(*args, **kwargs):
            real_save_epoch(*args, **kwargs)
            with open(disk / "filler", "ab") as fh:  # take every free byte
                try:
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
                except OSError as err:
                    assert err.errno == errno.ENOSPC

        monkeypatch.setattr(engine, "save_round", save_epoch_then_fill)
        run = str(disk / "run")
        full_disk_line(capsys, ["train", "--data", toy_file, "--run-dir", run, *TINY], run)
        assert runs.load_checkpoint(os.path.join(run, "checkpoint.pt"))["epoch"] == 1
        os.remove(disk / "filler")
        monkeypatch.undo()
        assert main(["train", "--resume", run, "--quiet"]) == 0
        assert runs.load_checkpoint(os.path.join(run, "checkpoint.pt"))["epoch"] == 2
    finally:
        subprocess.run(["umount", str(disk)], check=False)
