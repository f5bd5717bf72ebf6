"""Bad options and bad data on the command line: one ``cplxnet: error:`` line naming the problem
and the fix (exit status 1, or 2 for a malformed option value), never a traceback, and no run
folder left behind."""

from __future__ import annotations

import os

import pytest
import test_train_zoo as toy
from test_cli import TINY

import cplxnet.models as zoo
from cplxnet.cli import main
from cplxnet.engine.runs import RunError, check_model_memory


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return toy.write_toy_tsv(tmp_path_factory.mktemp("bad") / "toy.tsv", n=120)


def one_line_error(capsys, argv) -> tuple[int, str]:
    """Run ``cplxnet argv``; the exit status and the single stderr line it printed."""
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code
    err = capsys.readouterr().err
    assert err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return status, err


@pytest.mark.parametrize(
    "args, status, expected",
    [
        (["--seed", "-5"], 2, "argument --seed: expected a seed 0..2**63-1, got '-5'"),
        (["--seed", "99999999999999999999999"], 2, "expected a seed 0..2**63-1"),
        (["--split-seed", "-1"], 2, "argument --split-seed: expected a seed 0..2**63-1"),
        (["--lr", "inf"], 2, "argument --lr: expected a finite number, got inf"),
        (["--lr", "nan"], 2, "argument --lr: expected a finite number, got nan"),
        (["--dropout", "nan"], 2, "argument --dropout: expected a finite number"),
        (["--weight-decay=-inf"], 2, "argument --weight-decay: expected a finite number"),
        (["--clip-norm", "inf"], 2, "argument --clip-norm: expected a finite number"),
        (["--max-vocab", "2"], 1, "no room for a word (<pad> and <unk> take two); pass --max-"),
        (
            ["--encoding", "trainable", "--max-len", "1000000000000"],
            1,
            "the model would need 59604.6 GiB for its parameters (the largest, encoding.weight",
        ),
        (["--split", "quick", "--fold", "3"], 1, "--split quick and --fold 3 conflict"),
        (["--label-field", "text"], 1, "the label and the text are both the field 'text'"),
        (["--lr", "-1"], 1, "lr must be a finite number > 0, got -1.0"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_bad_options(toy_file, tmp_path, capsys, args, status, expected):
    run = tmp_path / "run"
    argv = ["train", "--data", toy_file, "--run-dir", str(run), *TINY, *args]
    got, err = one_line_error(capsys, argv)
    assert got == status and expected in err, err
    assert not run.exists()


def test_usage_errors_are_printed_by_rank_0_only(capsys, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(SystemExit) as exc:
        main(["train", "--seed", "-5"])
    assert exc.value.code == 2 and capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    status, err = one_line_error(capsys, ["train", "--seed", "-5"])
    assert status == 2 and "see cplxnet train --help" in err


def test_model_memory_is_checked_before_allocating():
    config = zoo.make_config("cnn", vocab_size=4, num_classes=2, d_model=8, encoding="trainable")
    small = check_model_memory(config, zoo)
    assert 0 < small < 1 << 20
    huge = zoo.make_config(
        "cnn", vocab_size=4, num_classes=2, d_model=8, encoding="trainable", max_len=10**8
    )
    with pytest.raises(RunError, match=r"5\.96 GiB|6\.0 GiB|--max-len 100000000"):
        check_model_memory(huge, zoo, limit=1 << 30)


@pytest.mark.parametrize(
    "content, args, expected",
    [
        ("label\ttext\npos\tgood\nneg\tbad\n", [], "the dev and test splits are empty (2 train"),
        (
            "label\ttext\npos\tgood\nneg\tbad\npos\tfun\n",
            [],
            "the dev split is empty (2 train, 0 dev, 1 test",
        ),
        (
            "label\ttext\npos\tgood\nneg\tbad\n",
            ["--test", "TOY"],
            "the dev split is empty (2 train, 0 dev, 120 test",
        ),
    ],
    ids=["two-lines", "three-lines", "two-lines-with-test"],
)
def test_tiny_data_is_refused_before_training(toy_file, tmp_path, capsys, content, args, expected):
    args = [toy_file if a == "TOY" else a for a in args]
    path = tmp_path / "tiny.tsv"
    path.write_text(content)
    run = tmp_path / "run"
    status, err = one_line_error(
        capsys, ["train", "--data", str(path), "--run-dir", str(run), *TINY, *args]
    )
    assert status == 1 and expected in err and "tiny.tsv" in err
    assert not run.exists()


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_word_vectors_with_nan_or_inf(toy_file, tmp_path, capsys, bad):
    vectors = tmp_path / "glove.txt"
    vectors.write_text("good " + " ".join(["0.1"] * 7 + [bad]) + "\n")
    run = tmp_path / "run"
    argv = ["train", "--data", toy_file, "--run-dir", str(run), *TINY, "--vectors", str(vectors)]
    status, err = one_line_error(capsys, argv)
    assert status == 1 and "glove.txt line 1: the vector of 'good' holds nan or inf" in err
    assert not run.exists()


def test_predict_and_evaluate_take_max_len_to_truncate(toy_file, tmp_path, capsys):
    run = str(tmp_path / "run")
    args = ["train", "--data", toy_file, "--run-dir", run, *TINY, "--encoding", "trainable"]
    assert main([*args, "--max-len", "32"]) == 0 and main(["predict", run, "good"]) == 0
    capsys.readouterr()
    long_text = "good " * 40
    assert main(["predict", run, long_text]) == 0  # the run itself truncates to 32
    run512 = str(tmp_path / "run512")
    assert main([*args[:4], run512, *args[5:]]) == 0  # no --max-len: the model's 512
    capsys.readouterr()
    status, err = one_line_error(capsys, ["predict", run512, "good " * 600])
    assert "text 1: the text has 600 tokens but the model's max_len is 512" in err
    assert "pass --max-len N" in err
    assert main(["predict", run512, "good " * 600, "--max-len", "100"]) == 0
    assert capsys.readouterr().out.split("\t")[0] in ("pos", "neg")
    status, err = one_line_error(capsys, ["predict", run512, "good", "--max-len", "600"])
    assert "--max-len 600 is more than the 512 positions" in err

    long_file = tmp_path / "long.tsv"
    long_file.write_text("label\ttext\npos\t" + "good " * 600 + "\nneg\tbad\n")
    status, err = one_line_error(capsys, ["evaluate", run512, "--data", str(long_file)])
    assert "long.tsv line 2: the text has 600 tokens" in err and "--max-len N" in err
    assert main(["evaluate", run512, "--data", str(long_file), "--max-len", "64"]) == 0
    assert "n=2" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--model", "decoder"], "--model decoder is a language model ('decoder'); train it"),
        (["--preset", "lm-char"], "--preset lm-char is a language model ('decoder'); train it"),
    ],
    ids=["model-decoder", "preset-lm-char"],
)
def test_a_language_model_without_task_lm(toy_file, tmp_path, capsys, args, expected):
    run = tmp_path / "run"
    argv = ["train", "--data", toy_file, "--run-dir", str(run), *TINY, *args]
    status, err = one_line_error(capsys, argv)
    assert status == 1 and expected in err and "with --task lm" in err, err
    assert not run.exists()


@pytest.mark.parametrize("task", [[], ["--task", "lm"]], ids=["classifier", "lm"])
def test_set_is_applied_with_the_other_model_options(toy_file, tmp_path, capsys, monkeypatch, task):
    """--d-model 6 --set num_heads=2 is one config: the width check sees both values."""
    import cplxnet.tasks.classify.task as classify
    import cplxnet.tasks.lm.task as lm

    got = []
    monkeypatch.setattr(classify, "train", lambda config, *a, **k: got.append(config))
    monkeypatch.setattr(lm, "train_lm", lambda config, *a, **k: got.append(config))
    run = tmp_path / "run"
    model = ["--model", "transformer"] if not task else ["--steps", "1"]
    argv = ["train", *task, "--data", toy_file, "--run-dir", str(run), "--quiet", *model]
    assert main([*argv, "--d-model", "6", "--set", "num_heads=2"]) == 0
    assert (got[0].d_model, got[0].num_heads) == (6, 2)
    assert main([*argv, "--d-model", "6", "--set", "num_heads=4", "--set", "d_model=8"]) == 0
    assert (got[1].d_model, got[1].num_heads) == (8, 4)  # --set wins over --d-model
    status, err = one_line_error(capsys, [*argv, "--d-model", "6", "--set", "num_heads=4"])
    assert status == 1 and "d_model=6 is not divisible by num_heads=4" in err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", *TINY, "--run-dir", "afile/sub"],
         "--run-dir afile/sub: afile is a file, not a folder; choose another --run-dir"),
        (["train", *TINY, "--run-dir", "afile"], "--run-dir afile is a file, not a folder"),
        (["train", "--task", "lm", "--steps", "1", "--run-dir", "afile/sub"],
         "--run-dir afile/sub: afile is a file, not a folder"),
        (["compare", "--dry-run", "--out", "afile/sub"],
         "--out afile/sub: afile is a file, not a folder; choose another --out"),
        (["train", *TINY, "--run-dir", ""],
         "--run-dir is empty; give a folder, or leave out --run-dir for its default"),
        (["train", "--task", "lm", "--steps", "1", "--run-dir", " "], "--run-dir is empty"),
        (["compare", "--dry-run", "--out", ""], "--out is empty; give a folder"),
        (["report", "adir", "--out", ""], "--out is empty; give a folder"),
        (["inspect", "adir", "--out", ""], "--out is empty; give a folder"),
        (["train", "--resume", "afile"], "afile is a file, not a run folder; give the folder"),
        (["evaluate", "afile"], "afile is a file, not a run folder"),
        (["predict", "afile", "a text"], "afile is a file, not a run folder"),
        (["inspect", "afile"], "afile is a file, not a run folder"),
        (["generate", "afile", "a text"], "afile is a file, not a run folder"),
        (["train", *TINY, "--vectors", "adir", "--run-dir", "run"],
         "adir: is a directory; give --vectors a word-vector text file"),
        (["predict", "nowhere", "--file", "adir"],
         "adir: is a directory; give a text file (one text per line)"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)  # fmt: skip
def test_a_file_where_a_folder_belongs(toy_file, tmp_path, capsys, monkeypatch, argv, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine")
    (tmp_path / "adir").mkdir()
    if argv[0] == "train" and "--task" not in argv:
        argv = [*argv, "--data", toy_file]
    status, err = one_line_error(capsys, argv)
    assert status == 1 and expected in err, err
    assert sorted(os.listdir(tmp_path)) == ["adir", "afile"]
    assert (tmp_path / "afile").read_text() == "mine"
