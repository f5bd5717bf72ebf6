"""``rotary-yarn`` in a language-model grid: the kept rotary run of each seed re-scored with YaRN
of factor ``n / L`` at each evaluation length, as its own cell, with no training; the scores
against an independent re-scoring, the exact equality at ``n = L``, re-runs that skip it, and
the one-line errors (no rotary column, no --keep-runs, a missing run, a classification grid)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest
from test_compare_lm import TINY_MODEL, _tiny_args, text_file  # noqa: F401 (a fixture)

import cplxnet.models as zoo
from cplxnet.cli import main
from cplxnet.compare.specs import parse_encoding
from cplxnet.encodings import RotaryEncoding
from cplxnet.engine.runs import load_checkpoint, load_weights
from cplxnet.tasks.lm import load_lm_run, scaled_models, score_stream


def _cells(out: str) -> dict[str, dict]:
    folder = os.path.join(out, "cells")
    rows = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as fh:
            row = json.load(fh)
        rows[row["encoding"]] = row
    return rows


def test_rotary_yarn_rescores_the_kept_rotary_runs(tmp_path, text_file, capsys):  # noqa: F811
    out = str(tmp_path / "g")
    args = _tiny_args(text_file, out, "rotary-yarn,rotary") + ["--keep-runs"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "grid: 2 cells, 0 already done; 2 to run" in printed
    cells = _cells(out)
    rotary, yarn = cells["rotary"], cells["rotary-yarn"]
    assert yarn["status"] == "ok" and yarn["encoding_spec"] == "rotary@eval:scaling=yarn"
    assert yarn["cell_id"].endswith("-decoder-rotary--eval-scaling-yarn-real-s0")
    assert yarn["rescored"]["cell_id"] == rotary["cell_id"]
    assert yarn["rescored"]["encoding_options"] == {"scaling": "yarn"}
    # its training is the rotary run's: same steps, dev, curve, parameters
    for key in ("steps", "best_step", "dev", "history", "parameters", "train_seconds"):
        assert yarn[key] == rotary[key], key
    # at L the very same model: equal bits; past L another model, another score
    assert yarn["test"]["8"] == rotary["test"]["8"]
    for n in ("16", "32", "64"):
        assert yarn["test"][n]["bpc"] != rotary["test"][n]["bpc"], n

    # an independent re-scoring: the run's best weights in a decoder whose rotary encoding is
    # built with yarn at factor n / 8
    run_dir = os.path.join(out, "runs", rotary["cell_id"])
    run = load_lm_run(run_dir)
    stream = run.task().data.test
    state = load_checkpoint(os.path.join(run_dir, "best.pt"), keys={"model": dict})["model"]
    for n in (16, 32, 64):
        options = {"scaling": "yarn", "factor": n / 8, "original_max_len": 8}
        model = zoo.build_model(dataclasses.replace(run.config, encoding_options=options))
        load_weights(model, state, "best.pt")
        want = score_stream(model.eval(), stream, n)["bpc"]
        assert yarn["test"][str(n)]["bpc"] == pytest.approx(want, rel=1e-6, abs=0), n
        rotaries = [m for m in scaled_models(run, {"scaling": "yarn"})(n).modules()
                    if isinstance(m, RotaryEncoding)]  # fmt: skip
        assert rotaries and all(
            (r.scaling, r.factor, r.scaling_options["original_max_len"]) == ("yarn", n / 8, 8)
            for r in rotaries
        )
    assert scaled_models(run, {"scaling": "yarn"})(8) is run.model

    # a re-run skips both; the report has its own row
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "2 already done; 0 to run" in printed
    assert "| rotary-yarn | " in printed and "| rotary | " in printed

    # the rotary run gone: the re-scored cell fails with one line naming it and the fix
    shutil.rmtree(run_dir)
    os.remove(os.path.join(out, "cells", yarn["cell_id"] + ".json"))
    assert main(args) == 0
    printed = capsys.readouterr().out
    line = next(x for x in printed.splitlines() if "ERROR" in x)
    want = (
        f"CompareError: rotary-yarn re-scores runs/{rotary['cell_id']}, which is missing: "
        "train that cell with --keep-runs (delete its cells/ file), then --retry-errors"
    )
    assert want in line and _cells(out)["rotary-yarn"]["error"] == want


def test_rotary_yarn_on_copy_keeps_the_training_bin(tmp_path):
    out = str(tmp_path / "c")
    args = ["compare", "--task", "lm", "--data", "synthetic:copy", "--encodings",
            "rotary,rotary-yarn", "--seeds", "1", "--steps", "4", "--eval-every", "2",
            "--context", "3", "--batch-size", "4", "--threads", "1", *TINY_MODEL, "--keep-runs",
            "--no-report", "--out", out]  # fmt: skip
    assert main(args) == 0
    cells = _cells(out)
    rotary, yarn = cells["rotary"], cells["rotary-yarn"]
    assert list(yarn["test"]) == ["1-3", "4-6", "7-12"]
    assert yarn["test"]["1-3"] == rotary["test"]["1-3"]


def test_randomized_eval_rescores_at_random_positions_on_copy(tmp_path):
    """randomized-eval:base=rotary re-scores the kept randomized run of each seed with sorted
    random positions at evaluation, at every bin (the training bin too), reproducibly; an
    independent re-scoring (the run's weights in a decoder built with eval_positions="random")
    gives the same exact match."""
    out = str(tmp_path / "c")
    args = ["compare", "--task", "lm", "--data", "synthetic:copy", "--encodings",
            "randomized:base=rotary,randomized-eval:base=rotary", "--seeds", "1", "--steps", "40",
            "--eval-every", "20", "--context", "3", "--batch-size", "16", "--lr", "1e-2",
            "--threads", "1", *TINY_MODEL, "--keep-runs", "--no-report", "--out", out]  # fmt: skip
    assert main(args) == 0
    cells = _cells(out)
    trained, rescored = cells["randomized:base=rotary"], cells["randomized-eval:base=rotary"]
    assert rescored["status"] == "ok", rescored.get("error")
    assert rescored["encoding_spec"] == "randomized:base=rotary@eval:eval_positions=random"
    assert rescored["rescored"]["cell_id"] == trained["cell_id"]
    assert rescored["rescored"]["factor"].startswith("none")
    assert rescored["history"] == trained["history"]
    run = load_lm_run(os.path.join(out, "runs", trained["cell_id"]))
    task = run.task().synthetic
    state = load_checkpoint(os.path.join(run.run_dir, "best.pt"), keys={"model": dict})["model"]
    options = {**run.config.encoding_options, "eval_positions": "random"}
    model = zoo.build_model(dataclasses.replace(run.config, encoding_options=options))
    load_weights(model, state, "best.pt")
    differs = False
    for name, lo, hi in task.bins():
        prompts = task.test_prompts(lo, hi)
        want = task.accuracy(model.eval(), prompts)
        assert rescored["test"][name]["accuracy"] == want, name
        differs |= want != task.accuracy(run.model, prompts)
    assert differs  # other positions, other answers somewhere


def test_rotary_yarn_errors(tmp_path, text_file, capsys):  # noqa: F811
    out = str(tmp_path / "x")
    cases = [
        (_tiny_args(text_file, out, "rotary-yarn,alibi") + ["--keep-runs"],
         "rotary-yarn (real) re-scores the runs of rotary (real); add rotary to --encodings"),
        (_tiny_args(text_file, out, "rotary,rotary-yarn"),
         "rotary-yarn re-scores the run folders of the cells it names: add --keep-runs"),
        (_tiny_args(text_file, out, "rotary:base=500,rotary-yarn") + ["--keep-runs"],
         "add rotary to --encodings"),
        (_tiny_args(text_file, out, "rotary,rotary-yarn:scaling=ntk") + ["--keep-runs"],
         "scaling is set at evaluation by rotary-yarn; drop it"),
        (["compare", "--data", "mr", "--encodings", "rotary,rotary-yarn", "--out", out],
         "rotary-yarn re-scores language-model runs with options set at evaluation; use it "
         "with --task lm"),
    ]  # fmt: skip
    for args, message in cases:
        assert main(args) == 1, args
        err = capsys.readouterr().err
        assert err.startswith("cplxnet: error: ") and message in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(out)


def test_eval_variant_spec_round_trips():
    spec = parse_encoding("rotary-yarn:base=500")
    assert (spec.name, spec.options, spec.evaluation) == ("rotary", {"base": 500},
                                                          {"scaling": "yarn"})  # fmt: skip
    assert spec.trained.canonical == "rotary:base=500" and not spec.trained.evaluation
    assert spec.slug != spec.trained.slug
    again = type(spec).from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and "evaluation" not in parse_encoding("rotary").to_dict()
    spec = parse_encoding("randomized-eval:base=rotary:eval_seed=3")
    assert spec.options == {"base": "rotary"}
    assert spec.evaluation == {"eval_positions": "random", "eval_seed": 3}
    assert spec.trained.canonical == "randomized:base=rotary"


@pytest.mark.parametrize(
    "executor", [["--jobs", "2"], ["--executor", "dask", "--jobs", "2"]], ids=["local", "dask"]
)
def test_rotary_yarn_waits_for_its_run_when_cells_run_in_parallel(
    tmp_path,
    text_file,  # noqa: F811
    capsys,
    executor,
):
    """With two cells at a time the re-scoring cell is not started beside the rotary cell it
    reads: it starts once that run has ended (on Dask, in the client, where the kept run is)."""
    if "dask" in executor:
        pytest.importorskip("distributed")
    out = str(tmp_path / "g")
    args = _tiny_args(text_file, out, "rotary,rotary-yarn") + ["--keep-runs", *executor]
    assert main(args) == 0
    capsys.readouterr()
    cells = _cells(out)
    assert cells["rotary"]["status"] == "ok"
    assert cells["rotary-yarn"]["status"] == "ok", cells["rotary-yarn"].get("error")
    assert cells["rotary-yarn"]["test"]["8"] == cells["rotary"]["test"]["8"]


def test_each_rescored_cell_follows_the_trained_cell_it_reads():
    """A re-scored cell runs right after the trained cell whose kept run it reads, so a grid that
    is stopped and moves to another machine (leaving its runs/ behind) loses no run that a
    re-scored cell still needs, except the one being trained."""
    from cplxnet.compare.grid.lm import expand_lm_grid, lm_grid_options, parse_lm_encodings

    encodings = parse_lm_encodings("rotary-yarn,none,rotary,randomized-eval:base=rotary,"
                                   "randomized:base=rotary", ("real",))  # fmt: skip
    cells, _ = expand_lm_grid(["synthetic:copy"], encodings, [0, 1], lm_grid_options())
    order = [(c.seed, c.encoding.label) for c in cells]
    labels = ["none", "rotary", "rotary-yarn", "randomized:base=rotary",
              "randomized-eval:base=rotary"]  # fmt: skip
    assert order == [(s, label) for s in (0, 1) for label in labels]
