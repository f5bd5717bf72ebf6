"""Accuracy of the tuned complex-order presets and of Kim's CNN-rand (``kim-cnn``) on the bundled
data, seeds 0, 1, 2.

    python benchmarks/accuracy.py                          # every target, seeds 0 1 2
    python benchmarks/accuracy.py --only trec-cnn mr-cnn   # some targets
    python benchmarks/accuracy.py --only mr-kim-cnn mr-cnn --cv-folds 10 --cv-seeds 0 1 2
    python benchmarks/accuracy.py --report                 # rebuild ACCURACY.md from the records

Each run is exactly the one-command reproduction ``cplxnet train --data D --preset P --seed S``
(run through :func:`cplxnet.cli.main` with ``--threads`` and a run folder under ``--runs``,
default ``runs/accuracy``), so
the dev split chooses the epoch and the test split is scored once, at the end, with the best dev
epoch's weights. Each finished run leaves a record (its scores, model config and training
options) in ``benchmarks/accuracy-runs/<run>.json``, committed with the report: the report is
built from every record whose settings equal the current preset's, so ``--report`` rebuilds it
on any machine without the run folders, and a run already recorded (or a run folder holding
``results.json``) is reused, not retrained, so an interrupted benchmark continues where it
stopped. A run whose stored model config or training options differ from the current preset's
(a preset was retuned) is trained again and its new record replaces the old one. The report's
hand-written tuning log (from the heading ``## What was tried`` to the end) is kept when the
table is rewritten.

MR: the CLI's quick split (one stratified 80/10/10 split, split seed 0), the split every setting
was tuned on; ``--cv-folds K`` adds folds ``0..K-1`` of the 10-fold cross-validation (split
seed 0; training seeds ``--cv-seeds``, default 0), the paper's protocol (``mr-kim-cnn`` is
measured on these folds only).
TREC: the official 500-question test set, 500 dev questions held out of the 5,452 training ones.

The table reports the mean and the sample standard deviation (ddof = 1) over seeds of the test
accuracy, each seed's test and dev accuracy, the chosen epoch and the wall time of the run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))

import torch  # noqa: E402

TUNING_LOG = "## What was tried"  # heading of the hand-written part of the report, kept as is
RUNS = os.path.join(os.path.dirname(HERE), "runs", "accuracy")  # runs/ is git-ignored
RECORDS = os.path.join(HERE, "accuracy-runs")  # one committed JSON record per finished run
CV_FOLDS = 10  # the folds of the CLI's cross-validation (--split cv)


@dataclass(frozen=True)
class Target:
    """A preset on a dataset and its goal: a mean test accuracy of at least ``target`` or, with
    ``within_se``, at least ``target`` minus one standard error of the mean (a published figure
    to reproduce); ``quick=False``: measured on the cross-validation folds only."""

    key: str
    data: str
    preset: str
    target: float
    paper: str
    within_se: bool = False
    quick: bool = True


TARGETS = (
    Target("trec-transformer", "trec", "trec-transformer-complex-order", 0.88, ".896"),
    Target("mr-transformer", "mr", "mr-transformer-complex-order", 0.74, ".746"),
    Target("trec-cnn", "trec", "trec-cnn-complex-order", 0.90, ".939 (word2vec)"),
    Target("mr-cnn", "mr", "mr-cnn-complex-order", 0.76, ".825 (word2vec)"),
    # Kim's CNN-rand (EMNLP 2014, Table 2): TREC .912 (official test), MR .761 (10-fold CV)
    Target("trec-kim-cnn", "trec", "kim-cnn", 0.912, ".912 (CNN-rand)", within_se=True),
    Target("mr-kim-cnn", "mr", "kim-cnn", 0.761, ".761 (CNN-rand, CV)", True, quick=False),
)


def _read_json(*path: str) -> dict:
    with open(os.path.join(*path), encoding="utf-8") as fh:
        return json.load(fh)


def _name(t: Target, seed: int, fold: int | None) -> str:
    return f"{t.key}-seed{seed}" + (f"-fold{fold}" if fold is not None else "")


def run_one(t: Target, seed: int, fold: int | None, runs: str, records: str, threads: int) -> dict:
    """The record of one run: reused from ``records`` or from a finished run folder under
    ``runs`` when its settings equal the current preset's, else trained now; saved to
    ``records/<run>.json``."""
    from cplxnet.cli import main

    name = _name(t, seed, fold)
    record_path = os.path.join(records, name + ".json")
    if os.path.exists(record_path):
        stale = _stale_fields(t, seed, fold, _read_json(record_path))
        if not stale:
            return _read_json(record_path)
        print(f"{record_path}: settings changed since that run ({', '.join(stale)}); re-running")
    run_dir = os.path.join(runs, name)
    argv = ["train", "--data", t.data, "--preset", t.preset, "--seed", str(seed)]
    if fold is not None:
        argv += ["--fold", str(fold)]
    command = "cplxnet " + " ".join(argv)
    finished = os.path.exists(os.path.join(run_dir, "results.json"))
    stale = _stale_fields(t, seed, fold, _read_json(run_dir, "config.json")) if finished else []
    if stale:
        print(f"{run_dir}: settings changed since that run ({', '.join(stale)}); re-running")
    if stale or not finished:
        print(f"[{datetime.datetime.now():%H:%M:%S}] {command}", flush=True)
        start = time.perf_counter()
        status = main(
            argv + ["--run-dir", run_dir, "--threads", str(threads), "--quiet", "--force"]
        )
        if status != 0:
            raise SystemExit(f"{command} failed with status {status}")
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    results = _read_json(run_dir, "results.json")
    config = _read_json(run_dir, "config.json")
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
        epochs = [json.loads(line) for line in fh if line.strip()]
    record = {
        "target": t.key,
        "seed": seed,
        "fold": fold,
        "command": command,
        "test": results["test_accuracy"],
        "dev": results["dev_accuracy"],
        "best_epoch": results["best_epoch"],
        "epochs_run": results["epochs_run"],
        "seconds": round(sum(m["seconds"] for m in epochs), 1),
        "threads": threads,
        "date": config["created"][:10],
        "torch": config["versions"]["torch"],
        "split": results["split"],
        "model": config["model"],
        "train": config["train"],
        "data": config["data"],
    }
    os.makedirs(records, exist_ok=True)
    with open(record_path, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return record


def _stale_fields(t: Target, seed: int, fold: int | None, stored: dict) -> list[str]:
    """Fields of a finished run's model config, training options and data options (``stored``:
    a record or a run's ``config.json``) that differ from what the command
    ``cplxnet train --data D --preset P --seed S [--fold K]`` would use now; empty when the run
    can be reused. The data-size fields (``vocab_size``, ``num_classes``, ``max_len``) are set
    from the data and not compared."""
    import dataclasses

    import cplxnet.models as models
    from cplxnet.data import DataSpec
    from cplxnet.train import TrainOptions

    def plain(obj) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(obj)))

    split = {"split": "cv", "fold": fold} if fold is not None else {}
    now = {
        "model": plain(models.preset_config(t.preset)),
        "train": plain(TrainOptions(**{**models.PRESET_TRAINING.get(t.preset, {}), "seed": seed})),
        "data": plain(DataSpec(data=t.data, **split)),
    }
    skip = {"vocab_size", "num_classes", "max_len"}
    changed = []
    for part, fields in now.items():
        old = stored.get(part)
        if not isinstance(old, dict):
            changed.append(f"{part} (not recorded)")
            continue
        changed += [
            f"{part}.{k}"
            for k in sorted(set(fields) | set(old))
            if not (part == "model" and k in skip) and fields.get(k) != old.get(k)
        ]
    return changed


def load_records(records: str) -> list[dict]:
    """The records in ``records`` whose target exists, whose file is named after the run
    (``<target>-seed<S>[-fold<K>].json``, so each run appears once) and whose settings equal the
    current preset's; the others are named on stdout and left out of the report (their files
    stay)."""
    targets = {t.key: t for t in TARGETS}
    rows = []
    for file in sorted(os.listdir(records)) if os.path.isdir(records) else []:
        if not file.endswith(".json"):
            continue
        try:
            record = _read_json(records, file)
            t = targets.get(record["target"])
            seed, fold = record["seed"], record["fold"]
            if t is None:
                problem = [f"no target {record['target']!r}"]
            elif file != _name(t, seed, fold) + ".json":
                problem = [f"the file name does not match the run {_name(t, seed, fold)}"]
            elif fold is not None and not (t.data == "mr" and fold in range(CV_FOLDS)):
                problem = [f"fold {fold} is not a fold of the MR cross-validation"]
            else:
                problem = _stale_fields(t, seed, fold, record)
        except (ValueError, KeyError, TypeError) as err:
            problem = [f"not a run record ({type(err).__name__}: {err})"]
        if problem:
            print(f"{file}: left out of the report ({', '.join(problem)})")
            continue
        rows.append(record)
    return rows


def report_order(record: dict) -> tuple:
    """Rows by target (as ``TARGETS``), quick-split runs first, then by seed and fold."""
    target = [t.key for t in TARGETS].index(record["target"])
    return (target, record["fold"] is not None, record["seed"], record["fold"] or 0)


def _stats(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.4f}" if values else "-"
    return f"{statistics.mean(values):.4f} +- {statistics.stdev(values):.4f}"


def _goal(t: Target, acc: list[float]) -> str:
    """The goal column: the goal and whether the mean of ``acc`` meets it."""
    mean = statistics.mean(acc)
    if not t.within_se:
        return f">= {t.target:.2f} ({'met' if mean >= t.target else 'missed'})"
    if len(acc) < 2:
        return f"within one SE of {t.target:.3f} (n/a: an SE needs two or more values)"
    se = statistics.stdev(acc) / len(acc) ** 0.5
    met = "met" if mean + se >= t.target else "missed"
    return f"within one SE ({se:.4f}) of {t.target:.3f} ({met})"


def write_report(rows: list[dict], path: str) -> None:
    torch_version = ", ".join(sorted({r["torch"] for r in rows})) or torch.__version__
    threads = ", ".join(str(n) for n in sorted({r["threads"] for r in rows})) or "-"
    dates = sorted({r.get("date", "?") for r in rows})
    lines = [
        "# Accuracy of the complex-order presets and of Kim's CNN-rand",
        "",
        "Written by `python benchmarks/accuracy.py` on "
        f"{datetime.date.today().isoformat()} from the records in `accuracy-runs/` (runs of "
        f"{dates[0] if dates else '-'}"
        + (f" to {dates[-1]}" if len(dates) > 1 else "")
        + f"): torch {torch_version}, {threads} CPU thread(s) per run, Python "
        f"{platform.python_version()}, shared 2-core machine (wall times vary with the load of "
        "other processes).",
        "",
        "Every run is `cplxnet train --data D --preset P --seed S`: the dev split chooses the "
        "epoch (of at most the preset's epochs), the test split is scored once at the end with "
        "the best dev epoch's weights; no setting was chosen on a test score. MR: the CLI's "
        "quick split (stratified 80/10/10, split seed 0: train 8,460 / dev 1,058 / test 1,058), "
        "the split all settings were tuned on; the paper used 10-fold cross-validation. TREC: "
        "the official 500-question test set, 500 dev questions held out of train (4,952 left). "
        "No pretrained word vectors anywhere.",
        "",
        "The goal of a complex-order preset is a mean of at least the goal; `kim-cnn` (Kim's "
        "CNN-rand, a real model) is to come within one standard error of the mean "
        "(std / sqrt(n)) of Kim's published figure. MR 10-fold cross-validation, the paper's "
        "protocol: one run per test fold (split seed 0, the training seed as given); a seed's "
        "row gives the mean and std over its folds, the bold row the mean and std over seeds "
        "of the seeds' 10-fold means (its n is the number of seeds), which the goal reads; "
        "that std measures the training seeds' noise on one set of folds (split seed 0), the "
        "seed rows give the spread over folds.",
        "",
        "| target | preset | test accuracy (mean +- std) | n | goal | paper | seeds / folds |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in TARGETS:
        mine = [r for r in rows if r["target"] == t.key and r["fold"] is None]
        if mine:
            acc = [r["test"] for r in mine]
            lines.append(
                f"| {t.key} | `{t.preset}` | {_stats(acc)} | {len(acc)} | {_goal(t, acc)} | "
                f"{t.paper} | seeds {', '.join(str(r['seed']) for r in mine)} |"
            )
        folds = [r for r in rows if r["target"] == t.key and r["fold"] is not None]
        for seed in sorted({r["seed"] for r in folds}):
            acc = [r["test"] for r in folds if r["seed"] == seed]
            done = sorted(r["fold"] for r in folds if r["seed"] == seed)
            lines.append(
                f"| {t.key}, 10-fold CV, seed {seed} | `{t.preset}` | {_stats(acc)} (over folds) | "
                f"{len(acc)} folds | {'-' if set(done) == set(range(CV_FOLDS)) else 'unfinished'}"
                f" | {t.paper} | folds "
                f"{', '.join(map(str, done))} |"
            )
        # the CV figure of a seed is its mean over the 10 folds; the goal reads the seeds' spread
        complete = {
            seed: statistics.mean(r["test"] for r in folds if r["seed"] == seed)
            for seed in {r["seed"] for r in folds}
            if {r["fold"] for r in folds if r["seed"] == seed} == set(range(CV_FOLDS))
        }
        if complete:
            acc = [complete[s] for s in sorted(complete)]
            lines.append(
                f"| **{t.key}, 10-fold CV** | `{t.preset}` | {_stats(acc)} (over seeds) | "
                f"{len(acc)} | {_goal(t, acc)} | {t.paper} | seeds "
                f"{', '.join(map(str, sorted(complete)))}, each the mean of its 10 folds |"
            )
    missing = [t for t in TARGETS if not any(r["target"] == t.key for r in rows)]
    if missing:
        lines += [
            "",
            "Not run yet (no finished run with the current preset settings): "
            + ", ".join(
                f"{t.key} (`{t.preset}`, goal "
                + (f"within one SE of {t.target:.3f}" if t.within_se else f">= {t.target:.2f}")
                + ")"
                for t in missing
            )
            + "; run `python benchmarks/accuracy.py --only "
            + " ".join(t.key for t in missing)
            + (
                "` (`--cv-folds 10` for the MR cross-validation)"
                if any(t.data == "mr" for t in missing)
                else "`"
            )
            + ".",
        ]
    lines += [
        "",
        "Per run:",
        "",
        "| command | test acc | dev acc | best epoch / run | seconds |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| `{r['command']}`{' (a)' if r.get('source') else ''} | {r['test']:.4f} | "
            f"{r['dev']:.4f} | "
            f"{r['best_epoch']} / {r['epochs_run']} | {r['seconds']:.0f} |"
        )
    if any(r.get("source") for r in rows):
        lines += [
            "",
            "(a) record taken from the cell of `compare/table2-full` that holds this run (the "
            "same model config, training options and data options, checked field by field); the "
            "record's `source` names the cell file.",
        ]
    lines.append("")
    text = "\n".join(lines)
    # the hand-written tuning log (from the TUNING_LOG heading on) is kept when rewriting
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            old = fh.read()
        at = old.find(TUNING_LOG)
        if at >= 0:
            text += "\n" + old[at:]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=[t.key for t in TARGETS], default=None)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--cv-folds", type=int, default=0, help="also MR CV folds 0..K-1 (mr-kim-cnn: only)"
    )
    parser.add_argument(
        "--cv-seeds", nargs="+", type=int, default=[0], help="training seeds of the CV runs"
    )
    parser.add_argument("--runs", default=RUNS, help="run folders (default: runs/accuracy)")
    parser.add_argument(
        "--records", default=RECORDS, help="run records (default: benchmarks/accuracy-runs)"
    )
    parser.add_argument("--out", default=os.path.join(HERE, "ACCURACY.md"))
    parser.add_argument(
        "--report", action="store_true", help="only rebuild the report from the records"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    chosen = [t for t in TARGETS if args.only is None or t.key in args.only]
    jobs = [(t, s, None) for t in chosen if t.quick for s in args.seeds]
    jobs += [
        (t, s, k)
        for t in chosen
        if t.data == "mr"
        for s in args.cv_seeds
        for k in range(args.cv_folds)
    ]
    if not args.report:
        for t, seed, fold in jobs:
            run_one(t, seed, fold, args.runs, args.records, args.threads)
    rows = sorted(load_records(args.records), key=report_order)
    write_report(rows, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
