"""The language-model side of the ``cplxnet`` command: ``train --task lm``, ``evaluate RUN
--context N`` on a language-model run, and ``generate``.

Examples::

    cplxnet train --task lm --data mr --encoding rotary            # char LM, preset lm-char
    cplxnet train --task lm --data book.txt --tokens word --context 128 --steps 5000
    cplxnet train --task lm --data synthetic:reverse --context 16 --encoding none
    cplxnet train --resume runs/mr-decoder-rotary-complex-...      # continue an interrupted run
    cplxnet evaluate RUN --context 256                              # bpc at 256 characters
    cplxnet generate RUN "The film" --max-new-tokens 200 --temperature 0.8 --seed 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..engine.runs import check_new_run_dir
from ..engine.runtime import on_rank0_first, run_stamp
from ..tasks.lm.synthetic import SYNTHETIC_CONTEXT
from .argtypes import float_value, non_negative_int, positive_int, seed_int
from .model import apply_sets, encoding_overrides
from .options import (
    EXIT_INTERRUPTED,
    LM_FLAGS,
    LM_PRESET,
    RESUME_COMMON,
    SCHEDULE_FLAGS,
    add_options,
    check_resume_options,
    flags_apply,
)

__all__ = [
    "add_train_arguments",
    "add_schedule_arguments",
    "add_generate_command",
    "lm_only_options",
    "cmd_train",
    "cmd_evaluate",
    "cmd_generate",
    "default_context",
    "default_lm_run_dir",
    "check_lm_sets",
    "lm_train_fields",
    "SYNTHETIC_CONTEXT",
]

# classifier options that mean nothing for a language model
_CLASSIFIER_ONLY = (
    "test", "dev", "format", "label_field", "text_field", "split", "fold", "split_seed",
    "max_len", "min_freq", "max_vocab", "clean", "keep_case", "limit", "vectors", "dense",
    "max_steps", "compile",
)  # fmt: skip
_LM_ONLY = tuple(flag[2:].replace("-", "_") for flag in LM_FLAGS + SCHEDULE_FLAGS)


def lm_only_options(args: argparse.Namespace) -> list[str]:
    """The language-model options given on a ``train`` command line (``--context``, ...)."""
    return _given(args, _LM_ONLY)


_RESUME_OK = RESUME_COMMON | {"steps", "task"}


def add_train_arguments(train: argparse.ArgumentParser) -> None:
    """``--task`` and the language-model options of ``cplxnet train``."""
    g = train.add_argument_group(
        "language model (--task lm)",
        "train a causal decoder on a text stream (--data FILE.txt, mr, trec) or a synthetic task "
        "(--data synthetic:copy, synthetic:reverse); --preset defaults to lm-char; --real builds "
        "the equal-FLOP real twin (widths doubled; --d-model then sets the real width)",
    )
    g.add_argument(
        "--task",
        choices=("classify", "lm"),
        default=None,
        help="classify (default): a text classifier; lm: a causal language model",
    )
    add_options(g, "train", LM_FLAGS)
    add_schedule_arguments(g)


def default_context(preset: str | None, synthetic: bool) -> int:
    """The training context when ``--context`` is not given: the preset's (``lm-char``: 64), or
    :data:`SYNTHETIC_CONTEXT` for a synthetic task."""
    import cplxnet.models as zoo

    if synthetic:
        return SYNTHETIC_CONTEXT
    return int(zoo.LM_PRESET_TRAINING.get(preset or LM_PRESET, {}).get("context", 64))


def add_schedule_arguments(group: Any, command: str = "train") -> None:
    """The learning-rate schedule options of a language model (``train --task lm`` and
    ``compare --task lm``; :data:`cplxnet.cli.options.SCHEDULE_FLAGS`)."""
    add_options(group, command, SCHEDULE_FLAGS)


def add_generate_command(sub: Any) -> None:
    """The ``generate`` subcommand."""
    p = sub.add_parser(
        "generate",
        help="continue a prompt with a language-model run",
        description="Print a continuation of PROMPT sampled from a language-model run's best "
        "checkpoint, token by token as it is produced (Ctrl-C stops it, keeping the text so "
        "far). Each layer's keys and values are cached, so a token costs one step, while the "
        "text fits in --context tokens and the encoding allows it (not xpos); past --context "
        "the window of the last --context tokens is recomputed at every step. A synthetic "
        "copy/reverse run answers a prompt of symbols.",
    )
    p.add_argument("run", metavar="RUN", help="a language-model run folder")
    p.add_argument("prompt", metavar="PROMPT", help="the text to continue")
    import inspect

    from ..tasks.lm.generate import DEFAULT_NEW_TOKENS, stream_text

    defaults = {k: v.default for k, v in inspect.signature(stream_text).parameters.items()}
    p.add_argument(
        "--max-new-tokens",
        dest="tokens",
        type=non_negative_int,
        default=None,
        metavar="N",
        help=f"tokens to generate (default {DEFAULT_NEW_TOKENS}; synthetic runs: the answer "
        "and <eos>)",
    )
    # --tokens N is the same option, left out of the help
    p.add_argument("--tokens", dest="tokens", type=non_negative_int, help=argparse.SUPPRESS)
    p.add_argument(
        "--temperature",
        type=_temperature,
        default=defaults["temperature"],
        help=f"sampling temperature >= 0 (default {defaults['temperature']:g}; 0, or below "
        "1e-6, is greedy: always the most likely token)",
    )
    p.add_argument(
        "--seed",
        type=seed_int,
        default=defaults["seed"],
        help=f"sampling seed 0..2**63-1 (default {defaults['seed']})",
    )
    p.add_argument(
        "--top-k",
        type=positive_int,
        default=defaults["top_k"],
        metavar="K",
        help="sample among the K most likely tokens (default: all of them)",
    )
    p.add_argument(
        "--context",
        type=positive_int,
        default=None,
        help="the model sees the last N tokens (default: the training context)",
    )
    add_options(p, "generate", ("--threads",))
    p.set_defaults(handler=cmd_generate)


def _temperature(text: str) -> float:
    """A sampling temperature: a finite number >= 0."""
    value = float_value(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a temperature >= 0, got {text}")
    return value


#: The :class:`~cplxnet.tasks.lm.LMOptions` fields a command line sets (argparse names; ``seed``
#: only where the command has ``--seed``).
LM_TRAIN_FIELDS = (
    "steps", "batch_size", "lr", "weight_decay", "clip_norm", "eval_every", "schedule",
    "warmup_steps", "min_lr_ratio", "patience", "monitor", "seed",
)  # fmt: skip


def lm_train_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``{LMOptions field: its value on the command line, None when not given}`` of ``train
    --task lm`` and ``compare --task lm``."""
    return {k: getattr(args, k) for k in LM_TRAIN_FIELDS if hasattr(args, k)}


def _given(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    given = [n for n in names if getattr(args, n, None) not in (None, False)]
    return ["--" + n.replace("_", "-") for n in given]


def _model_config(args: argparse.Namespace, error: type[Exception]) -> tuple[Any, str]:
    import cplxnet.models as zoo

    preset = args.preset or LM_PRESET
    if args.model is not None and args.model not in zoo.LM_FAMILIES:
        raise error(
            f"--task lm trains a causal decoder (--model decoder), not {args.model!r}; drop "
            "--model or use --model decoder"
        )
    if args.preset is not None and zoo.PRESETS.get(args.preset, {}).get("family") != "decoder":
        usable = [n for n, p in zoo.PRESETS.items() if p["family"] in zoo.LM_FAMILIES]
        raise error(
            f"--preset {args.preset} is not a language model; language-model presets: "
            + ", ".join(usable)
        )
    overrides = {} if args.encoding is None else encoding_overrides(args.encoding)
    if args.dropout is not None:
        overrides["dropout"] = args.dropout
    try:
        config = zoo.preset_config(preset, **overrides)
        if args.complex is False:
            config = zoo.real_twin(config)  # the equal-FLOP twin: widths doubled
        width = {} if args.d_model is None else {"d_model": args.d_model}
        if getattr(args, "set", None):  # with --d-model: the checks see both
            config = _apply_lm_sets(config, args.set, error, width)
        elif width:
            config = dataclasses.replace(config, **width)
        zoo.build_model(dataclasses.replace(config, vocab_size=4))  # fails early on bad options
    except (ValueError, TypeError, KeyError) as err:
        raise error(err.args[0] if isinstance(err, KeyError) else str(err)) from None
    return config, preset


# decoder fields the data sets (see cplxnet.tasks.lm.task): --set cannot choose them
_SET_FROM_DATA = {
    "vocab_size": "the vocabulary of the training text",
    "padding_idx": "the vocabulary",
    "max_len": "--context",
    "num_classes": "the vocabulary",
}


def check_lm_sets(items: Sequence[str], error: type[Exception]) -> None:
    """Refuse ``--set`` of the decoder fields the data sets (``max_len``, ``vocab_size``, ...);
    shared by ``train --task lm`` and ``compare --task lm``."""
    for item in items:
        field = item.split("=", 1)[0].strip().rsplit(".", 1)[-1]
        if field in _SET_FROM_DATA:
            raise error(
                f"--set {item}: a language model takes {field} from {_SET_FROM_DATA[field]}; "
                "drop it"
            )


def _apply_lm_sets(
    config: Any, items: list[str], error: type[Exception], also: dict[str, Any]
) -> Any:
    """``config`` with the ``--set FIELD=VALUE`` fields and ``also`` (``--d-model``), parsed and
    checked as for a classifier (:func:`cplxnet.cli.model.apply_sets`)."""
    import cplxnet.models as zoo

    check_lm_sets(items, error)
    return apply_sets(config, items, zoo, also)


def cmd_train(args: argparse.Namespace, error: type[Exception]) -> int:
    """``cplxnet train --task lm ...`` or ``--resume`` of a language-model run."""
    from ..tasks.lm.task import LMOptions, make_task, monitor_problem, resume_lm, train_lm

    if args.resume is not None:
        check_resume_options(
            args, _RESUME_OK, "--steps, --allow-changed-data, --quiet and --threads"
        )
        resume_lm(args.resume, steps=args.steps, quiet=args.quiet,
                  allow_changed_data=args.allow_changed_data)  # fmt: skip
        return 0
    bad = _given(args, _CLASSIFIER_ONLY)
    if bad:
        subject, them = flags_apply(bad)
        raise error(f"{subject} to classifiers, not to --task lm; drop {them}")
    import cplxnet.models as zoo

    config, preset = _model_config(args, error)
    defaults = dict(zoo.LM_PRESET_TRAINING.get(preset, {}))
    source = args.data or "mr"
    synthetic = source.startswith("synthetic:")
    if synthetic and args.tokens is not None:
        raise error("--tokens applies to text; a synthetic task has its own symbols")
    context = args.context or default_context(preset, synthetic)
    defaults.pop("context", None)
    tokens = args.tokens or "char"
    given = {k: v for k, v in lm_train_fields(args).items() if v is not None}
    fields = {**defaults, **given}
    run_dir = args.resolved_run_dir = args.run_dir or default_lm_run_dir(source, config)
    # fail before reading any data (rank 0 checks; under torchrun the others raise its error)
    on_rank0_first(lambda: check_new_run_dir(run_dir, args.force), lambda: None)
    problem = monitor_problem(fields.get("monitor", LMOptions.monitor), source)
    if problem:
        raise error(problem)
    if args.epochs is not None:
        if args.steps is not None:
            raise error("give either --steps or --epochs, not both")
        if synthetic:
            raise error("a synthetic task draws fresh sequences every step; use --steps")
        task = make_task(source, tokens, context)
        batch = fields.get("batch_size", LMOptions.batch_size)
        fields["steps"] = max(1, math.ceil(args.epochs * len(task.data.train) / (batch * context)))
    try:
        options = LMOptions(**fields)
    except ValueError as err:
        raise error(str(err)) from None
    train_lm(config, source, run_dir, options, tokens=tokens, context=context, force=args.force,
             quiet=args.quiet)  # fmt: skip
    return 0


def default_lm_run_dir(source: str, config: Any) -> str:
    """``runs/<data>-decoder-<encoding>-<field>-<stamp>`` (the stamp rank 0's under torchrun)."""
    name = source.replace(":", "-") if source.startswith("synthetic:") else (
        os.path.splitext(os.path.basename(source))[0])  # fmt: skip
    kind = "complex" if config.complex else "real"
    stamp = run_stamp()
    return os.path.join("runs", f"{name}-decoder-{config.encoding}-{kind}-{stamp}")


def cmd_evaluate(args: argparse.Namespace, error: type[Exception]) -> int:
    """``cplxnet evaluate RUN [--context N]`` for a language-model run."""
    from ..tasks.lm.evaluate import NA
    from ..tasks.lm.generate import evaluate_lm_run, load_lm_run

    if getattr(args, "data", None) is not None:
        raise error(
            "a language-model run is scored on its own test part; --data applies to classifiers"
        )
    classifier_only = _given(args, ("format", "label_field", "text_field", "max_len"))
    if classifier_only:
        subject, them = flags_apply(classifier_only)
        raise error(
            f"{subject} to classifier runs; {args.run} is a language model: drop {them} "
            "(--context N scores it in windows of N tokens)"
        )
    run = load_lm_run(args.run)
    scores = evaluate_lm_run(run, args.context)
    metric = "accuracy" if run.tokens == "synthetic" else (
        "bpc" if run.tokens == "char" else "perplexity")  # fmt: skip
    if args.json:
        print(json.dumps({"metric": metric, "test": scores, "run": args.run}))
        return 0
    for key, entry in scores.items():
        what = "prompt lengths" if run.tokens == "synthetic" else "context"
        if entry.get(metric) is None:
            print(f"{what} {key}: n/a ({entry[NA]})")
        elif run.tokens == "synthetic":
            print(f"{what} {key}: exact-match accuracy {entry['accuracy']:.4f} (n={entry['n']})")
        else:
            window = entry.get("window", int(key))
            short = ""
            if window < int(key):
                short = f"; the test part is shorter: scored as one window of {window:,} tokens"
            print(
                f"{what} {key}: {metric} {entry[metric]:.4f}  loss {entry['loss']:.4f} nats/token  "
                f"({entry['tokens']:,} tokens in {entry['windows']:,} windows{short})"
            )
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """``cplxnet generate RUN PROMPT ...``: prints each token as it is produced; Ctrl-C ends the
    line after the text so far and exits with 130."""
    from ..data import DataError
    from ..engine.runs import memory_limit
    from ..models.decoder import ForwardTooLargeError, forward_memory_limit
    from ..tasks.lm.generate import load_lm_run, stream_text, unknown_prompt_tokens

    run = load_lm_run(args.run)
    unknown = unknown_prompt_tokens(run, args.prompt)
    if unknown:
        shown = " ".join(repr(t) for t in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
        print(f"note: the prompt has {len(unknown)} token(s) the run's training text never had "
              f"({shown}); the model reads each as <unk>", file=sys.stderr, flush=True)  # fmt: skip
    limit = memory_limit()
    try:  # the longest window is checked before the first token (one sequence at a time)
        with forward_memory_limit(limit):
            pieces = stream_text(run, args.prompt, args.tokens, seed=args.seed,
                                 temperature=args.temperature, context=args.context,
                                 top_k=args.top_k)  # fmt: skip
    except ForwardTooLargeError as err:
        fix = f"use --context N <= {err.longest:,}" if err.longest >= 1 else "use a shorter text"
        raise DataError(
            f"a window of {err.length:,} tokens is too long for this machine: the model builds a "
            f"{err.shape} tensor for it ({err.largest / 2**30:,.1f} GiB), more than half of this "
            f"machine's memory ({limit / 2**30:,.1f} GiB); {fix}"
        ) from None
    try:
        for piece in pieces:
            print(piece, end="", flush=True)
    except KeyboardInterrupt:
        print(flush=True)
        return EXIT_INTERRUPTED
    print(flush=True)
    return 0
