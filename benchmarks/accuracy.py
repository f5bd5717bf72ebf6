"""Accuracy of the tuned complex-order presets and of Kim's CNN-rand (``kim-cnn``) on the bundled
data, seeds 0, 1, 2.

    python benchmarks/accuracy.py                          # every target, seeds 0 1 2
    python benchmarks/accuracy.py --only trec-cnn mr-cnn   # some targets
    python benchmarks/accuracy.py --report                 # rebuild ACCURACY.md from finished runs

Each run is exactly the one-command reproduction ``cplxnet train --data D --preset P --seed S``
(run through :func:`cplxnet.cli.main` with ``--threads`` and a run folder under ``--runs``,
default ``runs/accuracy``), so
the dev split chooses the epoch and the test split is scored once, at the end, with the best dev
epoch's weights. A run folder that already holds ``results.json`` is reused, not retrained, so
an interrupted benchmark continues where it stopped and ``--report`` only rewrites the table;
a run whose stored model config or training options differ from the current preset's (a preset
was retuned) is trained again. The report's hand-written tuning log (from the heading
``## What was tried`` to the end) is kept when the table is rewritten.

MR: the CLI's quick split (one stratified 80/10/10 split, split seed 0), the split every setting
was tuned on; ``--cv-folds K`` adds folds ``0..K-1`` of the 10-fold cross-validation (seed 0),
the paper's protocol (``mr-kim-cnn`` is measured on these folds only).
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


def run_one(
    t: Target, seed: int, runs: str, threads: int, fold: int | None, train: bool = True
) -> dict | None:
    """Train (or reuse) one run and return its results plus timing. With ``train=False`` a
    missing or stale run (settings changed since) is not trained and ``None`` is returned."""
    from cplxnet.cli import main

    name = f"{t.key}-seed{seed}" + (f"-fold{fold}" if fold is not None else "")
    run_dir = os.path.join(runs, name)
    results_path = os.path.join(run_dir, "results.json")
    argv = ["train", "--data", t.data, "--preset", t.preset, "--seed", str(seed)]
    if fold is not None:
        argv += ["--fold", str(fold)]
    command = "cplxnet " + " ".join(argv)
    stale = _stale_fields(t, seed, run_dir) if os.path.exists(results_path) else []
    if (stale or not os.path.exists(results_path)) and not train:
        why = f"settings changed: {', '.join(stale)}" if stale else "not run"
        print(f"{run_dir}: left out of the report ({why})")
        return None
    if stale:
        print(f"{run_dir}: settings changed since that run ({', '.join(stale)}); re-running")
    if stale or not os.path.exists(results_path):
        print(f"[{datetime.datetime.now():%H:%M:%S}] {command}", flush=True)
        start = time.perf_counter()
        status = main(
            argv + ["--run-dir", run_dir, "--threads", str(threads), "--quiet", "--force"]
        )
        if status != 0:
            raise SystemExit(f"{command} failed with status {status}")
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    with open(results_path, encoding="utf-8") as fh:
        results = json.load(fh)
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
        epochs = [json.loads(line) for line in fh if line.strip()]
    with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as fh:
        config = json.load(fh)
    return {
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
        "torch": config["versions"]["torch"],
        "split": results["split"],
    }


def _stale_fields(t: Target, seed: int, run_dir: str) -> list[str]:
    """Fields of the finished run in ``run_dir`` that differ from what the current preset (model
    config and ``PRESET_TRAINING``) would use now; empty when the run can be reused. The data-size
    fields (``vocab_size``, ``num_classes``, ``max_len``) are set from the data and not compared."""
    import dataclasses

    import cplxnet.models as models
    from cplxnet.train import TrainOptions

    with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as fh:
        stored = json.load(fh)
    model = json.loads(json.dumps(dataclasses.asdict(models.preset_config(t.preset))))
    train = json.loads(
        json.dumps(
            dataclasses.asdict(
                TrainOptions(**{**models.PRESET_TRAINING.get(t.preset, {}), "seed": seed})
            )
        )
    )
    skip = {"vocab_size", "num_classes", "max_len"}
    changed = [
        f"model.{k}"
        for k in sorted(set(model) | set(stored["model"]))
        if k not in skip and model.get(k) != stored["model"].get(k)
    ]
    changed += [
        f"train.{k}"
        for k in sorted(set(train) | set(stored["train"]))
        if train.get(k) != stored["train"].get(k)
    ]
    return changed


def _stats(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.4f}" if values else "-"
    return f"{statistics.mean(values):.4f} +- {statistics.stdev(values):.4f}"


def _goal(t: Target, acc: list[float]) -> str:
    """The goal column: the goal and whether the mean of ``acc`` meets it."""
    mean = statistics.mean(acc)
    if not t.within_se:
        return f">= {t.target:.2f} ({'met' if mean >= t.target else 'missed'})"
    se = statistics.stdev(acc) / len(acc) ** 0.5 if len(acc) > 1 else 0.0
    met = "met" if mean + se >= t.target else "missed"
    return f"within one SE ({se:.4f}) of {t.target:.3f} ({met})"


def write_report(rows: list[dict], path: str, threads: int) -> None:
    torch_version = rows[0]["torch"] if rows else torch.__version__
    lines = [
        "# Accuracy of the complex-order presets and of Kim's CNN-rand",
        "",
        "Written by `python benchmarks/accuracy.py` on "
        f"{datetime.date.today().isoformat()}: torch {torch_version}, "
        f"{threads} CPU thread(s), Python {platform.python_version()}, shared 2-core machine "
        "(wall times vary with the load of other processes).",
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
        "(std / sqrt(n)) of Kim's published figure. MR 10-fold cross-validation rows: one run "
        "per test fold (split seed 0, training seed as given), the paper's protocol; the mean "
        "and std are over folds.",
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
        if folds:
            acc = [r["test"] for r in folds]
            seeds = sorted({r["seed"] for r in folds})
            lines.append(
                f"| {t.key}, 10-fold CV | `{t.preset}` | {_stats(acc)} | {len(acc)} | "
                f"{_goal(t, acc)} | {t.paper} | folds "
                f"{', '.join(str(r['fold']) for r in folds)} (seed "
                f"{', '.join(map(str, seeds))}) |"
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
            + ("` (`--cv-folds 10` for the MR cross-validation)" if missing else "`")
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
            f"| `{r['command']}` | {r['test']:.4f} | {r['dev']:.4f} | "
            f"{r['best_epoch']} / {r['epochs_run']} | {r['seconds']:.0f} |"
        )
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
        "--cv-folds", type=int, default=0, help="also MR CV folds 0..K-1 (seed 0; mr-kim-cnn: only)"
    )
    parser.add_argument("--runs", default=RUNS, help="run folders (default: runs/accuracy)")
    parser.add_argument("--out", default=os.path.join(HERE, "ACCURACY.md"))
    parser.add_argument(
        "--report", action="store_true", help="only rebuild the report from finished runs"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    chosen = [t for t in TARGETS if args.only is None or t.key in args.only]
    jobs = [(t, s, None) for t in chosen if t.quick for s in args.seeds]
    jobs += [(t, 0, k) for t in chosen if t.data == "mr" for k in range(args.cv_folds)]
    rows = []
    for t, seed, fold in jobs:
        done = os.path.exists(
            os.path.join(
                args.runs,
                f"{t.key}-seed{seed}" + (f"-fold{fold}" if fold is not None else ""),
                "results.json",
            )
        )
        if args.report and not done:
            continue
        rows.append(run_one(t, seed, args.runs, args.threads, fold, train=not args.report))
    # keep rows of targets not run now (their finished runs) in the report
    if args.only is not None:
        for t in TARGETS:
            if t in chosen:
                continue
            for seed in args.seeds:
                if os.path.exists(os.path.join(args.runs, f"{t.key}-seed{seed}", "results.json")):
                    rows.append(run_one(t, seed, args.runs, args.threads, None, train=False))
    rows = [r for r in rows if r is not None]
    order = {t.key: i for i, t in enumerate(TARGETS)}
    rows.sort(key=lambda r: (order[r["target"]], r["fold"] is not None, r["fold"] or 0, r["seed"]))
    write_report(rows, args.out, args.threads)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
