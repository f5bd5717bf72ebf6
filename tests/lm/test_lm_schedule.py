"""The language-model training recipe: warm-up + cosine learning rate to a floor (recorded in
metrics.jsonl, exact on resume), early stopping on dev loss, and their command-line options."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from cplxnet.cli import main
from cplxnet.engine.optimization import lr_at
from cplxnet.models import make_config
from cplxnet.tasks.classify.task import RunError
from cplxnet.tasks.lm import LMOptions, resume_lm, train_lm
from cplxnet.tasks.lm.task import LMTask

TINY = {"d_model": 8, "num_heads": 2, "dim_feedforward": 16, "num_layers": 1}


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "text.txt"
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "sleeps"]
    g = torch.Generator().manual_seed(0)
    lines = [
        " ".join(words[int(i)] for i in torch.randint(0, len(words), (9,), generator=g))
        for _ in range(60)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def metrics(run):
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_warmup_then_cosine_to_the_floor():
    lr, total, warm = 2.0, 12, 3
    curve = [
        lr_at(t, lr, total, schedule="cosine", warmup_steps=warm, min_lr_ratio=0.1)
        for t in range(total)
    ]
    assert curve[:warm] == pytest.approx([lr * (t + 1) / (warm + 1) for t in range(warm)])
    assert curve[warm] == pytest.approx(lr) and curve[-1] == pytest.approx(0.1 * lr)
    # the half-way point of the decay is the mean of the peak and the floor
    assert curve[warm + (total - 1 - warm) // 2] == pytest.approx((lr + 0.2) / 2)
    decay = curve[warm:]
    assert all(a > b for a, b in zip(decay, decay[1:]))
    # an explicit cosine at every decay step
    for t in range(warm, total):
        c = 0.5 * (1 + math.cos(math.pi * (t - warm) / (total - 1 - warm)))
        assert curve[t] == pytest.approx(0.2 + c * (lr - 0.2))
    assert [lr_at(t, lr, total, warmup_steps=2) for t in range(4)] == pytest.approx(
        [lr / 3, 2 * lr / 3, lr, lr]
    )
    with pytest.raises(ValueError, match="schedule"):
        lr_at(5, lr, total, schedule="linear")


def test_options_are_checked():
    for bad, match in (
        ({"schedule": "step"}, "schedule"),
        ({"warmup_steps": 99}, "warmup"),
        ({"min_lr_ratio": 1.5}, "min_lr_ratio"),
        ({"patience": 0}, "patience"),
    ):
        with pytest.raises(ValueError, match=match):
            LMOptions(steps=10, **bad)


def test_the_run_records_the_lr_curve_and_resumes_exactly(text_file, tmp_path):
    config = make_config("decoder", encoding="rotary", dropout=0.1, **TINY)
    options = LMOptions(
        steps=12,
        batch_size=4,
        eval_every=2,
        eval_multiples=(1,),
        lr=1e-2,
        schedule="cosine",
        warmup_steps=3,
        min_lr_ratio=0.2,
    )
    whole_dir = str(tmp_path / "whole")
    whole = train_lm(config, text_file, whole_dir, options, context=8, quiet=True)
    lines = metrics(whole_dir)
    assert [m["lr"] for m in lines] == pytest.approx([options.lr_at(m["step"] - 1) for m in lines])
    assert lines[-1]["lr"] == pytest.approx(0.2e-2)

    def kill(step, _):
        if step == 6:
            raise KeyboardInterrupt

    run = str(tmp_path / "killed")
    with pytest.raises(KeyboardInterrupt):
        train_lm(config, text_file, run, options, context=8, quiet=True, callback=kill)
    resumed = resume_lm(run, quiet=True)
    assert resumed["test"] == whole["test"] and metrics(run) == [
        {**m, "seconds": r["seconds"]} for m, r in zip(lines, metrics(run))
    ]
    a = torch.load(os.path.join(whole_dir, "checkpoint.pt"), weights_only=True)["model"]
    b = torch.load(os.path.join(run, "checkpoint.pt"), weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the schedule changed the training: a constant lr ends elsewhere
    flat = train_lm(
        config,
        text_file,
        str(tmp_path / "flat"),
        LMOptions(steps=12, batch_size=4, eval_every=2, eval_multiples=(1,), lr=1e-2),
        context=8,
        quiet=True,
    )
    assert flat["dev"] != whole["dev"]


def test_early_stopping_counts_evaluations(text_file, tmp_path, monkeypatch):
    losses = iter([3.0, 2.0, 2.5, 2.1, 2.2, 1.0, 0.5])  # best at the 2nd evaluation, then 3 worse

    def dev(self, model, batch_tokens):
        return {"loss": next(losses), "bpc": 1.0}

    monkeypatch.setattr(LMTask, "dev", dev)
    config = make_config("decoder", encoding="none", **TINY)
    options = LMOptions(steps=14, batch_size=2, eval_every=2, eval_multiples=(1,), patience=3)
    run = str(tmp_path / "stop")
    results = train_lm(config, text_file, run, options, context=8, quiet=True)
    assert [m["step"] for m in metrics(run)] == [2, 4, 6, 8, 10]
    assert results["steps"] == 10 and results["best_step"] == 4
    with pytest.raises(RunError, match="stopped early"):
        resume_lm(run, quiet=True)
    assert not LMOptions(steps=9, patience=3).stalled(
        [{"best": True}, {"best": False}, {"best": False}]
    )


def test_cli_options(text_file, tmp_path, capsys):
    run = str(tmp_path / "cli")
    code = main(
        [
            "train",
            "--task",
            "lm",
            "--data",
            text_file,
            "--context",
            "8",
            "--steps",
            "6",
            "--eval-every",
            "2",
            "--batch-size",
            "2",
            "--set",
            "d_model=8",
            "--set",
            "num_heads=2",
            "--set",
            "dim_feedforward=16",
            "--set",
            "num_layers=1",
            "--schedule",
            "cosine",
            "--warmup-steps",
            "2",
            "--min-lr-ratio",
            "0.5",
            "--patience",
            "5",
            "--dropout",
            "0.1",
            "--lr",
            "0.01",
            "--run-dir",
            run,
            "--quiet",
        ]
    )
    assert code == 0
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        config = json.load(fh)
    train = config["train"]
    assert (train["schedule"], train["warmup_steps"], train["min_lr_ratio"], train["patience"]) == (
        "cosine",
        2,
        0.5,
        5,
    )
    assert config["model"]["dropout"] == 0.1
    assert metrics(run)[-1]["lr"] == pytest.approx(0.005)
    capsys.readouterr()
    code = main(
        [
            "train",
            "--task",
            "lm",
            "--data",
            text_file,
            "--steps",
            "4",
            "--warmup-steps",
            "5",
            "--run-dir",
            str(tmp_path / "bad"),
        ]
    )
    assert code != 0 and "warmup_steps" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--task", "lm", "--min-lr-ratio", "2"])
    code = main(["train", "--schedule", "cosine", "--run-dir", str(tmp_path / "cls")])
    assert code != 0 and "--task lm" in capsys.readouterr().err


def test_compare_grid_takes_the_recipe(capsys, tmp_path):
    from cplxnet.compare.grid.lm import lm_grid_options

    options = lm_grid_options(train={"steps": 50, "schedule": "cosine", "warmup_steps": 5,
                                     "min_lr_ratio": 0.2, "patience": 3})  # fmt: skip
    train = options.to_dict()["lm"]["train"]
    assert (train["schedule"], train["warmup_steps"], train["min_lr_ratio"], train["patience"]) == (
        "cosine",
        5,
        0.2,
        3,
    )
    code = main(["compare", "--data", "mr", "--schedule", "cosine", "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 1 and "--schedule applies to --task lm; add --task lm or drop it" in err


def test_a_run_killed_as_it_stops_early_resumes_to_the_same_stop(text_file, tmp_path,
                                                                  monkeypatch):  # fmt: skip
    losses = iter([3.0, 2.0, 2.5, 2.1, 2.2, 1.0, 0.5])

    def dev(self, model, batch_tokens):
        return {"loss": next(losses), "bpc": 1.0}

    def kill(step, _):
        if step == 10:  # the evaluation that stops the run, before its test scores
            raise KeyboardInterrupt

    monkeypatch.setattr(LMTask, "dev", dev)
    config = make_config("decoder", encoding="none", **TINY)
    options = LMOptions(steps=14, batch_size=2, eval_every=2, eval_multiples=(1,), patience=3)
    run = str(tmp_path / "stop")
    with pytest.raises(KeyboardInterrupt):
        train_lm(config, text_file, run, options, context=8, quiet=True, callback=kill)
    results = resume_lm(run, quiet=True)
    assert results["steps"] == 10 and results["best_step"] == 4
    assert [m["step"] for m in metrics(run)] == [2, 4, 6, 8, 10]


# lr_at at the edges of the warm-up: a warm-up that ends on the last step
# (``warmup_steps = steps - 1``, which LMOptions accepts) leaves no decay steps, so the last
# step takes the peak rate instead of dividing by a zero-length decay.
@pytest.mark.parametrize("schedule", ["cosine", "constant"])
@pytest.mark.parametrize("total", [1, 2, 7])
def test_a_warmup_ending_on_the_last_step_peaks_there(schedule, total):
    lr, warm = 3.0, total - 1
    curve = [lr_at(t, lr, total, schedule=schedule, warmup_steps=warm) for t in range(total)]
    assert curve == pytest.approx([lr * (t + 1) / total for t in range(warm)] + [lr])


def test_options_with_the_longest_accepted_warmups_give_a_rate_at_every_step():
    for warm in (9, 10):  # steps - 1 and steps: both accepted by the options
        options = LMOptions(steps=10, schedule="cosine", warmup_steps=warm)
        curve = [options.lr_at(t) for t in range(10)]
        assert all(0 < r <= options.lr for r in curve)
        assert curve == sorted(curve)  # still warming up or at the peak: never decaying
