"""Grid expansion, resumable runs, errors recorded, parallel workers giving the same rows."""

from __future__ import annotations

import csv
import json
import os
import sys

import pytest
from compare_helpers import tiny_options

import cplxnet.compare.grid as grid_module
import cplxnet.compare.grid.classify as runner
from cplxnet.compare import (
    CompareError,
    expand_grid,
    parse_encodings,
    parse_folds,
    parse_numbers,
    parse_seeds,
    parse_sets,
    run_grid,
)
from cplxnet.compare.grid import RESULT_COLUMNS
from cplxnet.compare.grid.cells import data_spec

NATURAL = parse_numbers("natural")


def test_parse_seeds_folds_sets():
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("0,5,7-8") == [0, 5, 7, 8]
    assert parse_folds("quick") == [None]
    assert parse_folds("all") == list(range(10))
    assert parse_folds("3") == [3] and parse_folds("0-2,9") == [0, 1, 2, 9]
    with pytest.raises(CompareError, match="numbered 0..9"):
        parse_folds("1-10")
    assert parse_sets(["d_model=64", "cnn.kernel_sizes=2,3", "lstm.bidirectional=false"]) == {
        "*": {"d_model": 64},
        "cnn": {"kernel_sizes": [2, 3]},
        "lstm": {"bidirectional": False},
    }
    with pytest.raises(CompareError, match="--number"):
        parse_sets(["complex=true"])


def test_expansion_counts_and_order(options):
    encs = parse_encodings("none,sinusoidal,complex-order")
    cells, notes = expand_grid(
        ["mr", "trec"], ["fasttext", "cnn"], encs, NATURAL, [0, 1], [0, 1, 2], options
    )
    # MR: 3 folds, TREC: its test set -> (3 + 1) x 2 families x 3 encodings x 2 seeds
    assert len(cells) == 4 * 2 * 3 * 2
    assert len({c.cell_id for c in cells}) == len(cells)
    assert [c.seed for c in cells] == sorted(c.seed for c in cells)  # seed-major
    assert {c.fold for c in cells if c.data == "trec"} == {None}
    assert {c.fold for c in cells if c.data == "mr"} == {0, 1, 2}
    assert {(c.encoding.label, c.number) for c in cells} == {
        ("none", "real"),
        ("sinusoidal", "real"),
        ("complex-order", "complex"),
    }
    assert any("trec" in n and "test set" in n for n in notes)
    both, _ = expand_grid(["trec"], ["cnn"], encs, parse_numbers("both"), [0], [None], options)
    assert len(both) == 3 * 2


def test_invalid_combinations_skipped_with_note_or_error(options):
    encs = parse_encodings("none,rotary,t5")
    cells, notes = expand_grid(
        ["trec"], ["cnn", "transformer"], encs, NATURAL, [0], [None], options
    )
    assert {(c.family, c.encoding.label) for c in cells} == {
        ("cnn", "none"),
        ("transformer", "none"),
        ("transformer", "rotary"),
        ("transformer", "t5"),
    }
    assert any("cnn x rotary" in n and "no attention" in n for n in notes)
    with pytest.raises(CompareError, match="cannot run with any"):
        expand_grid(["trec"], ["cnn", "lstm"], encs, NATURAL, [0], [None], options)
    with pytest.raises(CompareError, match="unknown option"):
        expand_grid(
            ["trec"],
            ["cnn"],
            parse_encodings("complex-order:nope=1"),
            NATURAL,
            [0],
            [None],
            options,
        )
    with pytest.raises(CompareError, match="option phase must be true or false, got 'maybe'"):
        expand_grid(
            ["trec"], ["cnn"], parse_encodings("complex-order:phase=maybe"), NATURAL, [0],
            [None], options,
        )  # fmt: skip
    with pytest.raises(CompareError, match="unknown family"):
        expand_grid(["trec"], ["rnn"], encs, NATURAL, [0], [None], options)
    bad = tiny_options(sets={"*": {"num_filters": 4}})
    with pytest.raises(CompareError, match="num_filters"):
        expand_grid(["trec"], ["fasttext"], encs[:1], NATURAL, [0], [None], bad)


def test_ablations_and_relative_encodings_build(options):
    encs = parse_encodings("table4,shaw,xl,t5,deberta,rotary")
    cells, notes = expand_grid(
        ["synthetic"], ["transformer"], encs, parse_numbers("both"), [0], [None], options
    )
    assert not notes and len(cells) == len(encs) * 2


def _grid(options, families=("fasttext", "cnn"), encodings="none,complex-order", seeds=(0,)):
    cells, _ = expand_grid(
        ["synthetic"],
        list(families),
        parse_encodings(encodings),
        NATURAL,
        list(seeds),
        [None],
        options,
    )
    return cells


def test_run_writes_rows_and_resume_trains_nothing(tmp_path, options, monkeypatch):
    out = str(tmp_path / "out")
    cells = _grid(options)
    logs: list[str] = []
    rows = run_grid(cells, out, options, threads=1, log=logs.append)
    assert [r["cell_id"] for r in rows] == [c.cell_id for c in cells]
    assert all(r["status"] == "ok" for r in rows)
    for r in rows:
        assert 0.0 <= r["test_accuracy"] <= 1.0 and r["parameters"] > 0 and r["epochs_run"] == 1
    assert not os.listdir(os.path.join(out, "runs"))  # run folders removed after success
    with open(os.path.join(out, "results.csv"), encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == list(RESULT_COLUMNS)
    assert [(t["family"], t["encoding"], t["number"]) for t in table] == [
        (c.family, c.encoding.label, c.number) for c in cells
    ]
    with open(os.path.join(out, "results.json"), encoding="utf-8") as fh:
        assert len(json.load(fh)["rows"]) == len(cells)
    cells_dir = os.path.join(out, "cells")
    stamps = {f: os.path.getmtime(os.path.join(cells_dir, f)) for f in os.listdir(cells_dir)}

    def boom(*args, **kwargs):
        raise AssertionError("a done cell was trained again")

    monkeypatch.setattr(runner, "train_grid_cell", boom)
    logs.clear()
    again = run_grid(cells, out, options, threads=1, log=logs.append)
    assert "4 already done; 0 to run" in logs[0]
    assert [r["test_accuracy"] for r in again] == [r["test_accuracy"] for r in rows]
    assert stamps == {f: os.path.getmtime(os.path.join(out, "cells", f)) for f in stamps}
    # the grid grows: only the new seed runs
    monkeypatch.undo()
    logs.clear()
    bigger = run_grid(_grid(options, seeds=(0, 1)), out, options, threads=1, log=logs.append)
    assert "4 already done; 4 to run" in logs[0] and len(bigger) == 8


def test_other_budget_in_same_folder_is_refused(tmp_path, options):
    out = str(tmp_path / "out")
    cells = _grid(options, families=("fasttext",), encodings="none")
    run_grid(cells, out, options, threads=1, log=lambda m: None)
    other = tiny_options(train={"epochs": 2, "batch_size": 16})
    with pytest.raises(CompareError, match="train.epochs: was 1, now 2"):
        run_grid(cells, out, other, threads=1, log=lambda m: None)


def test_an_option_given_at_its_default_is_the_same_budget(tmp_path):
    """An option left out of an older grid.json and given now at the value the cells use anyway
    is the same budget; another value, or a value over a preset's, is a change."""
    from cplxnet.compare.grid.lm import lm_grid_options
    from cplxnet.compare.grid.store import ResultStore

    store = ResultStore(str(tmp_path))
    store.check_options(lm_grid_options(train={"steps": 4}))
    (tmp_path / "runs" / "a-cell").mkdir(parents=True)  # a cell ran: the budget is fixed
    store.check_options(lm_grid_options(train={"steps": 4, "monitor": "loss", "warmup_steps": 0}))
    with pytest.raises(CompareError, match="lm.train.monitor: was 'loss', now 'accuracy'"):
        store.check_options(lm_grid_options(train={"steps": 4, "monitor": "accuracy"}))

    store = ResultStore(str(tmp_path / "classify"))
    store.check_options(tiny_options())
    (tmp_path / "classify" / "cells").mkdir()
    (tmp_path / "classify" / "cells" / "a-cell.json").write_text("{}", encoding="utf-8")
    store.check_options(
        tiny_options(
            train={"epochs": 1, "batch_size": 16, "lr": 1e-3}, data={"split_seed": 0, "limit": None}
        )
    )
    with pytest.raises(CompareError, match="data.split_seed: was 0, now 1"):
        store.check_options(tiny_options(data={"split_seed": 1}))
    with pytest.raises(CompareError, match="train.lr: was 0.001, now 0.01"):
        store.check_options(tiny_options(train={"epochs": 1, "batch_size": 16, "lr": 1e-2}))

    store.check_options(tiny_options(data={"split_seed": None}))  # None: the default, 0

    from cplxnet.compare.grid.cells import parse_presets

    presets = parse_presets(["cnn=kim-cnn"])  # the preset trains 20 epochs
    store = ResultStore(str(tmp_path / "preset"))
    store.check_options(tiny_options(train={}, presets=presets))
    (tmp_path / "preset" / "runs" / "a-cell").mkdir(parents=True)
    with pytest.raises(CompareError, match="train.epochs: was not given, now 10"):  # 10 over 20
        store.check_options(tiny_options(train={"epochs": 10}, presets=presets))
    with pytest.raises(CompareError, match="train.patience: was not given, now None"):  # over 4
        store.check_options(tiny_options(train={"patience": None}, presets=presets))


def test_failing_cell_is_recorded_and_grid_goes_on(tmp_path, options, monkeypatch):
    out = str(tmp_path / "out")
    cells = _grid(options)
    real = runner.train_grid_cell

    def flaky(cell, opts, run_dir, **kwargs):
        if cell.family == "cnn" and cell.encoding.label == "none":
            raise RuntimeError("simulated failure")
        return real(cell, opts, run_dir, **kwargs)

    monkeypatch.setattr(runner, "train_grid_cell", flaky)
    logs: list[str] = []
    rows = run_grid(cells, out, options, threads=1, log=logs.append)
    status = {(r["family"], r["encoding"]): r["status"] for r in rows}
    assert status[("cnn", "none")] == "error" and list(status.values()).count("ok") == 3
    bad = next(r for r in rows if r["status"] == "error")
    assert bad["error"] == "RuntimeError: simulated failure"
    assert any("ERROR RuntimeError" in line for line in logs)
    logs.clear()
    run_grid(cells, out, options, threads=1, log=logs.append)  # errors count as done
    assert "0 to run" in logs[0] and "1 ended in an error" in logs[0]
    monkeypatch.setattr(runner, "train_grid_cell", real)
    rows = run_grid(cells, out, options, threads=1, retry_errors=True, log=lambda m: None)
    assert all(r["status"] == "ok" for r in rows)


def test_interrupted_cell_resumes_from_its_checkpoint(tmp_path, length_tsv):
    """A cell whose run folder holds a checkpoint (the process was stopped mid-cell) continues
    it and ends with the rows of an uninterrupted run."""
    from cplxnet.tasks.classify import task as engine

    opts = tiny_options(train={"epochs": 2, "batch_size": 16})
    cells, _ = expand_grid(
        [length_tsv], ["fasttext"], parse_encodings("none"), NATURAL, [0], [None], opts
    )
    whole = run_grid(cells, str(tmp_path / "a"), opts, threads=1, log=lambda m: None)[0]
    out = str(tmp_path / "b")
    grid_module.ResultStore(out).check_options(opts)
    cell = cells[0]
    run_dir = os.path.join(out, "runs", cell.cell_id)
    first = tiny_options(train={"epochs": 1, "batch_size": 16})
    from cplxnet.data import prepare_data

    config = grid_module.cell_config(cell.family, cell.encoding, cell.number, opts)
    data = prepare_data(data_spec(cell, opts), model_max_len=config.max_len)
    engine.train(config, data, run_dir, engine.TrainOptions(**first.train, seed=0), quiet=True)
    os.remove(os.path.join(run_dir, "results.json"))  # as if stopped after epoch 1 of 2
    with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as fh:
        run_config = json.load(fh)
    run_config["train"]["epochs"] = 2
    with open(os.path.join(run_dir, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(run_config, fh)
    row = run_grid(cells, out, opts, threads=1, log=lambda m: None)[0]
    assert row["resumed"] is True
    for key in ("dev_accuracy", "test_accuracy", "epochs_run", "best_epoch"):
        assert row[key] == whole[key]


def test_a_cell_run_trained_further_by_hand_is_not_taken_for_the_cell(tmp_path, length_tsv):
    """A kept cell run that ``cplxnet train --resume RUN --epochs 2`` took past the grid's budget
    of 1 epoch is not read back as the cell's result: the cell trains again with the grid's
    options (as a language-model cell does)."""
    from cplxnet.cli import main

    opts = tiny_options(train={"epochs": 1, "batch_size": 16})
    cells, _ = expand_grid(
        [length_tsv], ["fasttext"], parse_encodings("none"), NATURAL, [0], [None], opts
    )
    out = str(tmp_path / "grid")
    whole = run_grid(cells, out, opts, threads=1, keep_runs=True, log=lambda m: None)[0]
    run_dir = os.path.join(out, "runs", cells[0].cell_id)
    assert main(["train", "--resume", run_dir, "--epochs", "2", "--quiet"]) == 0
    os.remove(os.path.join(out, "cells", f"{cells[0].cell_id}.json"))  # not yet recorded
    row = run_grid(cells, out, opts, threads=1, log=lambda m: None)[0]
    assert row["resumed"] is False and row["epochs_run"] == 1
    for key in ("dev_accuracy", "test_accuracy", "best_epoch"):
        assert row[key] == whole[key]


def test_a_kept_cell_run_is_read_back_only_with_the_cells_model(tmp_path, length_tsv):
    """A finished but unrecorded cell run is read back when its config.json differs only in the
    fields set from the data, and trained again when its model differs (its d_model edited)."""
    opts = tiny_options(train={"epochs": 1, "batch_size": 16})
    cells, _ = expand_grid(
        [length_tsv], ["fasttext"], parse_encodings("none"), NATURAL, [0], [None], opts
    )
    out = str(tmp_path / "grid")
    run_grid(cells, out, opts, threads=1, keep_runs=True, log=lambda m: None)
    config = os.path.join(out, "runs", cells[0].cell_id, "config.json")
    for field, change, resumed in (("vocab_size", 1, True), ("d_model", 2, False)):
        with open(config, encoding="utf-8") as fh:
            stored = json.load(fh)
        stored["model"][field] += change
        with open(config, "w", encoding="utf-8") as fh:
            json.dump(stored, fh)
        os.remove(os.path.join(out, "cells", f"{cells[0].cell_id}.json"))  # not yet recorded
        row = run_grid(cells, out, opts, threads=1, keep_runs=True, log=lambda m: None)[0]
        assert row["resumed"] is resumed, field


@pytest.mark.slow
def test_parallel_jobs_give_the_same_rows(tmp_path, options):
    cells = _grid(options, families=("fasttext",), encodings="none,complex-order")
    one = run_grid(cells, str(tmp_path / "one"), options, jobs=1, threads=1, log=lambda m: None)
    logs: list[str] = []
    two = run_grid(
        cells, str(tmp_path / "two"), options, jobs=2, threads=1, log=logs.append, heartbeat=0.0
    )
    assert any(m.startswith("running: synthetic fasttext") for m in logs)  # progress lines
    keys = ("cell_id", "status", "dev_accuracy", "test_accuracy", "parameters", "best_epoch")
    assert [[r[k] for k in keys] for r in one] == [[r[k] for k in keys] for r in two]
    assert all(r["status"] == "ok" for r in two)
    assert os.path.exists(os.path.join(str(tmp_path / "two"), "logs", cells[0].cell_id + ".log"))


def test_extrapolation_cell_reports_every_bin(tmp_path, options):
    cells, _ = expand_grid(
        ["synthetic"],
        ["transformer"],
        parse_encodings("complex-order"),
        NATURAL,
        [0],
        [None],
        options,
        mode="extrapolate",
    )
    (row,) = run_grid(cells, str(tmp_path / "x"), options, threads=1, log=lambda m: None)
    assert row["status"] == "ok", row.get("error")
    assert [b["bin"] for b in row["bins"]] == ["2-6", "7-12", "13-24"]
    assert [b["n"] for b in row["bins"]] == [10, 10, 10]
    assert all(0.0 <= b["accuracy"] <= 1.0 for b in row["bins"])
    assert row["test_accuracy"] == row["bins"][0]["accuracy"]  # the engine's test = bin 1
    with open(os.path.join(str(tmp_path / "x"), "results.csv"), encoding="utf-8") as fh:
        lines = list(csv.DictReader(fh))
    assert [line["bin"] for line in lines] == ["2-6", "7-12", "13-24"]


@pytest.mark.parametrize("code, output", [(3, "worker output"), (3, ""), (130, "")])
def test_dead_worker_is_recorded_and_interrupted_worker_is_not(
    tmp_path, options, monkeypatch, code, output
):
    """A worker process that dies without writing its result is recorded as an error with the
    last line it printed, if any (the grid goes on); one stopped by Ctrl-C / SIGTERM (status
    130) is left to run again next time."""
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\necho '{output}'\nexit {code}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    cells = _grid(options, families=("fasttext",), encodings="none,complex-order")
    logs: list[str] = []
    out = str(tmp_path / "out")
    rows = run_grid(cells, out, options, jobs=2, threads=1, log=logs.append, heartbeat=0.0)
    if code == 130:
        assert rows == [] and sum("interrupted; it runs again" in m for m in logs) == 2
    else:
        assert [r["status"] for r in rows] == ["error", "error"]
        assert rows[0]["error"] == "worker exited with status 3" + (f": {output}" if output else "")
        assert any("ERROR worker exited" in m for m in logs)


def test_model_variant_sets_the_model_field_and_is_skipped_where_absent(options):
    """complex-order-real-proj builds the Transformer with real projection weights; families
    without the field skip it with a note (table4 with them still runs its encoding variants);
    asked for alone with such a family, nothing would run: an error."""
    from cplxnet.compare import cell_config, parse_encoding

    spec = parse_encoding("complex-order-real-proj")
    config = cell_config("transformer", spec, "complex", options)
    assert config.projection == "real" and config.encoding == "complex-order"
    plain = cell_config("transformer", parse_encoding("complex-order"), "complex", options)
    assert plain.projection == "complex"
    cells, notes = expand_grid(
        ["synthetic"], ["fasttext", "transformer"], parse_encodings("table4"), NATURAL, [0],
        [None], options,
    )  # fmt: skip
    labels = {(c.family, c.encoding.label) for c in cells}
    assert ("transformer", "complex-order-real-proj") in labels
    assert ("fasttext", "complex-order-real-proj") not in labels
    assert any("fasttext x complex-order-real-proj" in n and "no field projection" in n
               for n in notes)  # fmt: skip
    cells, _ = expand_grid(
        ["synthetic"], ["cnn"], parse_encodings("table4"), NATURAL, [0], [None], options
    )
    assert len(cells) == 6  # the encoding variants
    with pytest.raises(CompareError, match="family cnn has no usable encoding"):
        expand_grid(["synthetic"], ["cnn"], [spec], NATURAL, [0], [None], options)
