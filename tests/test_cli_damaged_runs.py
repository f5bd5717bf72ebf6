"""Damaged or edited classifier run folders (``vocab.json``, ``labels.json``, ``config.json``)
under ``evaluate``, ``predict``, ``inspect`` and ``train --resume``: one ``cplxnet: error:`` line
naming the file and what is wrong in it, never a traceback, and the folder left as it was."""

from __future__ import annotations

import os
import shutil

import pytest
import test_train_zoo as toy
from cli_errors import edit_json, error_of, snapshot
from test_cli import TINY

from cplxnet.cli import main


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished classifier run (fasttext, 2 epochs)."""
    folder = tmp_path_factory.mktemp("damaged")
    data = toy.write_toy_tsv(folder / "toy.tsv", n=120)
    run = str(folder / "run")
    assert main(["train", "--data", data, "--run-dir", run, *TINY]) == 0
    return run


@pytest.fixture
def run(finished, tmp_path):
    copy = str(tmp_path / "run")
    shutil.copytree(finished, copy)
    return copy


def commands(run: str) -> list[list[str]]:
    return [
        ["evaluate", run],
        ["predict", run, "a good film"],
        ["inspect", run, "--out", os.path.join(os.path.dirname(run), "plots")],
        ["train", "--resume", run, "--epochs", "3", "--quiet"],
    ]


@pytest.mark.parametrize("name", ["vocab.json", "labels.json"])
@pytest.mark.parametrize(
    "content, match",
    [("garbage", "is damaged (not valid JSON"), ("[1, 2]", "is damaged (not a "),
     ('{"tokens": ["<pad>", "<unk>"]}', "entries but the run's model has")],
)  # fmt: skip
def test_a_damaged_vocabulary_or_label_file(run, capsys, name, content, match):
    path = os.path.join(run, name)
    if name == "labels.json" and content.startswith("{"):
        content = '["only"]'  # a list of the wrong length
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(content)
    before = snapshot(run)
    for argv in commands(run):
        err = error_of(capsys, argv)
        assert f"{path} " in err and match in err, (argv, err)
        assert "restore the file or train the run again" in err, err
    assert snapshot(run) == before


@pytest.mark.parametrize(
    ("change", "match"),
    [(lambda c: c["model"].__setitem__("family", "bogus"), "model.family is 'bogus', not a "
      "classifier family"),
     (lambda c: c["model"].__setitem__("family", "decoder"), "model.family is 'decoder'"),
     (lambda c: c["model"].__setitem__("encoding", "bogus"), "model: unknown encoding 'bogus'"),
     (lambda c: c["model"].__setitem__("d_model", "abc"), "(model: "),
     (lambda c: c["train"].__setitem__("lr", "abc"), "train.lr is 'abc', not a number"),
     (lambda c: c["train"].__setitem__("epochs", -5), "train: epochs must be >= 1, got -5"),
     (lambda c: c["train"].__setitem__("epochs", 2.5), "train.epochs is 2.5, not an integer"),
     (lambda c: c["train"].__setitem__("bucket", 1), "train.bucket is 1, not true or false"),
     (lambda c: c.pop("model"), "it has no 'model' section"),
     (lambda c: c.pop("train"), "it has no 'train' section"),
     (lambda c: c.__setitem__("data", []), "it has no 'data' section"),
     (lambda c: c["data"].__setitem__("limit", 1), "data: limit must be at least 2"),
     (lambda c: c["data"].__setitem__("max_len", 2.5), "data.max_len is 2.5, not an integer"),
     (lambda c: c["data"].__setitem__("split_seed", -1), "data: split_seed must be 0 or more"),
     (lambda c: c["data"].__setitem__("data", 5), "data.data is 5, not a string"),
     (lambda c: c["data"].__setitem__("clean", "no"), "data.clean is 'no', not true or false")],
)  # fmt: skip
def test_an_edited_config(run, capsys, change, match):
    edit_json(os.path.join(run, "config.json"), change)
    before = snapshot(run)
    where = os.path.join(run, "config.json")
    for argv in commands(run):
        err = error_of(capsys, argv)
        assert f"{where} was edited or is damaged (" in err and match in err, (argv, err)
        assert "restore the file or train the run again" in err, err
    assert snapshot(run) == before


def test_an_intact_run_still_resumes_and_evaluates(run, capsys):
    assert main(["train", "--resume", run, "--epochs", "3", "--quiet"]) == 0
    assert main(["evaluate", run]) == 0
