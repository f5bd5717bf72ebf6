"""``cplxnet evaluate`` and ``cplxnet predict``: using a finished run (a classifier here; a
language-model run's evaluation is :mod:`cplxnet.cli.lm`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .argtypes import positive_int
from .options import CLIError, add_options

__all__ = ["add_evaluate_command", "add_predict_command", "cmd_evaluate", "cmd_predict"]


def add_evaluate_command(sub: Any) -> None:
    """Add the ``evaluate`` parser to the subparsers of ``cplxnet``."""
    e = sub.add_parser("evaluate", help="score a run's best checkpoint (test split or a file)")
    e.add_argument("run", metavar="RUN", help="a run folder")
    e.add_argument(
        "--data",
        default=None,
        metavar="FILE",
        help="a labelled file to score instead of the run's test split",
    )
    add_options(e, "evaluate", ("--format", "--label-field", "--text-field"))
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="N",
        help="language-model runs: score the test part in windows of N tokens (default: every "
        "evaluation length of the run)",
    )
    add_options(e, "evaluate", ("--max-len", "--threads"))


def add_predict_command(sub: Any) -> None:
    """Add the ``predict`` parser to the subparsers of ``cplxnet``."""
    p = sub.add_parser("predict", help="label texts with a run's best checkpoint")
    p.intermixed = True  # options before or after the texts (cplxnet.cli's parser)
    p.add_argument("run", metavar="RUN", help="a run folder")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="texts to classify")
    p.add_argument("--file", default=None, help="a UTF-8 file with one text per line")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_options(p, "predict", ("--max-len", "--threads"))


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``cplxnet evaluate RUN``: the metrics of a run's best weights (test split or --data)."""
    from ..tasks.classify import task as engine
    from ..tasks.lm.task import is_lm_run
    from . import lm as lm_cli

    if is_lm_run(args.run):
        if args.context is None:  # the run's own lengths, which its training scored
            return lm_cli.cmd_evaluate(args, CLIError)
        return _evaluate_lm_at_context(args, lm_cli.cmd_evaluate)
    run = engine.load_run(args.run)  # a missing or damaged folder: its own error first
    if args.context is not None:
        raise CLIError(f"--context applies to language-model runs; {args.run} is a classifier")
    metrics = engine.evaluate_run(
        run,
        args.data,
        label_field=args.label_field,
        text_field=args.text_field,
        fmt=args.format,
        max_len=args.max_len,
    )
    if args.data is not None:
        what = args.data
    elif run.spec.test is not None:  # trained with --test FILE
        what = run.spec.test
    else:
        what = f"test split of {run.spec.data}"
    if args.json:
        print(json.dumps({**metrics, "data": what}))
    else:
        print(
            f"accuracy {metrics['accuracy']:.4f}  macro-F1 {metrics['macro_f1']:.4f}  "
            f"loss {metrics['loss']:.4f}  n={metrics['n']}  ({what})"
        )
    return 0


def _evaluate_lm_at_context(args: argparse.Namespace, evaluate: Any) -> int:
    """``evaluate`` (the language-model ``cmd_evaluate``) at ``--context N``, refused before
    anything is scored if one forward pass over a sequence it feeds the model would build a
    tensor larger than half the machine's memory (the model checks each length before scoring
    it: :func:`cplxnet.models.decoder.forward_memory_limit`). Such a pass is also one operation
    too long to interrupt: below the limit, Ctrl-C stops the evaluation between batches. The
    lengths the run's own test scored stay allowed."""
    from ..engine.runs import memory_limit
    from ..models.decoder import ForwardTooLargeError, forward_memory_limit
    from ..tasks.lm.evaluate import BATCH_TOKENS
    from ..tasks.lm.task import load_lm_config

    run_config, _, options = load_lm_config(args.run, other_task="give a language-model run")
    data = run_config["data"]
    synthetic = data["tokens"] == "synthetic"
    # the longest input of the run's own test: 4L-symbol prompts, or context x the multiples
    own = 8 * data["context"] + 1 if synthetic else data["context"] * max(options.eval_multiples)
    limit = memory_limit()
    try:
        with forward_memory_limit(limit, allowed=own, batch_tokens=BATCH_TOKENS):
            return evaluate(args, CLIError)
    except ForwardTooLargeError as err:
        if synthetic:
            feeds = f"prompts of {args.context:,} symbols make sequences of {err.length:,} tokens"
            longest = (err.longest - 1) // 2
        else:
            feeds = f"the model reads windows of {err.length:,} tokens"
            longest = err.longest
        fix = f"use --context N <= {longest:,}" if longest >= 1 else "use a smaller --context"
        what = "a layer's attention scores: " if err.shape[-2:] == (err.length,) * 2 else ""
        batch = f"{err.batch} sequences" if err.batch > 1 else "one sequence"
        raise CLIError(
            f"--context {args.context:,} is too long for this machine: {feeds}, scored "
            f"{batch} at a time, each building a {err.shape} tensor "
            f"({what}{err.batch * err.largest / 2**30:,.1f} GiB in all), more than half of this "
            f"machine's memory ({limit / 2**30:,.1f} GiB); {fix}"
        ) from None


def cmd_predict(args: argparse.Namespace) -> int:
    """``cplxnet predict RUN TEXT...``: a label and its probability for each text."""
    from ..data.io import read_text_lines
    from ..tasks.classify import task as engine

    texts, where = list(args.texts), [f"text {i + 1}" for i in range(len(args.texts))]
    if args.file is not None:
        for number, line in read_text_lines(args.file):
            texts.append(line)
            where.append(f"{args.file} line {number}")
    if not texts:
        raise CLIError("nothing to classify: give texts as arguments or --file FILE")
    from ..tasks.lm.task import is_lm_run

    if is_lm_run(args.run):
        raise CLIError(f"{args.run} is a language model; continue a text with cplxnet generate")
    run = engine.load_run(args.run)
    predictions = engine.predict(run, texts, where=where, max_len=args.max_len)
    for text, (label, prob) in zip(texts, predictions):
        if args.json:
            print(json.dumps({"label": label, "probability": prob, "text": text}))
        else:
            print(f"{label}\t{prob:.4f}\t{text}")
    return 0
