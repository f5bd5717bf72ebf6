"""Run folders written by cplxnet 0.x's main branch still evaluate and resume.

``tests/fixtures/runs_main`` holds two finished runs made with the main branch's code before the
engines shared their run bookkeeping: a classifier (``cplxnet train --data mr --limit 60
--model fasttext --d-model 4 --epochs 1``) and a language model (``cplxnet train --task lm
--data mr --steps 4 --eval-every 2 --context 8`` with a one-layer width-8 decoder). Each is
scored again (same numbers as its results.json), extended by ``--resume`` and scored after it;
a checkpoint of a format this code does not know is refused with one line."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from cplxnet.cli import main

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "runs_main")


def copy_run(name: str, tmp_path) -> str:
    run = str(tmp_path / name)
    shutil.copytree(os.path.join(FIXTURES, name), run)
    return run


def read_json(path: str):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def lines(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def stray(run: str, line: dict) -> None:
    """Append a metrics.jsonl line after the checkpoint's last (a run killed between the two
    writes): resume rewrites the file from the checkpoint's history."""
    with open(os.path.join(run, "metrics.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def test_a_classifier_run_of_main_evaluates_and_resumes(tmp_path, capsys):
    run = copy_run("classify", tmp_path)
    before = read_json(os.path.join(run, "results.json"))
    assert main(["evaluate", run, "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["accuracy"] == pytest.approx(before["test_accuracy"], abs=1e-12)
    assert scores["loss"] == pytest.approx(before["test_loss"], rel=1e-6)
    stray(run, {"epoch": 2, "train_loss": -1.0})  # a line the checkpoint never saw
    assert main(["train", "--resume", run, "--epochs", "2", "--quiet"]) == 0
    after = read_json(os.path.join(run, "results.json"))
    assert after["epochs_run"] == 2 and after["steps"] == 2 * before["steps"]
    history = lines(os.path.join(run, "metrics.jsonl"))
    assert [m["epoch"] for m in history] == [1, 2] and history[1]["train_loss"] > 0
    assert main(["predict", run, "a gorgeous film"]) == 0


def test_a_language_model_run_of_main_evaluates_and_resumes(tmp_path, capsys):
    run = copy_run("lm", tmp_path)
    before = read_json(os.path.join(run, "results.json"))
    context = str(before["context"])
    assert main(["evaluate", run, "--context", context, "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["test"][context]["bpc"] == pytest.approx(before["test"][context]["bpc"], 1e-6)
    stray(run, {"step": 6, "train_loss": -1.0})
    assert main(["train", "--resume", run, "--steps", "6", "--quiet"]) == 0
    after = read_json(os.path.join(run, "results.json"))
    assert after["steps"] == 6
    history = lines(os.path.join(run, "metrics.jsonl"))
    assert [m["step"] for m in history] == [2, 4, 6] and history[2]["train_loss"] > 0
    assert main(["generate", run, "the", "--max-new-tokens", "3"]) == 0


@pytest.mark.parametrize("name, extend", [("classify", "--epochs"), ("lm", "--steps")])
def test_an_unknown_checkpoint_format_is_one_line(name, extend, tmp_path, capsys):
    run = copy_run(name, tmp_path)
    path = os.path.join(run, "checkpoint.pt")
    state = torch.load(path, weights_only=True)
    state["format"] = 99
    torch.save(state, path)
    assert main(["train", "--resume", run, extend, "9", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown format 99" in err[0] and "checkpoint.pt" in err[0], err
