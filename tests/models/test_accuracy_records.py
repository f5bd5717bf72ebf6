"""benchmarks/accuracy.py keeps one committed record per finished run: the report is rebuilt from
the records (no run folders needed), a record whose settings no longer match its preset is left
out, the 10-fold cross-validation rows group folds by seed, and the committed report agrees with
the committed records."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import statistics
import sys

import pytest

import cplxnet.models as models
from cplxnet.train import TrainOptions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def bench():
    path = os.path.join(ROOT, "benchmarks", "accuracy.py")
    spec = importlib.util.spec_from_file_location("accuracy_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _record(bench, key: str, seed: int, test: float, fold: int | None = None) -> dict:
    t = next(t for t in bench.TARGETS if t.key == key)
    model = json.loads(json.dumps(dataclasses.asdict(models.preset_config(t.preset))))
    train = TrainOptions(**{**models.PRESET_TRAINING.get(t.preset, {}), "seed": seed})
    return {
        "target": key,
        "seed": seed,
        "fold": fold,
        "command": f"cplxnet train --data {t.data} --preset {t.preset} --seed {seed}"
        + (f" --fold {fold}" if fold is not None else ""),
        "test": test,
        "dev": test,
        "best_epoch": 3,
        "epochs_run": 5,
        "seconds": 1.0,
        "threads": 1,
        "date": "2026-12-01",
        "torch": "2.13.0+cpu",
        "split": "quick",
        "model": model,
        "train": json.loads(json.dumps(dataclasses.asdict(train))),
    }


def _write(folder, record: dict) -> None:
    name = f"{record['target']}-seed{record['seed']}" + (
        f"-fold{record['fold']}" if record["fold"] is not None else ""
    )
    (folder / f"{name}.json").write_text(json.dumps(record))


def test_records_with_changed_settings_or_unknown_targets_are_left_out(bench, tmp_path) -> None:
    kept = _record(bench, "trec-cnn", 0, 0.9)
    changed = _record(bench, "trec-cnn", 1, 0.9)
    changed["model"]["dropout"] = 0.123
    retrained = _record(bench, "trec-cnn", 2, 0.9)
    retrained["train"]["lr"] = 0.5
    unknown = {**_record(bench, "trec-cnn", 0, 0.9), "target": "no-such-target"}
    for r in (kept, changed, retrained):
        _write(tmp_path, r)
    (tmp_path / "other.json").write_text(json.dumps(unknown))
    rows = bench.load_records(str(tmp_path))
    assert [(r["target"], r["seed"]) for r in rows] == [("trec-cnn", 0)]
    assert len(list(tmp_path.iterdir())) == 4  # nothing deleted


def test_a_recorded_run_is_reused_without_training(bench, tmp_path, monkeypatch) -> None:
    import cplxnet.cli

    record = _record(bench, "trec-kim-cnn", 1, 0.9)
    _write(tmp_path, record)

    def no_training(argv):
        raise AssertionError(f"trained again: {argv}")

    monkeypatch.setattr(cplxnet.cli, "main", no_training)
    t = next(t for t in bench.TARGETS if t.key == "trec-kim-cnn")
    assert bench.run_one(t, 1, None, str(tmp_path / "runs"), str(tmp_path), 1) == record
    record["model"]["num_filters"] = 7  # a retuned preset: the run is trained again
    _write(tmp_path, record)
    with pytest.raises(AssertionError, match="trained again"):
        bench.run_one(t, 1, None, str(tmp_path / "runs"), str(tmp_path), 1)


def test_cross_validation_rows_group_folds_by_seed(bench, tmp_path) -> None:
    rows = [_record(bench, "mr-kim-cnn", 0, 0.70 + 0.01 * k, fold=k) for k in range(10)]
    rows += [_record(bench, "mr-kim-cnn", 1, 0.80 + 0.01 * k, fold=k) for k in range(10)]
    rows += [_record(bench, "mr-kim-cnn", 2, 0.5, fold=k) for k in range(4)]  # unfinished seed
    rows += [_record(bench, "trec-kim-cnn", s, 0.9 + 0.01 * s) for s in range(3)]
    out = tmp_path / "ACCURACY.md"
    out.write_text("old table\n\n## What was tried\n\nhand-written log\n")
    bench.write_report(rows, str(out))
    text = out.read_text()
    seed_means = [0.745, 0.845]
    bold = next(line for line in text.splitlines() if "**mr-kim-cnn, 10-fold CV**" in line)
    assert f"{statistics.mean(seed_means):.4f} +- {statistics.stdev(seed_means):.4f}" in bold
    assert "| 2 |" in bold and "seeds 0, 1," in bold
    seed2 = next(line for line in text.splitlines() if "10-fold CV, seed 2" in line)
    assert "4 folds" in seed2 and "folds 0, 1, 2, 3 |" in seed2
    trec = next(line for line in text.splitlines() if line.startswith("| trec-kim-cnn |"))
    assert "0.9100 +- 0.0100" in trec
    assert text.endswith("## What was tried\n\nhand-written log\n")
    assert "old table" not in text


def test_committed_report_matches_the_committed_records(bench) -> None:
    """Every committed record has its preset's current settings (else the report would drop it)
    and appears in benchmarks/ACCURACY.md with its test and dev accuracy."""
    records = os.path.join(ROOT, "benchmarks", "accuracy-runs")
    files = sorted(f for f in os.listdir(records) if f.endswith(".json"))
    assert files
    rows = bench.load_records(records)
    assert len(rows) == len(files)
    with open(os.path.join(ROOT, "benchmarks", "ACCURACY.md"), encoding="utf-8") as fh:
        report = fh.read()
    for r in rows:
        mark = " (a)" if r.get("source") else ""  # records taken from a compare cell
        row = f"| `{r['command']}`{mark} | {r['test']:.4f} | {r['dev']:.4f} |"
        assert row in report, r["command"]


def test_a_finished_run_folder_becomes_a_record(bench, tmp_path, monkeypatch) -> None:
    """A run folder with results.json (an interrupted benchmark) is not trained again; its
    record is written from the folder's files."""
    import cplxnet.cli

    monkeypatch.setattr(cplxnet.cli, "main", lambda argv: pytest.fail(f"trained: {argv}"))
    t = next(t for t in bench.TARGETS if t.key == "mr-kim-cnn")
    expected = _record(bench, "mr-kim-cnn", 2, 0.75, fold=3)
    run = tmp_path / "runs" / "mr-kim-cnn-seed2-fold3"
    run.mkdir(parents=True)
    config = {"model": expected["model"], "train": expected["train"]}
    config["versions"] = {"torch": "2.13.0+cpu"}
    (run / "config.json").write_text(json.dumps(config))
    results = {"test_accuracy": 0.75, "dev_accuracy": 0.7, "best_epoch": 4, "epochs_run": 8}
    (run / "results.json").write_text(json.dumps({**results, "split": "cv fold 3"}))
    (run / "metrics.jsonl").write_text('{"seconds": 2.5}\n{"seconds": 3.0}\n')
    records = tmp_path / "records"
    record = bench.run_one(t, 2, 3, str(tmp_path / "runs"), str(records), 1)
    assert record["test"] == 0.75 and record["dev"] == 0.7 and record["seconds"] == 5.5
    assert record["command"] == "cplxnet train --data mr --preset kim-cnn --seed 2 --fold 3"
    assert json.loads((records / "mr-kim-cnn-seed2-fold3.json").read_text()) == record
    assert [r["fold"] for r in bench.load_records(str(records))] == [3]
