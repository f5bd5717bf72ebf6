"""``LMOptions.monitor``: the dev score that chooses best.pt and counts for patience (the dev loss,
or a synthetic task's dev exact match), through the library, the command lines and the report."""

from __future__ import annotations

import json
import os

import pytest
import torch

from cplxnet.cli import main
from cplxnet.compare.report.lm_curves import training_table
from cplxnet.compare.report.lm_report import render_lm_report
from cplxnet.models import make_config
from cplxnet.tasks.classify.task import RunError
from cplxnet.tasks.lm import LMOptions, resume_lm, train_lm
from cplxnet.tasks.lm.task import LMTask

TINY = {"d_model": 8, "num_heads": 2, "dim_feedforward": 16, "num_layers": 1}
# the dev loss falls at every evaluation; the exact match peaks at the 4th and ties it after
LOSSES = [3.0, 2.0, 1.5, 1.0, 0.8, 0.6, 0.4, 0.3]
EXACT = [0.1, 0.5, 0.5, 0.9, 0.9, 0.85, 0.9, 0.95]


def _metrics(run):
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture
def scripted_dev(monkeypatch):
    """Dev scores from LOSSES and EXACT in turn; records the weights at each evaluation."""
    scores, seen = iter(zip(LOSSES, EXACT)), []

    def dev(self, model, batch_tokens):
        loss, exact = next(scores)
        seen.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return {"loss": loss, "accuracy": exact}

    monkeypatch.setattr(LMTask, "dev", dev)
    return seen


def _train(tmp_path, name, **options):
    config = make_config("decoder", encoding="trainable", **TINY)
    o = LMOptions(steps=16, batch_size=4, eval_every=2, patience=3, **options)
    run = str(tmp_path / name)
    return run, train_lm(config, "synthetic:copy", run, o, context=3, quiet=True)


def test_exact_match_monitor_stops_after_patience_without_a_higher_one(tmp_path, scripted_dev):
    run, results = _train(tmp_path, "exact", monitor="accuracy")
    history = _metrics(run)
    # best at the 4th evaluation (0.9); 0.9, 0.85, 0.9 are not higher: stop at the 7th
    assert [m["step"] for m in history] == [2, 4, 6, 8, 10, 12, 14]
    assert [m["best"] for m in history] == [True, True, False, True, False, False, False]
    assert results["best_step"] == 8 and results["steps"] == 14
    assert results["dev"] == {"loss": 1.0, "accuracy": 0.9}
    best = torch.load(os.path.join(run, "best.pt"), weights_only=True)
    best = best.get("model", best)
    assert all(torch.equal(best[k], v) for k, v in scripted_dev[3].items())
    with pytest.raises(RunError, match="no better dev exact match in 3 evaluations"):
        resume_lm(run, quiet=True)
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        assert json.load(fh)["train"]["monitor"] == "accuracy"


def test_loss_monitor_is_the_default_and_never_stops_on_a_falling_loss(tmp_path, scripted_dev):
    run, results = _train(tmp_path, "loss")
    assert all(m["best"] for m in _metrics(run))
    assert results["steps"] == 16 and results["best_step"] == 16


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("the quick brown fox jumps over the lazy dog\n" * 40, encoding="utf-8")
    return path


def test_a_text_stream_has_no_exact_match_to_monitor(tmp_path, text, capsys):
    config = make_config("decoder", encoding="none", **TINY)
    run = tmp_path / "text"
    with pytest.raises(RunError, match="--monitor accuracy needs a synthetic task"):
        train_lm(config, str(text), str(run), LMOptions(monitor="accuracy"), context=8, quiet=True)
    assert not run.exists()  # nothing written
    code = main(["train", "--task", "lm", "--data", str(text), "--monitor", "accuracy",
                 "--run-dir", str(run)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "--monitor accuracy needs a synthetic task" in err
    assert "Traceback" not in err and not run.exists()
    # checked on the name, before the data is read (--epochs reads it to count the steps)
    gone = str(tmp_path / "gone.txt")
    code = main(["train", "--task", "lm", "--data", gone, "--epochs", "1", "--monitor",
                 "accuracy", "--run-dir", str(run)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "--monitor accuracy needs a synthetic task" in err and "gone" in err
    code = main(["compare", "--task", "lm", "--data", "mr", "--monitor", "accuracy", "--out",
                 str(tmp_path / "grid")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "--monitor accuracy needs a synthetic task" in err
    assert not (tmp_path / "grid").exists()
    # the library's grid refuses it before any cell runs
    from cplxnet.compare.grid.cells import CompareError
    from cplxnet.compare.grid.lm import expand_lm_grid, lm_grid_options
    from cplxnet.encodings.specs import parse_encodings

    options = lm_grid_options(train={"steps": 4, "monitor": "accuracy"})
    with pytest.raises(CompareError, match="--monitor accuracy needs a synthetic task"):
        expand_lm_grid([str(text)], [(parse_encodings("none")[0], ["real"])], [0], options)
    copy = expand_lm_grid(["synthetic:copy"], [(parse_encodings("none")[0], ["real"])], [0],
                          options)[0]  # fmt: skip
    assert len(copy) == 1


def test_resume_of_an_exact_match_run_ends_as_an_uninterrupted_one(tmp_path, monkeypatch):
    def scripted():
        scores = iter(zip(LOSSES, EXACT))
        monkeypatch.setattr(LMTask, "dev", lambda self, model, bt: dict(
            zip(("loss", "accuracy"), next(scores))))  # fmt: skip

    def kill(step, _):
        if step == 6:
            raise KeyboardInterrupt

    scripted()
    whole, expected = _train(tmp_path, "whole", monitor="accuracy")
    scripted()
    config = make_config("decoder", encoding="trainable", **TINY)
    o = LMOptions(steps=16, batch_size=4, eval_every=2, patience=3, monitor="accuracy")
    run = str(tmp_path / "cut")
    with pytest.raises(KeyboardInterrupt):
        train_lm(config, "synthetic:copy", run, o, context=3, quiet=True, callback=kill)
    got = resume_lm(run, quiet=True)
    assert _metrics(run) == [{**m, "seconds": n["seconds"]} for m, n in
                             zip(_metrics(whole), _metrics(run))]  # fmt: skip
    assert (got["best_step"], got["steps"], got["test"]) == (
        expected["best_step"], expected["steps"], expected["test"])  # fmt: skip


def test_a_text_run_whose_config_monitors_the_exact_match_is_damaged(tmp_path, text, capsys):
    config = make_config("decoder", encoding="none", **TINY)
    run = str(tmp_path / "text")
    options = LMOptions(steps=4, batch_size=2, eval_every=2, eval_multiples=(1,))
    train_lm(config, str(text), run, options, context=8, quiet=True)
    path = os.path.join(run, "config.json")
    with open(path, encoding="utf-8") as fh:
        edited = json.load(fh)
    edited["train"]["monitor"] = "accuracy"
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(edited, fh)
    before = _metrics(run)
    with pytest.raises(RunError, match="config.json is damaged .*--monitor accuracy needs"):
        resume_lm(run, steps=8, quiet=True)
    assert _metrics(run) == before  # the run is as it was
    assert main(["train", "--resume", run, "--steps", "8"]) == 1
    err = capsys.readouterr().err
    assert "--monitor accuracy needs a synthetic task" in err and "Traceback" not in err


def test_options_and_command_lines_check_the_monitor(tmp_path, capsys):
    with pytest.raises(ValueError, match="monitor must be one of loss, accuracy"):
        LMOptions(monitor="bpc")
    with pytest.raises(SystemExit):
        main(["train", "--task", "lm", "--monitor", "bpc"])
    assert "invalid choice" in capsys.readouterr().err
    code = main(["train", "--monitor", "accuracy", "--run-dir", str(tmp_path / "cls")])
    assert code != 0 and "--task lm" in capsys.readouterr().err
    from cplxnet.cli.compare_lm import lm_options_from_args
    from cplxnet.cli.main import build_parser

    args = build_parser().parse_args(["compare", "--task", "lm", "--data", "synthetic:copy",
                                      "--monitor", "accuracy"])  # fmt: skip
    _, options = lm_options_from_args(args)
    assert options.to_dict()["lm"]["train"]["monitor"] == "accuracy"


def _synthetic_row():
    history = [{"step": 100 * (i + 1), "dev_accuracy": a, "dev_loss": 1.0 / (i + 1),
                "best": True} for i, a in enumerate([0.1, 0.5, 0.8, 1.0, 1.0])]  # fmt: skip
    return {
        "status": "ok", "mode": "lm", "data": "synthetic:copy", "encoding": "rotary",
        "number": "real", "seed": 0, "metric": "accuracy", "context": 16, "parameters": 10,
        "test": {"1-16": {"accuracy": 1.0}}, "steps": 500, "train_seconds": 1.0,
        "train_cpu_seconds": 1.0, "history": history,
    }  # fmt: skip


@pytest.mark.parametrize(
    "monitor, checkpoint",
    [("accuracy", "the first with the highest dev exact match"), (None, "the lowest dev loss")],
)
def test_the_report_names_the_monitored_score(tmp_path, monitor, checkpoint):
    train = {"steps": 500, "batch_size": 32, "patience": 2}
    if monitor:
        train["monitor"] = monitor
    options = {"lm": {"context": 16, "train": train}}
    _, notes = training_table([_synthetic_row()], {}, options)
    assert checkpoint in notes[-1]
    counted = "patience counts evaluations without a higher one"
    assert (counted in notes[-1]) == (monitor == "accuracy")
    del train["patience"]  # without early stopping the note says nothing of patience
    assert counted not in training_table([_synthetic_row()], {}, options)[1][-1]
    train["patience"] = 2
    text, _ = render_lm_report([_synthetic_row()], str(tmp_path), options=options)
    words = "dev exact match" if monitor else "dev loss"
    assert f"evaluations without a better {words}" in text
    assert f"{words} at L chooses the checkpoint" in text
