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


def test_a_text_stream_has_no_exact_match_to_monitor(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 40, encoding="utf-8")
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
    code = main(["compare", "--task", "lm", "--data", "mr", "--monitor", "accuracy", "--out",
                 str(tmp_path / "grid")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "--monitor accuracy needs synthetic tasks" in err
    assert not (tmp_path / "grid").exists()


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
    text, _ = render_lm_report([_synthetic_row()], str(tmp_path), options=options)
    words = "dev exact match" if monitor else "dev loss"
    assert f"evaluations without a better {words}" in text
    assert f"{words} at L chooses the checkpoint" in text
