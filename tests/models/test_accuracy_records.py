"""benchmarks/accuracy.py keeps one committed record per finished run: the report is rebuilt from
the records (no run folders needed), a record whose settings no longer match its preset is left
out, the 10-fold cross-validation rows group folds by seed, and the committed report agrees with
the committed records."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics

import pytest

import cplxnet.models as models
from cplxnet.data import DataSpec
from cplxnet.tasks.classify.task import TrainOptions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def bench(accuracy_benchmark):
    return accuracy_benchmark


def _record(bench, key: str, seed: int, test: float, fold: int | None = None) -> dict:
    t = next(t for t in bench.TARGETS if t.key == key)
    model = json.loads(json.dumps(dataclasses.asdict(models.preset_config(t.preset))))
    train = TrainOptions(**{**models.PRESET_TRAINING.get(t.preset, {}), "seed": seed})
    split = {"split": "cv", "fold": fold} if fold is not None else {}
    data = json.loads(json.dumps(dataclasses.asdict(DataSpec(data=t.data, **split))))
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
        "data": data,
    }


def _write(folder, record: dict) -> None:
    name = f"{record['target']}-seed{record['seed']}" + (
        f"-fold{record['fold']}" if record["fold"] is not None else ""
    )
    (folder / f"{name}.json").write_text(json.dumps(record))


def test_records_that_are_not_the_current_run_are_left_out(bench, tmp_path) -> None:
    kept = _record(bench, "trec-cnn", 0, 0.9)
    changed = _record(bench, "trec-cnn", 1, 0.9)
    changed["model"]["dropout"] = 0.123
    retrained = _record(bench, "trec-cnn", 2, 0.9)
    retrained["train"]["lr"] = 0.5
    other_data = _record(bench, "mr-cnn", 0, 0.9, fold=3)
    other_data["data"]["limit"] = 100
    no_data = _record(bench, "mr-cnn", 1, 0.9)
    del no_data["data"]
    for r in (kept, changed, retrained, other_data, no_data):
        _write(tmp_path, r)
    unknown = {**_record(bench, "trec-cnn", 0, 0.9), "target": "no-such-target"}
    (tmp_path / "no-such-target-seed0.json").write_text(json.dumps(unknown))
    # a second copy of a run under another name, a fold outside the 10, a file that is no record
    (tmp_path / "trec-cnn-seed0-old.json").write_text(json.dumps(kept))
    (tmp_path / "mr-kim-cnn-seed0-fold10.json").write_text(
        json.dumps(_record(bench, "mr-kim-cnn", 0, 0.9, fold=10))
    )
    (tmp_path / "notes.json").write_text('{"a": 1}')
    rows = bench.load_records(str(tmp_path))
    assert [(r["target"], r["seed"]) for r in rows] == [("trec-cnn", 0)]
    assert len(list(tmp_path.iterdir())) == 9  # nothing deleted


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
    se = statistics.stdev(seed_means) / 2**0.5
    assert f"within one SE ({se:.4f}) of 0.761 (met)" in bold
    seed2 = next(line for line in text.splitlines() if "10-fold CV, seed 2" in line)
    assert "4 folds" in seed2 and "folds 0, 1, 2, 3 |" in seed2
    trec = next(line for line in text.splitlines() if line.startswith("| trec-kim-cnn |"))
    assert "0.9100 +- 0.0100" in trec
    assert "within one SE (0.0058) of 0.912 (met)" in trec  # .91 + .0058 >= .912
    assert text.endswith("## What was tried\n\nhand-written log\n")
    assert "old table" not in text


def test_one_seed_has_no_standard_error(bench, tmp_path) -> None:
    rows = [_record(bench, "mr-kim-cnn", 0, 0.76, fold=k) for k in range(10)]
    rows.append(_record(bench, "trec-kim-cnn", 0, 0.95))
    out = tmp_path / "ACCURACY.md"
    bench.write_report(rows, str(out))
    text = out.read_text()
    bold = next(line for line in text.splitlines() if "**mr-kim-cnn, 10-fold CV**" in line)
    assert "(n/a: an SE needs two or more values)" in bold and "met" not in bold
    trec = next(line for line in text.splitlines() if line.startswith("| trec-kim-cnn |"))
    assert "n/a" in trec


def test_committed_report_is_the_report_of_the_committed_records(bench, tmp_path) -> None:
    """Every committed record has its run's current settings (else the report would drop it),
    and benchmarks/ACCURACY.md is exactly what ``--report`` writes from them (but its date)."""
    records = os.path.join(ROOT, "benchmarks", "accuracy-runs")
    files = sorted(f for f in os.listdir(records) if f.endswith(".json"))
    assert files
    rows = bench.load_records(records)
    assert len(rows) == len(files)
    with open(os.path.join(ROOT, "benchmarks", "ACCURACY.md"), encoding="utf-8") as fh:
        committed = fh.read()
    out = tmp_path / "ACCURACY.md"
    out.write_text(committed)  # carries the tuning log over, as --report does
    rows.sort(key=bench.report_order)
    bench.write_report(rows, str(out))

    def undated(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("Written by")]

    assert undated(out.read_text()) == undated(committed)


def test_a_finished_run_folder_becomes_a_record(bench, tmp_path, monkeypatch) -> None:
    """A run folder with results.json (an interrupted benchmark) is not trained again; its
    record is written from the folder's files."""
    import cplxnet.cli

    monkeypatch.setattr(cplxnet.cli, "main", lambda argv: pytest.fail(f"trained: {argv}"))
    t = next(t for t in bench.TARGETS if t.key == "mr-kim-cnn")
    expected = _record(bench, "mr-kim-cnn", 2, 0.75, fold=3)
    run = tmp_path / "runs" / "mr-kim-cnn-seed2-fold3"
    run.mkdir(parents=True)
    config = {k: expected[k] for k in ("model", "train", "data")}
    config |= {"versions": {"torch": "2.13.0+cpu"}, "created": "2026-11-30T10:00:00"}
    (run / "config.json").write_text(json.dumps(config))
    results = {"test_accuracy": 0.75, "dev_accuracy": 0.7, "best_epoch": 4, "epochs_run": 8}
    (run / "results.json").write_text(json.dumps({**results, "split": "cv fold 3"}))
    (run / "metrics.jsonl").write_text('{"seconds": 2.5}\n{"seconds": 3.0}\n')
    records = tmp_path / "records"
    record = bench.run_one(t, 2, 3, str(tmp_path / "runs"), str(records), 1)
    assert record["test"] == 0.75 and record["dev"] == 0.7 and record["seconds"] == 5.5
    assert record["date"] == "2026-11-30" and record["data"]["fold"] == 3
    assert record["command"] == "cplxnet train --data mr --preset kim-cnn --seed 2 --fold 3"
    assert json.loads((records / "mr-kim-cnn-seed2-fold3.json").read_text()) == record
    assert [r["fold"] for r in bench.load_records(str(records))] == [3]


def test_a_run_folder_of_another_fold_is_trained_again(bench, tmp_path, monkeypatch) -> None:
    import cplxnet.cli

    monkeypatch.setattr(cplxnet.cli, "main", lambda argv: pytest.fail(f"trained: {argv}"))
    t = next(t for t in bench.TARGETS if t.key == "mr-kim-cnn")
    other = _record(bench, "mr-kim-cnn", 0, 0.99, fold=7)  # fold 7's run in fold 3's folder
    run = tmp_path / "runs" / "mr-kim-cnn-seed0-fold3"
    run.mkdir(parents=True)
    config = {k: other[k] for k in ("model", "train", "data")}
    (run / "config.json").write_text(json.dumps({**config, "created": "2026-12-01T00:00"}))
    (run / "results.json").write_text(json.dumps({"test_accuracy": 0.99}))
    with pytest.raises(pytest.fail.Exception, match="trained: .*--fold', '3'"):
        bench.run_one(t, 0, 3, str(tmp_path / "runs"), str(tmp_path / "records"), 1)
    assert not (tmp_path / "records").exists()
