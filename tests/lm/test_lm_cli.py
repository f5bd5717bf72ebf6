"""``cplxnet train --task lm``, ``evaluate RUN --context N``, ``generate``, and one clear error
line (exit status 1, no traceback) for each bad input."""

from __future__ import annotations

import json
import os

import pytest
from lm_cli_args import TINY_LM as TINY

from cplxnet.cli import main


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lmcli") / "text.txt"
    path.write_text("a rose is a rose is a rose\n" * 80, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def trained(text_file, tmp_path_factory):
    run = str(tmp_path_factory.mktemp("lmcli-run") / "run")
    assert main(["train", "--data", text_file, "--context", "8", "--run-dir", run, *TINY]) == 0
    return run


def error_of(capsys, argv) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    return err


def test_train_evaluate_generate(trained, capsys):
    with open(os.path.join(trained, "results.json"), encoding="utf-8") as fh:
        results = json.load(fh)
    assert list(results["test"]) == ["8", "16", "32", "64"]
    capsys.readouterr()
    assert main(["evaluate", trained, "--context", "12", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["test"]) == ["12"] and out["metric"] == "bpc"
    assert main(["evaluate", trained]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[0].startswith("context 8: bpc ")
    assert main(["generate", trained, "a rose", "--tokens", "12", "--seed", "2"]) == 0
    first = capsys.readouterr().out
    assert main(["generate", trained, "a rose", "--tokens", "12", "--seed", "2"]) == 0
    printed = capsys.readouterr()
    assert printed.out == first and len(first) == 13  # 12 characters + newline
    assert printed.err == ""  # every prompt character is in the run's vocabulary


def test_generate_notes_prompt_tokens_the_run_never_had(trained, capsys):
    """Characters outside the training text are read as <unk>: a note on stderr names them
    (each once), and the text on stdout is the same as the library's."""
    from cplxnet.tasks.lm import generate_text, load_lm_run, unknown_prompt_tokens

    prompt = "a Rosé! é"
    run = load_lm_run(trained)
    assert unknown_prompt_tokens(run, prompt) == ["R", "é", "!"]
    assert main(["generate", trained, prompt, "--tokens", "5", "--seed", "1"]) == 0
    printed = capsys.readouterr()
    assert printed.err == ("note: the prompt has 3 token(s) the run's training text never had "
                           "('R' 'é' '!'); the model reads each as <unk>\n")  # fmt: skip
    assert printed.out == generate_text(run, prompt, 5, seed=1) + "\n"


def test_resume_of_a_finished_run_is_a_clear_error(trained, capsys):
    assert "already complete" in error_of(capsys, ["train", "--resume", trained, "--quiet"])
    assert "drop --lr" in error_of(capsys, ["train", "--resume", trained, "--lr", "0.1"])


def test_synthetic_and_real_twin(tmp_path, capsys):
    run = str(tmp_path / "s")
    assert (
        main(
            [
                "train",
                "--data",
                "synthetic:reverse",
                "--context",
                "2",
                "--real",
                "--encoding",
                "none",
                "--run-dir",
                run,
                *TINY,
            ]
        )
        == 0
    )
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        model = json.load(fh)["model"]
    assert model["complex"] is False and model["dim_feedforward"] == 512  # the twin of lm-char
    capsys.readouterr()
    assert main(["evaluate", run]) == 0
    assert capsys.readouterr().out.startswith("prompt lengths 1-2: exact-match accuracy ")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"\x00\x01\x02binary" * 50, "binary"),
        (b"", "empty"),
        (b"short text", "too short"),
        (b"x" * 100, "larger than the data"),
    ],
)
def test_bad_text_files(tmp_path, capsys, content, match):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    context = "200" if match == "larger than the data" else "8"
    run = str(tmp_path / "run")
    err = error_of(
        capsys, ["train", "--data", str(path), "--context", context, "--run-dir", run, *TINY]
    )
    assert match in err and not os.path.exists(run)  # nothing created


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--model", "cnn"], "causal decoder"),
        (["--preset", "default"], "not a language model"),
        (["--fold", "2"], "--fold applies to classifiers, not to --task lm; drop it"),
        (
            ["--fold", "2", "--compile"],
            "--fold, --compile apply to classifiers, not to --task lm; drop them",
        ),
        (["--data", "synthetic:sort"], "unknown synthetic task"),
        (["--data", "synthetic:copy", "--tokens", "word"], "own symbols"),
        (["--data", "nope.txt"], "no such file"),
        (["--encoding", "nope"], "unknown encoding"),
        (["--encoding", "rotary:bse=3"], "unknown option(s) 'bse'"),
        (["--epochs", "1"], "either --steps or --epochs"),
    ],
)
def test_bad_options(tmp_path, capsys, text_file, extra, match):
    argv = ["train", "--data", text_file, "--run-dir", str(tmp_path / "r"), *TINY, *extra]
    assert match in error_of(capsys, argv)


def test_lm_options_without_task_lm_and_mixed_commands(trained, tmp_path, capsys):
    assert "--context applies to language models; add --task lm" in error_of(
        capsys, ["train", "--context", "8", "--run-dir", str(tmp_path / "x")]
    )
    assert "--context, --steps apply to language models; add --task lm" in error_of(
        capsys, ["train", "--context", "8", "--steps", "3", "--run-dir", str(tmp_path / "x")]
    )
    assert "language model" in error_of(capsys, ["predict", trained, "a text"])
    assert "own test part" in error_of(capsys, ["evaluate", trained, "--data", "x.tsv"])
    assert f"--max-len applies to classifier runs; {trained} is a language model: drop it " in (
        error_of(capsys, ["evaluate", trained, "--max-len", "5"])
    )
    assert "empty" in error_of(capsys, ["generate", trained, ""])
    assert "not found" in error_of(capsys, ["generate", str(tmp_path / "none"), "a"])


def test_epochs_become_steps(text_file, tmp_path):
    run = str(tmp_path / "e")
    argv = [
        "train",
        "--task",
        "lm",
        "--data",
        text_file,
        "--context",
        "8",
        "--epochs",
        "1",
        "--batch-size",
        "64",
        "--d-model",
        "8",
        "--quiet",
        "--run-dir",
        run,
    ]
    assert main(argv) == 0
    with open(os.path.join(run, "results.json"), encoding="utf-8") as fh:
        assert json.load(fh)["steps"] == 4  # ceil(1,944 training characters / (64 x 8))


def test_encoding_options_reach_the_decoder(text_file, tmp_path):
    """``--encoding NAME:option=value`` is parsed as for classifiers (member options too)."""
    run = str(tmp_path / "r")
    argv = ["train", "--data", text_file, "--context", "8", "--run-dir", run, *TINY,
            "--encoding", "complex-order+rotary:rotary.base=500"]  # fmt: skip
    assert main(argv) == 0
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        model = json.load(fh)["model"]
    assert model["encoding"] == "complex-order+rotary"
    assert model["encoding_options"] == {"rotary.base": 500}
