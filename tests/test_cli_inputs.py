"""Command-line inputs of the classifier and language-model commands: options before or after
``predict``'s texts, the language-model limits and hints (a too long ``--context`` suggests the
context that fits, synthetic data needs ``--task lm``, classifier options on a language-model
run are refused) and the top-level description."""

from __future__ import annotations

import json
import re

import pytest
import test_train_zoo as toy

from cplxnet.cli import main
from cplxnet.data import DataError
from cplxnet.tasks.lm.data import prepare_lm_data

TINY = ["--model", "fasttext", "--d-model", "8", "--epochs", "1", "--lr", "0.05", "--quiet"]
LM_TINY = ["--task", "lm", "--d-model", "8", "--steps", "2", "--eval-every", "2", "--batch-size",
           "4", "--quiet", "--threads", "1"]  # fmt: skip


def error_of(capsys, argv, status=1) -> str:
    assert main(argv) == status
    err = capsys.readouterr().err
    assert err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    return err


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    data = toy.write_toy_tsv(tmp_path_factory.mktemp("inputs") / "toy.tsv", n=60)
    run = str(tmp_path_factory.mktemp("inputs-run") / "run")
    assert main(["train", "--data", str(data), "--run-dir", run, *TINY]) == 0
    return run


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs-lm") / "text.txt"
    path.write_text("a rose is a rose is a rose\n" * 40, encoding="utf-8")
    run = str(tmp_path_factory.mktemp("inputs-lm-run") / "run")
    assert main(["train", "--data", str(path), "--context", "8", "--run-dir", run, *LM_TINY]) == 0
    return run


# -- predict: options before or after the texts ---------------------------------------------


@pytest.mark.parametrize(
    "order",
    [
        ["--json", "good fun", "dull"],
        ["good fun", "--json", "dull"],
        ["good fun", "dull", "--json"],
        ["--max-len", "5", "good fun", "dull", "--json"],
        ["good fun", "--max-len", "5", "dull", "--json"],
    ],
)
def test_predict_options_anywhere(classifier, capsys, order):
    assert main(["predict", classifier, *order]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["text"] for line in lines] == ["good fun", "dull"]


def test_predict_max_len_after_the_text(classifier, capsys):
    assert main(["predict", classifier, "--max-len", "5", "a film"]) == 0
    assert capsys.readouterr().out.endswith("\ta film\n")
    assert main(["predict", classifier, "a film", "--max-len", "5"]) == 0
    assert capsys.readouterr().out.endswith("\ta film\n")


# -- language models ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [100, 999, 5_000, 45_926])
def test_a_too_long_context_suggests_the_longest_that_fits(tmp_path, n):
    path = tmp_path / "t.txt"
    path.write_text("ab c" * (n // 4) + "x" * (n % 4), encoding="utf-8")
    with pytest.raises(DataError) as info:
        prepare_lm_data(str(path), "char", 100_000)
    most = int(re.search(r"--context (\d+) or less", str(info.value)).group(1))
    assert most < n // 19  # the dev and test parts are 5% each
    prepare_lm_data(str(path), "char", most)  # the suggestion works
    with pytest.raises(DataError):
        prepare_lm_data(str(path), "char", most + 1)  # and is the limit


def test_synthetic_data_without_task_lm_says_to_add_it(tmp_path, capsys):
    err = error_of(capsys, ["train", "--data", "synthetic:copy", "--run-dir", str(tmp_path / "r")])
    assert "add --task lm" in err


@pytest.mark.parametrize(
    "extra",
    [["--max-len", "5"], ["--format", "csv"], ["--label-field", "y"], ["--text-field", "x"]],
)
def test_evaluate_of_a_language_model_refuses_classifier_options(lm_run, capsys, extra):
    err = error_of(capsys, ["evaluate", lm_run, *extra])
    assert extra[0] in err and "language model" in err


def test_top_level_help_names_every_task(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "text classifiers only" not in out
    assert "language models" in out and "compare" in out
