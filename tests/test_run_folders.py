"""Run folders: what ``--force`` may replace, what ``--resume`` checks, damaged checkpoints and
file permissions. Every refusal is one ``cplxnet: error:`` line and leaves the user's files as
they were."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil

import pytest
import test_train_zoo as toy
import torch
from test_cli import TINY, error_of

import cplxnet.engine.loop as loop
import cplxnet.tasks.classify.task as engine
from cplxnet.cli import main
from cplxnet.engine import runs


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return toy.write_toy_tsv(tmp_path_factory.mktemp("runs") / "toy.tsv", n=120)


def snapshot(folder) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, folder)] = fh.read()
    return out


def finished_run(toy_file, path, *extra) -> str:
    assert main(["train", "--data", toy_file, "--run-dir", str(path), *TINY, *extra]) == 0
    return str(path)


# -- what --force may replace -------------------------------------------------------------------


@pytest.mark.parametrize("where", ["cwd", "parent"])
def test_force_never_replaces_the_current_folder_or_a_parent(toy_file, tmp_path, capsys, where):
    work = tmp_path / "project"
    finished_run(toy_file, work)  # even a real run folder, holding only run files
    here = work if where == "cwd" else work / "sub"
    here.mkdir(exist_ok=True)
    before = snapshot(work)
    cwd = os.getcwd()
    os.chdir(here)
    try:
        run_dir = "." if where == "cwd" else ".."
        argv = ["train", "--data", toy_file, "--run-dir", run_dir, *TINY, "--force"]
        err = error_of(capsys, argv)
    finally:
        os.chdir(cwd)
    assert "refusing to replace" in err and "it is the current folder or contains it" in err
    assert snapshot(work) == before


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"config.json": '{"model_type": "bert"}', "model.safetensors": "w"}, "lacks the"),
        ({"config.json": "{not json", "tokenizer.json": "{}"}, "lacks the"),
        ({"thesis.txt": "do not delete"}, "has no config.json"),
        ({"config.json": '{"cplxnet_run": 1}', "thesis.txt": "x"}, "files cplxnet did not write"),
    ],
    ids=["hugging-face", "bad-json", "no-config", "run-plus-foreign-file"],
)
def test_force_refuses_folders_cplxnet_did_not_make(toy_file, tmp_path, capsys, files, expected):
    folder = tmp_path / "model"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    before = snapshot(folder)
    argv = ["train", "--data", toy_file, "--run-dir", str(folder), *TINY, "--force"]
    err = error_of(capsys, argv)
    assert f"refusing to replace {folder} even with --force" in err and expected in err
    assert snapshot(folder) == before


def test_force_keeps_the_old_run_until_the_new_one_has_a_checkpoint(
    toy_file, tmp_path, capsys, monkeypatch
):
    run = finished_run(toy_file, tmp_path / "run")
    before = snapshot(run)

    def broken_step(*args, **kwargs):
        raise RuntimeError("the machine fell over")

    monkeypatch.setattr(engine, "optimizer_step", broken_step)
    with pytest.raises(RuntimeError, match="fell over"):
        main(["train", "--data", toy_file, "--run-dir", run, *TINY, "--force", "--seed", "4"])
    assert snapshot(run) == before  # the finished run is untouched
    assert sorted(os.listdir(tmp_path)) == ["run"]  # and the new folder is gone
    monkeypatch.undo()

    # options that fail validation never touch it either
    base = ["train", "--data", toy_file, "--run-dir", run, *TINY, "--force"]
    for bad in (["--lr", "inf"], ["--max-vocab", "2"], ["--seed", "-1"], ["--dropout", "nan"]):
        assert status_of([*base, *bad]) in (1, 2)
        assert snapshot(run) == before
    capsys.readouterr()

    assert main([*base, "--seed", "4"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["run"]
    assert sorted(os.listdir(run)) == sorted(runs.RUN_FILES)
    assert runs.read_json(os.path.join(run, "config.json"))["seed"] == 4


def status_of(argv) -> int:
    """The exit status of ``cplxnet argv`` (argparse's usage errors exit through SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_replaceable_and_run_folder_checks(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    runs.check_replaceable(str(empty))  # an empty folder may be used
    link = tmp_path / "link"
    link.symlink_to(empty)
    with pytest.raises(runs.RunError, match="not a folder"):
        runs.check_replaceable(str(link))
    made = tmp_path / "made"
    made.mkdir()
    runs.write_json(str(made / "config.json"), {runs.RUN_MARKER: runs.RUN_FORMAT})
    (made / ".tmp-x-best.pt").write_bytes(b"half")  # a crash's temporary file is ours
    assert runs.is_run_folder(str(made))
    runs.check_replaceable(str(made))
    assert runs.remove_run_files(str(made)) and not made.exists()


# -- a run that stopped in its first epoch --------------------------------------------------------


def test_a_run_killed_in_its_first_epoch_says_what_to_do(toy_file, tmp_path, capsys):
    run = finished_run(toy_file, tmp_path / "run")
    for name in ("checkpoint.pt", "best.pt", "metrics.jsonl", "results.json"):
        os.remove(os.path.join(run, name))  # what kill -9 during epoch 1 leaves
    err = error_of(capsys, ["train", "--resume", run])
    assert f"{run} has no checkpoint: the run stopped before its first epoch ended" in err
    assert "--force" in err and "nothing to resume" in err
    err = error_of(capsys, ["train", "--data", toy_file, "--run-dir", run, *TINY])
    assert "holds no checkpoint" in err and "pass --force to start it again" in err
    assert "--resume" not in err
    assert main(["train", "--data", toy_file, "--run-dir", run, *TINY, "--force"]) == 0


def test_a_failure_in_the_first_epoch_leaves_no_stub(toy_file, tmp_path, monkeypatch):
    run = str(tmp_path / "run")

    def broken_step(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "optimizer_step", broken_step)
    assert main(["train", "--data", toy_file, "--run-dir", run, *TINY]) == 130
    assert not os.path.exists(run)
    nested = tmp_path / "a" / "b" / "run"  # parents the run created go too, nothing above them
    assert main(["train", "--data", toy_file, "--run-dir", str(nested), *TINY]) == 130
    assert not (tmp_path / "a").exists() and tmp_path.is_dir()
    monkeypatch.undo()
    assert main(["train", "--data", toy_file, "--run-dir", run, *TINY]) == 0  # no --force needed


def test_a_run_interrupted_right_after_its_first_checkpoint_keeps_it(toy_file, tmp_path, capsys,
                                                                    monkeypatch):  # fmt: skip
    """Ctrl-C or SIGTERM once the first checkpoint.pt is written (here: as the metrics line is
    appended) leaves the run with that checkpoint, and it resumes to an uninterrupted run's end."""
    whole = finished_run(toy_file, tmp_path / "whole")
    run = str(tmp_path / "run")

    def interrupted(path, line):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "append_line", interrupted)
    assert main(["train", "--data", toy_file, "--run-dir", run, *TINY]) == 130
    assert f"continue the run with: cplxnet train --resume {run}" in capsys.readouterr().err
    monkeypatch.undo()
    assert main(["train", "--resume", run, "--quiet"]) == 0

    def lines(folder):
        with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as fh:
            return [{k: v for k, v in json.loads(ln).items() if k != "seconds"} for ln in fh]

    assert lines(run) == lines(whole)
    a, b = (runs.load_checkpoint(os.path.join(f, "checkpoint.pt"))["model"] for f in (whole, run))
    assert all(torch.equal(a[k], b[k]) for k in a)


LM_TINY = ["--task", "lm", "--data", "synthetic:copy", "--context", "4", "--d-model", "8",
           "--steps", "2", "--eval-every", "2", "--batch-size", "4", "--quiet"]  # fmt: skip


def killed_in_its_first_second(folder) -> str:
    """What a run killed while writing its config.json leaves: only a temporary file."""
    folder.mkdir()
    (folder / ".tmp-k2j4x9_q-config.json").write_text('{"cplxnet_run": 1, "mod')
    return str(folder)


@pytest.mark.parametrize("how", ["rerun", "force", "lm-rerun", "lm-force"])
def test_a_folder_of_only_temporary_files_is_replaced(toy_file, tmp_path, capsys, how):
    run = killed_in_its_first_second(tmp_path / "run")
    for argv in (["train", "--resume", run], ["evaluate", run]):
        err = error_of(capsys, argv)
        assert "holds only temporary files of a cplxnet run" in err, err
        assert ".tmp-k2j4x9_q-config.json" in err and "nothing to resume" in err
        assert "without --resume" in err
    tiny = LM_TINY if how.startswith("lm") else ["--data", toy_file, *TINY]
    force = ["--force"] if how.endswith("force") else []
    assert main(["train", *tiny, "--run-dir", run, *force]) == 0
    assert runs.is_run_folder(run) and "results.json" in os.listdir(run)
    assert not [n for n in os.listdir(run) if n.startswith(".tmp-")]
    assert sorted(os.listdir(tmp_path)) == ["run"]


@pytest.mark.parametrize(
    "extra", [{"notes.txt": "mine"}, {".tmp-mine": "x"}, {".tmp-x-config.json.bak": "x"}],
    ids=["a-file-of-the-user", "a-tmp-file-not-of-a-run-file", "another-suffix"],
)  # fmt: skip
def test_temporary_files_beside_foreign_ones_are_not_replaced(toy_file, tmp_path, capsys, extra):
    folder = tmp_path / "run"
    killed_in_its_first_second(folder)
    for name, text in extra.items():
        (folder / name).write_text(text)
    before = snapshot(folder)
    for force in ([], ["--force"]):
        err = error_of(capsys, ["train", "--data", toy_file, "--run-dir", str(folder), *TINY,
                                *force])  # fmt: skip
        assert "not a cplxnet run" in err and "choose another --run-dir" in err
    assert snapshot(folder) == before


# -- what --resume checks -------------------------------------------------------------------------


def test_resume_refuses_changed_training_data(tmp_path, capsys):
    data = toy.write_toy_tsv(tmp_path / "toy.tsv", n=120)
    run = finished_run(data, tmp_path / "run", "--epochs", "1")
    recorded = runs.file_sha256(data)
    toy.write_toy_tsv(tmp_path / "toy.tsv", n=120, seed=5)
    now = hashlib.sha256((tmp_path / "toy.tsv").read_bytes()).hexdigest()
    before = snapshot(run)
    err = error_of(capsys, ["train", "--resume", run, "--epochs", "2", "--quiet"])
    assert f"the data file {data} changed since {run} was trained" in err
    assert recorded in err and now in err and "--allow-changed-data" in err
    assert snapshot(run) == before
    args = ["train", "--resume", run, "--epochs", "2", "--quiet", "--allow-changed-data"]
    assert main(args) == 0
    # the run now records the data it continued on (and the data before), so it can be scored
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        config = json.load(fh)
    assert config["data_sha256"] == {"data": now}
    assert config["data_sha256_earlier"] == [{"data": recorded}]
    assert main(["evaluate", run]) == 0
    capsys.readouterr()
    err = error_of(capsys, ["train", "--data", data, "--allow-changed-data", *TINY])
    assert "--allow-changed-data applies to --resume only" in err


def test_a_run_whose_data_file_is_gone_says_so(tmp_path, capsys):
    data = toy.write_toy_tsv(tmp_path / "toy.tsv", n=120)
    run = finished_run(data, tmp_path / "run", "--epochs", "1")
    os.remove(data)
    before = snapshot(run)
    gone = f"the data file {data} that {run} was trained on is gone; restore it"
    err = error_of(capsys, ["evaluate", run])
    assert gone + "; or score a file with --data FILE" in err, err
    err = error_of(capsys, ["train", "--resume", run, "--epochs", "2", "--quiet"])
    assert err.rstrip().endswith(gone), err
    assert snapshot(run) == before


# -- damaged or foreign checkpoints ---------------------------------------------------------------


@pytest.fixture(scope="module")
def other_best(toy_file, tmp_path_factory):
    """best.pt of a run with another model size."""
    run = tmp_path_factory.mktemp("other") / "run"
    wider = [*TINY[:3], "12", *TINY[4:]]  # --d-model 12 instead of 8
    assert main(["train", "--data", toy_file, "--run-dir", str(run), *wider]) == 0
    return str(run / "best.pt")


def _bad_checkpoint(kind, path, other_best):
    if kind == "other-run":  # the same file of a run with another model size
        other = os.path.join(os.path.dirname(other_best), os.path.basename(path))
        with open(other, "rb") as src, open(path, "wb") as dst:
            dst.write(src.read())
    elif kind == "format-only":
        torch.save({"format": 1}, path)
    elif kind == "bare-tensor":
        torch.save(torch.ones(3), path)
    elif kind == "random-bytes":
        with open(path, "wb") as fh:
            fh.write(random.Random(0).randbytes(4096))
    elif kind == "wrong-types":
        torch.save({"format": 1, "epoch": 1, "step": 1, "model": "weights"}, path)


BAD_CHECKPOINTS = {
    "other-run": "does not fit this run's model (size mismatch for",
    "format-only": "is not a cplxnet checkpoint of this kind (no '",
    "bare-tensor": "holds a Tensor",
    "random-bytes": "cannot be loaded: it is not a cplxnet checkpoint (",
    "wrong-types": "of this kind ('model' is a str)",
}


@pytest.mark.parametrize("command", ["evaluate", "predict", "resume", "resume-best"])
@pytest.mark.parametrize("kind", list(BAD_CHECKPOINTS))
def test_a_wrong_checkpoint_is_one_line(toy_file, tmp_path, capsys, other_best, command, kind):
    run = finished_run(toy_file, tmp_path / "run", "--epochs", "1")
    name = "checkpoint.pt" if command == "resume" else "best.pt"
    _bad_checkpoint(kind, os.path.join(run, name), other_best)
    before = snapshot(run)
    argv = {
        "evaluate": ["evaluate", run],
        "predict": ["predict", run, "good fun"],
        "resume": ["train", "--resume", run, "--epochs", "3", "--quiet"],
        "resume-best": ["train", "--resume", run, "--epochs", "3", "--quiet"],
    }[command]
    err = error_of(capsys, argv)
    assert name in err and BAD_CHECKPOINTS[kind] in err
    assert "weights_only" not in err and "Traceback" not in err
    assert snapshot(run) == before


# -- permissions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_every_run_file_respects_the_umask(toy_file, tmp_path, mask):
    old = os.umask(mask)
    try:
        run = finished_run(toy_file, tmp_path / "run")
    finally:
        os.umask(old)
    modes = {name: os.stat(os.path.join(run, name)).st_mode & 0o777 for name in os.listdir(run)}
    assert modes == {name: 0o666 & ~mask for name in runs.RUN_FILES}


def test_a_replacing_run_folder_respects_the_umask(toy_file, tmp_path):
    run = finished_run(toy_file, tmp_path / "run")
    old = os.umask(0o022)
    try:
        assert main(["train", "--data", toy_file, "--run-dir", run, *TINY, "--force"]) == 0
    finally:
        os.umask(old)
    assert os.stat(run).st_mode & 0o777 == 0o755


# -- what inspect leaves in a run folder, and a lost best.pt -------------------------------------


def test_force_replaces_a_run_with_its_inspect_folder_but_not_a_foreign_file_in_it(
    toy_file, tmp_path, capsys
):
    run = finished_run(toy_file, tmp_path / "run")
    assert main(["inspect", run]) == 0
    assert os.path.isdir(os.path.join(run, "inspect"))
    capsys.readouterr()
    with open(os.path.join(run, "inspect", runs.INSPECT_MARKER), encoding="utf-8") as fh:
        first = json.load(fh)[0]
    left = os.path.join(run, "inspect", f"{runs.TEMP_PREFIX}abc-{first}")  # a killed inspect's
    with open(left, "w", encoding="utf-8") as fh:
        fh.write("half")
    finished_run(toy_file, run, "--force")  # inspect's folder is cplxnet's: replaced
    assert not os.path.exists(os.path.join(run, "inspect"))
    assert main(["inspect", run]) == 0
    with open(os.path.join(run, "inspect", "mine.txt"), "w", encoding="utf-8") as fh:
        fh.write("mine")
    before = snapshot(run)
    argv = ["train", "--data", toy_file, "--run-dir", run, *TINY, "--force"]
    assert "holds files cplxnet did not write (inspect)" in error_of(capsys, argv)
    assert snapshot(run) == before


def test_resume_without_best_pt_changes_nothing(toy_file, tmp_path, capsys):
    run = finished_run(toy_file, tmp_path / "run")
    os.remove(os.path.join(run, "best.pt"))
    before = snapshot(run)
    err = error_of(capsys, ["train", "--resume", run, "--epochs", "3"])
    assert "best.pt is missing" in err and "--force" in err
    assert snapshot(run) == before


def test_a_killed_force_run_leaves_nothing_the_next_run_keeps(toy_file, tmp_path):
    """The ``.NAME.new-*`` folder of a ``--force`` run killed before it took the run's place is
    cleared by the next run of NAME (its run files; a foreign file and its folder stay)."""
    run = finished_run(toy_file, tmp_path / "run")
    stale = tmp_path / ".run.new-abc12345"
    stale.mkdir()
    for name in ("config.json", "checkpoint.pt", ".tmp-x-metrics.jsonl"):
        (stale / name).write_text("{}", encoding="utf-8")
    kept = tmp_path / ".run.new-def45678"
    kept.mkdir()
    (kept / "mine.txt").write_text("mine", encoding="utf-8")
    other = tmp_path / ".other.new-abc12345"  # another run's: not touched
    other.mkdir()
    # the working folder of a --force run of the run named ``run.new-1``, held by its own lock
    busy = tmp_path / ".run.new-1.new-abcd1234"
    busy.mkdir()
    (busy / "checkpoint.pt").write_text("{}", encoding="utf-8")
    finished_run(toy_file, run, "--force")
    assert not stale.exists()
    assert os.listdir(kept) == ["mine.txt"] and other.is_dir()
    assert os.listdir(busy) == ["checkpoint.pt"]


@pytest.mark.parametrize("suffix", ["/.", "/"])
def test_force_replaces_a_run_named_with_a_trailing_separator_or_dot(toy_file, tmp_path, suffix):
    """``--run-dir RUN/.`` names the run folder RUN: ``--force`` puts the new run in its place
    (renaming ``RUN/.`` itself fails) and leaves no ``.RUN.new-*`` folder beside it."""
    run = finished_run(toy_file, tmp_path / "run")
    finished_run(toy_file, run + suffix, "--force", "--seed", "4")
    assert sorted(os.listdir(tmp_path)) == ["run"]
    assert sorted(os.listdir(run)) == sorted(runs.RUN_FILES)
    assert runs.read_json(os.path.join(run, "config.json"))["seed"] == 4


def test_using_a_run_killed_in_its_first_epoch_names_force_not_resume(toy_file, tmp_path, capsys):
    """evaluate, predict and inspect on a run with no checkpoint at all (kill -9 during epoch 1)
    name the fix that works: resume has nothing to continue."""
    run = finished_run(toy_file, tmp_path / "run")
    for name in ("checkpoint.pt", "best.pt", "metrics.jsonl", "results.json"):
        os.remove(os.path.join(run, name))
    for argv in (["evaluate", run], ["predict", run, "a film"], ["inspect", run]):
        err = error_of(capsys, argv)
        assert "stopped before its first epoch ended" in err and "--force" in err, err
        assert "--resume" not in err, err
    # with a checkpoint but no best.pt, resuming is the fix
    os.remove(os.path.join(finished_run(toy_file, tmp_path / "other"), "best.pt"))
    err = error_of(capsys, ["evaluate", str(tmp_path / "other")])
    assert "no best.pt" in err and "--resume" in err


@pytest.mark.parametrize(("name", "longer", "done"),
                         [("classify", ["--epochs", "2"], ("epochs_run", 2)),
                          ("lm", ["--steps", "6"], ("steps", 6))])  # fmt: skip
def test_an_extension_interrupted_between_its_two_changes_is_finished_by_a_plain_resume(
    name, longer, done, tmp_path, monkeypatch
):
    """Extending a finished run rewrites config.json and removes results.json; an interrupt
    after the first of the two changes leaves a run that a plain ``--resume`` extends."""
    run = str(tmp_path / name)
    shutil.copytree(os.path.join(os.path.dirname(__file__), "fixtures", "runs_main", name), run)
    changes = []

    def second_change_interrupted(change):
        def wrapped(path, *args, **kwargs):
            if os.path.basename(path) in ("config.json", "results.json"):
                changes.append(path)
                if len(changes) == 2:
                    raise KeyboardInterrupt
            return change(path, *args, **kwargs)

        return wrapped

    monkeypatch.setattr(runs, "write_json", second_change_interrupted(runs.write_json))
    monkeypatch.setattr(runs.os, "remove", second_change_interrupted(os.remove))
    assert main(["train", "--resume", run, *longer, "--quiet"]) == 130
    monkeypatch.undo()
    assert len(changes) == 2
    assert main(["train", "--resume", run, "--quiet"]) == 0
    with open(os.path.join(run, "results.json"), encoding="utf-8") as fh:
        assert json.load(fh)[done[0]] == done[1]
