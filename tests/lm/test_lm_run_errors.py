"""Damaged, mismatched or foreign run folders and bad options of ``train --resume``, ``evaluate``
and ``generate`` on language-model runs: one line ``cplxnet: error: ...`` (exit status 1 or 2),
and the run folder is left exactly as it was."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from cli_errors import edit_json, error_of, snapshot
from lm_cli_args import TINY_LM as TINY

from cplxnet.cli import main
from cplxnet.engine.runs import file_sha256


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lmerr") / "text.txt"
    path.write_text("a rose is a rose is a rose\n" * 80, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def finished(text_file, tmp_path_factory):
    """A finished run with a trainable position table of 16 rows (context 16)."""
    run = str(tmp_path_factory.mktemp("lmerr-run") / "run")
    assert main(["train", "--data", text_file, "--context", "16", "--encoding", "trainable",
                 "--run-dir", run, *TINY]) == 0  # fmt: skip
    return run


@pytest.fixture
def run(finished, tmp_path):
    copy = str(tmp_path / "run")
    shutil.copytree(finished, copy)
    return copy


def edit_checkpoint(path: str, change) -> None:
    state = torch.load(path, weights_only=True)
    change(state)
    torch.save(state, path)


def other_weights(state):
    state["model"] = {k: torch.zeros(3) for k in state["model"]}


# ------------------------------------------------------------------------------------------------
# train --resume


def test_extending_with_a_damaged_checkpoint_leaves_the_folder_untouched(run, capsys):
    edit_checkpoint(os.path.join(run, "checkpoint.pt"), other_weights)
    before = snapshot(run)
    err = error_of(capsys, ["train", "--resume", run, "--steps", "8", "--quiet"])
    assert "checkpoint.pt does not fit" in err
    assert snapshot(run) == before  # results.json and config.json are still there, unchanged


@pytest.mark.parametrize(
    ("change", "match"),
    [(lambda s: s.pop("optimizers"), "no 'optimizers' entry"),
     (lambda s: s.pop("rng"), "no 'rng' entry"),
     (lambda s: s.__setitem__("step", "4"), "'step' is a str"),
     (lambda s: s.__setitem__("optimizers", [{"state": {}, "param_groups": []}]),
      "optimiser state"),
     (other_weights, "does not fit")],
)  # fmt: skip
def test_resume_with_a_mismatched_checkpoint(run, capsys, change, match):
    edit_checkpoint(os.path.join(run, "checkpoint.pt"), change)
    before = snapshot(run)
    assert match in error_of(capsys, ["train", "--resume", run, "--steps", "8", "--quiet"])
    assert snapshot(run) == before


@pytest.mark.parametrize(
    ("change", "match"),
    [(lambda c: c["model"].__setitem__("d_model", "abc"), "config.json"),
     (lambda c: c.pop("cplxnet_run"), "marker"),
     (lambda c: c.pop("train"), "no 'train' section"),
     (lambda c: c["data"].pop("source"), "config.json is damaged")],
)  # fmt: skip
def test_resume_evaluate_generate_with_a_damaged_config(run, capsys, change, match):
    edit_json(os.path.join(run, "config.json"), change)
    before = snapshot(run)
    for argv in (["train", "--task", "lm", "--resume", run, "--steps", "8", "--quiet"],
                 ["evaluate", run], ["generate", run, "a rose", "--tokens", "3"]):  # fmt: skip
        err = error_of(capsys, argv)
        if argv[0] != "evaluate" or "marker" not in match:  # evaluate then calls it a classifier
            assert match in err, (argv, err)
    assert snapshot(run) == before


def test_extending_a_finished_run_still_works(run):
    assert main(["train", "--resume", run, "--steps", "6", "--quiet"]) == 0
    with open(os.path.join(run, "results.json"), encoding="utf-8") as fh:
        assert json.load(fh)["steps"] == 6
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        assert json.load(fh)["train"]["steps"] == 6  # the new plan is recorded


def test_task_lm_resume_of_a_classifier_run(tmp_path, capsys):
    clf = tmp_path / "clf"
    clf.mkdir()
    (clf / "config.json").write_text(json.dumps({"cplxnet_run": 1, "model": {}, "train": {}}))
    before = snapshot(str(clf))
    err = error_of(capsys, ["train", "--task", "lm", "--resume", str(clf), "--quiet"])
    assert "is not a language-model run; resume it without --task lm" in err
    assert snapshot(str(clf)) == before


def _before_its_first_evaluation(run: str) -> None:
    """The finished run as it was before its first evaluation: no checkpoint, no metrics."""
    for name in ("checkpoint.pt", "best.pt", "metrics.jsonl", "results.json"):
        os.remove(os.path.join(run, name))


def test_a_run_killed_before_its_first_evaluation_names_force(run, capsys):
    """A run with no checkpoint at all (kill -9 before the first evaluation): resume, evaluate,
    generate and inspect name the fix that works (start it again with --force)."""
    _before_its_first_evaluation(run)
    before = snapshot(run)
    for argv in (["train", "--resume", run, "--quiet"], ["evaluate", run],
                 ["generate", run, "a rose"], ["inspect", run]):  # fmt: skip
        err = error_of(capsys, argv)
        assert "stopped before its first evaluation" in err and "--force" in err, (argv, err)
        assert "--resume" not in err, (argv, err)
    assert snapshot(run) == before


def test_a_run_still_training_before_its_first_evaluation_says_so(run, capsys):
    """The same folder while a trainer holds its lock: not "stopped", but still training."""
    from cplxnet.engine import runs

    _before_its_first_evaluation(run)
    before = snapshot(run)
    with runs.run_lock(run):
        for argv in (["evaluate", run], ["generate", run, "a rose"], ["inspect", run]):
            err = error_of(capsys, argv)
            assert "is still training (pid" in err and "wait until it writes its first" in err, err
            assert "--force" not in err and "stopped" not in err, (argv, err)
    assert snapshot(run) == before


def test_task_classify_resume_of_a_language_model_run(run, capsys):
    """``--task classify`` is not dropped silently: the run is a language model."""
    before = snapshot(run)
    err = error_of(capsys, ["train", "--task", "classify", "--resume", run, "--steps", "6"])
    assert "is a language-model run; resume it without --task classify" in err
    assert snapshot(run) == before


# ------------------------------------------------------------------------------------------------
# evaluate / generate


@pytest.mark.parametrize(
    ("name", "change", "match"),
    [("best.pt", other_weights, "best.pt does not fit"),
     ("best.pt", lambda s: s.pop("model"), "no 'model' entry")],
)  # fmt: skip
def test_evaluate_and_generate_with_a_mismatched_best_pt(run, capsys, name, change, match):
    edit_checkpoint(os.path.join(run, name), change)
    before = snapshot(run)
    assert match in error_of(capsys, ["evaluate", run])
    assert match in error_of(capsys, ["generate", run, "a rose", "--tokens", "3"])
    assert snapshot(run) == before


@pytest.mark.parametrize(
    ("extra", "match"),
    [(["--temperature", "-1"], "temperature >= 0"),
     (["--temperature", "nan"], "finite"),
     (["--seed", "99999999999999999999999"], "seed 0..2**63-1"),
     (["--seed", "-1"], "seed 0..2**63-1")],
)  # fmt: skip
def test_generate_bad_options_are_usage_errors(finished, capsys, extra, match):
    err = error_of(capsys, ["generate", finished, "a rose", "--tokens", "3", *extra], status=2)
    assert match in err


def test_tiny_temperatures_are_greedy(finished, capsys):
    capsys.readouterr()
    outs = []
    for t in ("0", "1e-320", "1e-9"):
        assert main(["generate", finished, "a rose", "--tokens", "10", "--temperature", t]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2] and len(outs[0]) == 11


def test_generate_past_a_trainable_table_names_the_context_limit(finished, capsys):
    before = snapshot(finished)
    err = error_of(capsys, ["generate", finished, "a rose is a rose is a rose is a rose",
                            "--tokens", "10", "--context", "40"])  # fmt: skip
    assert "use --context N <= 16" in err
    assert snapshot(finished) == before
    capsys.readouterr()  # a long prompt is fine at the trained context: the model sees its end
    assert main(["generate", finished, "a rose is a rose is a rose is a rose", "--tokens",
                 "3"]) == 0  # fmt: skip


def test_synthetic_prompt_longer_than_the_positions(tmp_path, capsys):
    run = str(tmp_path / "s")
    assert main(["train", "--data", "synthetic:copy", "--context", "2", "--encoding",
                 "trainable", "--run-dir", run, *TINY]) == 0  # fmt: skip
    err = error_of(capsys, ["generate", run, "abababab"])
    assert "cannot read" in err and "at most 6 tokens together" in err


# ------------------------------------------------------------------------------------------------
# train --task lm --set


def test_set_fields_reach_the_decoder(text_file, tmp_path):
    run = str(tmp_path / "r")
    assert main(["train", "--data", text_file, "--context", "8", "--set", "num_layers=1",
                 "--set", "decoder.num_heads=1", "--run-dir", run, *TINY]) == 0  # fmt: skip
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        model = json.load(fh)["model"]
    assert model["num_layers"] == 1 and model["num_heads"] == 1


@pytest.mark.parametrize(
    ("item", "match"),
    [("max_len=5", "takes max_len from --context"),
     ("vocab_size=5", "takes vocab_size from"),
     ("num_layers=abc", "expected an integer"),
     ("transformer.num_layers=1", "'decoder' model"),
     ("encoding=rotary", "use --encoding"),
     ("no_such_field=1", "no_such_field")],
)  # fmt: skip
def test_bad_set_fields(text_file, tmp_path, capsys, item, match):
    run = str(tmp_path / "r")
    err = error_of(capsys, ["train", "--data", text_file, "--context", "8", "--set", item,
                            "--run-dir", run, *TINY])  # fmt: skip
    assert match in err and not os.path.exists(run)


def test_existing_finished_run_hints_steps_not_epochs(finished, text_file, capsys):
    before = snapshot(finished)
    err = error_of(capsys, ["train", "--data", text_file, "--context", "16", "--run-dir",
                            finished, *TINY])  # fmt: skip
    assert f"already exists; pass --force to replace it (with --resume {finished} --steps N" in err
    assert snapshot(finished) == before


# ------------------------------------------------------------------------------------------------
# evaluate --context longer than the test part


def test_evaluate_past_the_test_part_reports_the_effective_window(text_file, tmp_path, capsys):
    run = str(tmp_path / "r")
    assert main(["train", "--data", text_file, "--context", "8", "--encoding", "rotary",
                 "--run-dir", run, *TINY]) == 0  # fmt: skip
    with open(os.path.join(run, "results.json"), encoding="utf-8") as fh:
        test_tokens = json.load(fh)["splits"]["test"]
    capsys.readouterr()
    assert main(["evaluate", run, "--context", "100000", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)["test"]["100000"]
    assert entry["window"] == test_tokens - 1 and entry["windows"] == 1
    assert main(["evaluate", run, "--context", "100000"]) == 0
    assert f"scored as one window of {test_tokens - 1:,} tokens" in capsys.readouterr().out
    assert main(["evaluate", run, "--context", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["test"]["4"]["window"] == 4
    assert main(["evaluate", run, "--context", "4"]) == 0
    assert "scored as one window" not in capsys.readouterr().out


def test_evaluate_past_a_trainable_table_checks_the_effective_length(finished, capsys):
    capsys.readouterr()  # the test part (about 100 tokens) is longer than the 16 positions
    assert main(["evaluate", finished, "--context", "100000", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)["test"]["100000"]
    assert entry["bpc"] is None and "n/a" in entry


@pytest.mark.parametrize("how", ["changed", "gone"])
def test_changed_or_missing_training_text_says_what_to_do(text_file, tmp_path, capsys, how):
    text = tmp_path / "t.txt"
    shutil.copy(text_file, text)
    run = str(tmp_path / "r")
    assert main(["train", "--data", str(text), "--context", "8", "--run-dir", run, *TINY]) == 0
    if how == "changed":
        text.write_text(text.read_text(encoding="utf-8") + "more\n", encoding="utf-8")
    else:
        text.unlink()
    before = snapshot(run)
    for argv in (["train", "--resume", run, "--steps", "6", "--quiet"], ["evaluate", run]):
        err = error_of(capsys, argv)
        assert how in err and "restore the file as it was" in err and "--force" in err
    assert snapshot(run) == before


def test_resume_on_a_changed_text_with_allow_changed_data(text_file, tmp_path, capsys):
    """One set of resume options for every task: --allow-changed-data continues a language-model
    run on its changed training text as it does a classifier's; a text that is gone still
    cannot be split."""
    text = tmp_path / "t.txt"
    shutil.copy(text_file, text)
    run = str(tmp_path / "r")
    assert main(["train", "--data", str(text), "--context", "8", "--run-dir", run, *TINY]) == 0
    text.write_text(text.read_text(encoding="utf-8") + "a rose again\n", encoding="utf-8")
    err = error_of(capsys, ["train", "--resume", run, "--steps", "6", "--quiet"])
    assert "changed" in err and "--allow-changed-data" in err
    recorded = file_sha256(text_file)
    argv = ["train", "--resume", run, "--steps", "6", "--quiet", "--allow-changed-data"]
    assert main(argv) == 0
    with open(os.path.join(run, "results.json"), encoding="utf-8") as fh:
        assert json.load(fh)["steps"] == 6
    # the run now records the text it continued on (and the one before), so it can be scored
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        data = json.load(fh)["data"]
    assert data["sha256"] == file_sha256(str(text)) and data["sha256_earlier"] == [recorded]
    assert main(["evaluate", run]) == 0
    capsys.readouterr()
    text.unlink()
    err = error_of(capsys, [*argv[:4], "8", *argv[5:]])
    assert str(text) in err and ("is gone" in err or "no such file" in err)
