"""The ``cplxnet`` command: train / evaluate / predict on a tiny file, and one clear error line
(exit status 1, no traceback) for every expected mistake.

Most cases call :func:`cplxnet.cli.main` in-process (an uncaught exception fails the test, so
"no traceback" is checked too); a few run the real entry points in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import test_train_zoo as toy

from cplxnet.cli import main

TINY = ["--model", "fasttext", "--d-model", "8", "--epochs", "2", "--lr", "0.05", "--quiet"]


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return toy.write_toy_tsv(tmp_path_factory.mktemp("cli") / "toy.tsv", n=120)


@pytest.fixture(scope="module")
def trained(toy_file, tmp_path_factory):
    run = str(tmp_path_factory.mktemp("cli-run") / "run")
    assert main(["train", "--data", toy_file, "--run-dir", run, *TINY]) == 0
    return run


def run_cli(*args, cwd=None, exe=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [exe] if exe else [sys.executable, "-m", "cplxnet"]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def error_of(capsys, argv) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    return err


# -- the happy path ---------------------------------------------------------------------------


@pytest.mark.slow
def test_train_evaluate_predict_in_subprocesses(toy_file, tmp_path, capsys):
    """train through ``python -m cplxnet``, predict through the installed ``cplxnet`` script;
    evaluate in-process (a third interpreter start would only re-test the entry point)."""
    run = str(tmp_path / "run")
    p = run_cli("train", "--data", toy_file, "--run-dir", run, *TINY[:-1], "--threads", "1")
    assert p.returncode == 0, p.stderr
    assert "test accuracy" in p.stdout and "epoch 2/2" in p.stdout
    assert {"config.json", "best.pt", "results.json"} <= set(os.listdir(run))
    with open(os.path.join(run, "results.json")) as fh:
        results = json.load(fh)

    assert main(["evaluate", run]) == 0
    assert f"accuracy {results['test_accuracy']:.4f}" in capsys.readouterr().out

    texts = tmp_path / "texts.txt"
    texts.write_text("a great fun plot\n\nthe dull actor\n")
    exe = shutil.which("cplxnet")
    p = run_cli("predict", run, "good film", "--file", str(texts), exe=exe)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 3 and [line.split("\t")[2] for line in lines] == [
        "good film",
        "a great fun plot",
        "the dull actor",
    ]
    assert all(line.split("\t")[0] in ("neg", "pos") for line in lines)
    assert all(0.5 <= float(line.split("\t")[1]) <= 1 for line in lines)


def test_predict_and_evaluate_json(trained, toy_file, capsys):
    assert main(["predict", trained, "good fun", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"label", "probability", "text"} and out["text"] == "good fun"
    assert main(["evaluate", trained, "--data", toy_file, "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["n"] == 120 and 0 <= metrics["macro_f1"] <= 1
    assert main(["evaluate", trained, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"] == f"test split of {toy_file}"


def test_evaluate_names_the_test_file_a_run_was_trained_with(toy_file, tmp_path, capsys):
    test = toy.write_toy_tsv(tmp_path / "test.tsv", n=30)
    run = str(tmp_path / "run")
    assert main(["train", "--data", toy_file, "--test", test, "--run-dir", run, *TINY]) == 0
    capsys.readouterr()
    assert main(["evaluate", run]) == 0
    out = capsys.readouterr().out
    assert "n=30" in out and f"({test})" in out


def test_default_run_dir_and_resume_extension(toy_file, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["train", "--data", toy_file, "--model", "fasttext", "--d-model", "8", "--quiet"]
    assert main([*args, "--epochs", "1"]) == 0
    (run,) = os.listdir(tmp_path / "runs")
    assert run.startswith("toy-fasttext-none-complex-")
    run = os.path.join("runs", run)
    err = error_of(capsys, ["train", "--resume", run])
    assert "already complete" in err and "--epochs N" in err
    assert main(["train", "--resume", run, "--epochs", "2", "--quiet"]) == 0
    with open(os.path.join(run, "metrics.jsonl")) as fh:
        assert len(fh.readlines()) == 2
    err = error_of(capsys, ["train", "--resume", run, "--lr", "0.1"])
    assert "drop --lr" in err
    err = error_of(capsys, ["train", "--resume", run, "--force"])  # not silently ignored
    assert "drop --force" in err


def test_word_vectors_from_the_command_line(toy_file, tmp_path, capsys):
    vec = tmp_path / "glove.txt"
    vec.write_text("good " + " ".join(["0.1"] * 8) + "\nbad " + " ".join(["-0.1"] * 8) + "\n")
    run = str(tmp_path / "run")
    args = ["train", "--data", toy_file, "--run-dir", run, *TINY[:-1], "--vectors", str(vec)]
    assert main(args) == 0
    assert "word vectors: 2 of" in capsys.readouterr().out
    bad = tmp_path / "bad.txt"
    bad.write_text("good 1 2 3\n")
    err = error_of(capsys, [*args[:-1], str(bad), "--force"])
    assert "bad.txt" in err and "d_model" in err


# -- one clear error per mistake --------------------------------------------------------------


def write(path, content):
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "missing.tsv: file not found"),
        ("", "empty.tsv: the file is empty"),
        ("label\ttext\npos\tgood\nneg bad\n", "malformed.tsv line 3: expected 2 tab-separated"),
        ("text\tcategory\ngood\tpos\n", "header.tsv line 1: the header ['text', 'category'] lacks"),
        (b"label\ttext\npos\tgood\nneg\tna\xefve\n", "latin1.tsv line 3: bytes that are not UTF-8"),
    ],
    ids=["missing", "empty", "malformed", "header", "latin1"],
)
def test_bad_data_files(tmp_path, capsys, content, expected):
    name = expected.split(":")[0].split(" ")[0]
    path = str(tmp_path / name) if content is None else write(tmp_path / name, content)
    run = str(tmp_path / "run")
    err = error_of(capsys, ["train", "--data", path, "--run-dir", run, *TINY])
    assert expected in err
    assert not os.path.exists(run)  # nothing half-written


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--model", "rnn"], "unknown model family 'rnn'; valid families are 'fasttext', 'cnn'"),
        (["--model", "cnn", "--encoding", "spiral"], "unknown encoding 'spiral'"),
        (["--preset", "huge"], "unknown preset 'huge'; valid presets are"),
        (["--data", "sst2"], "unknown dataset 'sst2': not a bundled dataset (mr, trec)"),
        (["--data", "trec", "--fold", "2"], "trec has a test set"),
        (["--data", "mr", "--fold", "12"], "fold 12 is out of range; valid folds are 0..9"),
    ],
)
def test_bad_names_and_options(tmp_path, capsys, args, expected):
    err = error_of(capsys, ["train", "--run-dir", str(tmp_path / "r"), "--quiet", *args])
    assert expected in err


def test_text_longer_than_the_model_max_len(tmp_path, capsys, toy_file):
    with open(toy_file) as fh:
        content = fh.read()
    long_file = write(tmp_path / "long.tsv", content + "pos\t" + "good " * 600 + "\n")
    run = str(tmp_path / "run")
    base = ["train", "--data", long_file, "--run-dir", run, *TINY]
    err = error_of(capsys, [*base, "--encoding", "trainable"])
    assert "long.tsv line 122: the text has 600 tokens but the model's max_len is 512" in err
    assert "--max-len" in err and not os.path.exists(run)
    assert main([*base, "--encoding", "trainable", "--max-len", "64"]) == 0  # asked to truncate
    assert main(["predict", run, "good " * 70]) == 0  # the run truncates: no error
    assert capsys.readouterr().out.startswith("pos\t")


def test_existing_run_folder_needs_force(trained, toy_file, capsys):
    before = os.path.getmtime(os.path.join(trained, "results.json"))
    err = error_of(capsys, ["train", "--data", toy_file, "--run-dir", trained, *TINY])
    assert f"run folder {trained} already exists; pass --force" in err
    assert f"--resume {trained} --epochs N" in err
    assert os.path.getmtime(os.path.join(trained, "results.json")) == before


def test_evaluate_and_predict_errors(trained, tmp_path, capsys):
    unseen = write(tmp_path / "unseen.tsv", "label\ttext\npos\tgood\nmeh\tfine I guess\n")
    err = error_of(capsys, ["evaluate", trained, "--data", unseen])
    assert "unseen.tsv line 3: label 'meh' never occurs in the training data" in err
    err = error_of(capsys, ["predict", trained, "good", "   "])
    assert "text 2: the text is empty" in err
    err = error_of(capsys, ["predict", trained])
    assert "nothing to classify" in err
    err = error_of(capsys, ["predict", trained, "--file", str(tmp_path / "none.txt")])
    assert "none.txt: file not found" in err
    for extra in ([], ["--context", "512"]):  # not "a classifier": the folder is missing
        err = error_of(capsys, ["evaluate", str(tmp_path / "no-such-run"), *extra])
        assert "no-such-run not found" in err
    long_text = "good " * 600
    err = error_of(capsys, ["predict", trained, long_text])
    assert "text 1: the text has 600 tokens but the model's max_len is 512" in err


def test_errors_in_a_subprocess_have_no_traceback(tmp_path):
    p = run_cli("train", "--model", "cnn", "--encoding", "spiral", cwd=str(tmp_path))
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("cplxnet: error: unknown encoding 'spiral'")
    assert "Traceback" not in p.stderr and not os.path.exists(tmp_path / "runs")


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--epochs", "zero"])
    assert exc.value.code == 2 and "expected a positive integer" in capsys.readouterr().err
