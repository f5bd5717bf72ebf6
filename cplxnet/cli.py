"""The ``cplxnet`` command: ``train``, ``evaluate`` and ``predict`` text classifiers; language
models with ``train --task lm``, ``evaluate`` and ``generate`` (:mod:`cplxnet.lm.cli`).

Examples::

    cplxnet train                                   # default model on the bundled MR data
    cplxnet train --data trec --model cnn --encoding complex-order --epochs 10
    cplxnet train --model transformer --encoding complex-order+rotary:rotary.base=500 \
        --set num_layers=2 --set dim_feedforward=256
    cplxnet train --data reviews.tsv --test test.tsv --run-dir runs/reviews
    cplxnet train --resume runs/reviews            # continue an interrupted run
    cplxnet evaluate runs/reviews [--data other.tsv]
    cplxnet predict runs/reviews "a gorgeous, witty film" --file more.txt
    torchrun --nproc_per_node=2 -m cplxnet train --data trec   # data-parallel on CPU (gloo)

Every expected problem (a bad file, an unknown name, an existing run folder, ...) ends the
command with one ``cplxnet: error: ...`` line on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ._argtypes import float_value, non_negative_int, positive_int, seed_int

__all__ = ["main", "build_parser"]

# exit statuses; usage errors exit with argparse's 2
EXIT_ERROR, EXIT_INTERRUPTED = 1, 130


class CLIError(Exception):
    """An error to report as ``cplxnet: error: <message>``."""


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one ``cplxnet: error: ...`` line (exit status 2), printed
    by rank 0 only under torchrun."""

    def error(self, message: str):  # type: ignore[override]
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"cplxnet: error: {message}; see {self.prog} --help", file=sys.stderr)
        sys.exit(2)


# ------------------------------------------------------------------------------------------------
# parser


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch CPU threads (default: torch's choice; on a busy machine 1 is often fastest)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cplxnet",
        description="Train, evaluate and apply complex-valued (or real) text classifiers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    t = sub.add_parser(
        "train",
        help="train a classifier (no options: the default model on bundled MR)",
        description="Train a text classifier. Without options: the default preset on the "
        "bundled MR data (quick 80/10/10 split).",
    )
    d = t.add_argument_group("data")
    d.add_argument(
        "--data",
        default=None,
        help="bundled 'mr' or 'trec', or a TSV/CSV/JSONL file with a header (default: mr)",
    )
    d.add_argument("--test", default=None, metavar="FILE", help="a separate test file")
    d.add_argument("--dev", default=None, metavar="FILE", help="a separate dev file")
    d.add_argument(
        "--format",
        default=None,
        choices=("tsv", "csv", "jsonl"),
        help="file format (default: from the extension)",
    )
    d.add_argument("--label-field", default=None, help="label column / JSON key (default: label)")
    d.add_argument("--text-field", default=None, help="text column / JSON key (default: text)")
    d.add_argument(
        "--split",
        default=None,
        choices=("quick", "cv"),
        help="quick: one seeded 80/10/10 split (default); cv: 10-fold "
        "cross-validation (needs --fold)",
    )
    d.add_argument(
        "--fold",
        type=non_negative_int,
        default=None,
        metavar="K",
        help="cross-validation test fold 0..9 (implies --split cv)",
    )
    d.add_argument(
        "--split-seed",
        type=seed_int,
        default=None,
        help="seed of the data split (default 0; independent of --seed)",
    )
    d.add_argument(
        "--max-len",
        type=positive_int,
        default=None,
        metavar="N",
        help="truncate texts to N tokens (also the model's position limit)",
    )
    d.add_argument(
        "--min-freq",
        type=positive_int,
        default=None,
        help="vocabulary: keep words seen at least this often in train (default 1)",
    )
    d.add_argument(
        "--max-vocab",
        type=positive_int,
        default=None,
        metavar="N",
        help="vocabulary: keep the N most frequent entries",
    )
    d.add_argument(
        "--clean",
        action="store_true",
        default=None,
        help="Kim (2014)-style text cleaning before tokenizing",
    )
    d.add_argument(
        "--keep-case", action="store_true", default=None, help="do not lower-case the text"
    )
    d.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        metavar="N",
        help="at most N examples per split (quick smoke runs)",
    )

    m = t.add_argument_group("model")
    m.add_argument(
        "--model",
        default=None,
        metavar="FAMILY",
        help="fasttext, cnn, lstm or transformer (default: the 'default' preset)",
    )
    m.add_argument("--preset", default=None, help="a named preset of cplxnet.models.PRESETS")
    m.add_argument(
        "--encoding",
        default=None,
        metavar="NAME[:OPTION=VALUE...]",
        help="positional encoding and its options, as in cplxnet compare: a name (none, "
        "complex-order, sinusoidal, trainable, rotary, t5, tupe, ...), names joined by '+' "
        "(complex-order+rotary), options after ':' (complex-order:frequency=shared, "
        "complex-order+rotary:rotary.base=500); replaces the preset's encoding and options",
    )
    m.add_argument(
        "--set",
        dest="set",
        action="append",
        default=None,
        metavar="FIELD=VALUE",
        help="a model-config field (num_layers=2, kernel_sizes=3,4,5, or with the family "
        "transformer.num_layers=2, as in cplxnet compare); repeatable; applied last",
    )
    number = m.add_mutually_exclusive_group()
    number.add_argument(
        "--complex",
        dest="complex",
        action="store_true",
        default=None,
        help="complex-valued model (default)",
    )
    number.add_argument("--real", dest="complex", action="store_false", help="the real-valued twin")
    m.add_argument("--d-model", type=positive_int, default=None, help="model width")
    m.add_argument("--dropout", type=float_value, default=None, help="dropout probability")
    m.add_argument(
        "--vectors",
        default=None,
        metavar="FILE",
        help="initialise word embeddings from a GloVe/word2vec text file",
    )

    o = t.add_argument_group("training")
    o.add_argument("--epochs", type=positive_int, default=None, help="epochs (default 10)")
    o.add_argument("--seed", type=seed_int, default=None, help="training seed (default 0)")
    o.add_argument("--batch-size", type=positive_int, default=None, help="global batch (50)")
    o.add_argument("--lr", type=float_value, default=None, help="learning rate (1e-3)")
    o.add_argument("--weight-decay", type=float_value, default=None, help="AdamW weight decay (0)")
    o.add_argument("--clip-norm", type=float_value, default=None, help="gradient-norm clipping")
    o.add_argument(
        "--patience",
        type=positive_int,
        default=None,
        help="early stopping after N epochs without a better dev accuracy",
    )
    o.add_argument(
        "--dense",
        action="store_true",
        default=None,
        help="dense gradients for the embedding tables (no SparseAdam)",
    )
    o.add_argument(
        "--max-steps",
        type=positive_int,
        default=None,
        help="stop after this many optimiser steps (smoke tests)",
    )
    o.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")

    r = t.add_argument_group("run folder")
    r.add_argument(
        "--run-dir",
        default=None,
        metavar="DIR",
        help="where to write the run (default: runs/<data>-<model>-<time>)",
    )
    r.add_argument(
        "--force",
        action="store_true",
        help="replace an existing run folder made by cplxnet (only one holding nothing but its "
        "run files; the old run stays until the new one has its first checkpoint)",
    )
    r.add_argument(
        "--resume",
        default=None,
        metavar="RUN",
        help="continue an interrupted run (add --epochs N to extend a finished one)",
    )
    r.add_argument(
        "--allow-changed-data",
        action="store_true",
        help="with --resume: continue even though a data file changed since the run started",
    )
    r.add_argument("--quiet", action="store_true", help="no progress bar or per-epoch lines")
    _add_common(t)
    from .lm.cli import add_generate_command, add_train_arguments  # language models (cplxnet.lm)

    add_train_arguments(t)

    e = sub.add_parser("evaluate", help="score a run's best checkpoint (test split or a file)")
    e.add_argument("run", metavar="RUN", help="a run folder")
    e.add_argument(
        "--data",
        default=None,
        metavar="FILE",
        help="a labelled file to score instead of the run's test split",
    )
    e.add_argument("--format", default=None, choices=("tsv", "csv", "jsonl"))
    e.add_argument("--label-field", default=None)
    e.add_argument("--text-field", default=None)
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.add_argument(
        "--max-len",
        type=positive_int,
        default=None,
        metavar="N",
        help="truncate texts to N tokens (at most the model's limit)",
    )
    e.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="N",
        help="language-model runs: score the test part in windows of N tokens (default: every "
        "evaluation length of the run)",
    )
    _add_common(e)

    p = sub.add_parser("predict", help="label texts with a run's best checkpoint")
    p.add_argument("run", metavar="RUN", help="a run folder")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="texts to classify")
    p.add_argument("--file", default=None, help="a UTF-8 file with one text per line")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument(
        "--max-len",
        type=positive_int,
        default=None,
        metavar="N",
        help="truncate texts to N tokens (at most the model's limit)",
    )
    _add_common(p)

    from .compare.cli import add_subcommands  # "compare" and "report" (cplxnet.compare)

    add_subcommands(sub)
    add_generate_command(sub)
    return parser


# ------------------------------------------------------------------------------------------------
# train


# --force is not among them: resuming never overwrites a run, so it is an error, not ignored
_RESUME_OK = {"resume", "epochs", "quiet", "threads", "command", "allow_changed_data"}


# --set fields that have their own options
_SET_RESERVED = {
    "family": "the family is chosen by --model or --preset",
    "encoding": "use --encoding NAME",
    "encoding_options": "use --encoding NAME:option=value",
    "complex": "use --complex or --real",
}


def _encoding_overrides(text: str) -> dict[str, Any]:
    """Config fields of ``--encoding NAME[:option=value...]`` (parsed as ``cplxnet compare``
    does: a name, a ``+`` combination or a Complex Order variant, with its options)."""
    from .compare.specs import parse_encoding

    try:
        spec = parse_encoding(text)
    except ValueError as err:
        raise CLIError(str(err)) from None
    return {**spec.model, "encoding": spec.name, "encoding_options": dict(spec.options)}


def _apply_sets(config: Any, items: Sequence[str], zoo: Any) -> Any:
    """``config`` with the ``--set`` fields (``field=value`` or ``family.field=value``)."""
    from .compare.specs import parse_sets

    try:
        sets = parse_sets(items, _SET_RESERVED)
    except ValueError as err:
        raise CLIError(str(err)) from None
    other = sorted(set(sets) - {"*", config.family})
    if other:
        raise CLIError(
            f"--set {other[0]}.*: the model is a {config.family!r} model; write "
            f"{config.family}.FIELD=VALUE or FIELD=VALUE"
        )
    fields = {**sets.get("*", {}), **sets.get(config.family, {})}
    defaults = {f.name: f.default for f in dataclasses.fields(config) if f.init}
    for key, value in fields.items():
        default = defaults.get(key)
        if isinstance(default, bool) and not isinstance(value, bool):
            raise CLIError(f"--set {key}={value}: expected true or false")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(default, (int, float)) and not isinstance(default, bool) and not number:
            raise CLIError(f"--set {key}={value}: expected a number")
    current = config.to_dict()
    current.pop("family")
    return zoo.make_config(config.family, **{**current, **fields})


def _model_config(args: argparse.Namespace, zoo: Any) -> Any:
    """The model config from --preset / --model and the overrides; validated by building it."""
    from .runs import check_model_memory

    overrides: dict[str, Any] = {}
    if args.encoding is not None:
        overrides.update(_encoding_overrides(args.encoding))
    for arg, field in (
        ("complex", "complex"),
        ("d_model", "d_model"),
        ("dropout", "dropout"),
        ("max_len", "max_len"),
    ):
        value = getattr(args, arg)
        if value is not None:
            overrides[field] = value
    try:
        if args.preset is not None:
            config = zoo.preset_config(args.preset, **overrides)
            if args.model is not None and args.model != config.family:
                raise CLIError(
                    f"--preset {args.preset} is a {config.family!r} model but --model is "
                    f"{args.model!r}; drop one of them"
                )
        elif args.model is not None:
            config = zoo.make_config(args.model, **overrides)
        else:
            config = zoo.preset_config("default", **overrides)
        if args.set:
            config = _apply_sets(config, args.set, zoo)
        # Build a tiny copy once (first on the meta device, so that a size that does not fit in
        # memory is an error, not an allocation): unknown encodings and incompatible options fail
        # here, before any data is read or any folder is created.
        tiny = dataclasses.replace(config, vocab_size=4, num_classes=2)
        check_model_memory(tiny, zoo)
        zoo.build_model(tiny)
    except (ValueError, TypeError, KeyError) as err:
        raise CLIError(err.args[0] if isinstance(err, KeyError) else str(err)) from None
    return config


def _train_options(
    preset: str | None, given: dict[str, Any], zoo: Any, engine: Any
) -> Any:
    """TrainOptions from the preset's training defaults (``models.PRESET_TRAINING``) with the
    options given on the command line (``None``: not given) on top."""
    fields = dict(getattr(zoo, "PRESET_TRAINING", {}).get(preset, {})) if preset else {}
    fields.update({k: v for k, v in given.items() if v is not None})
    try:
        return engine.TrainOptions(**fields)
    except ValueError as err:
        raise CLIError(str(err)) from None


def _default_run_dir(args: argparse.Namespace, config: Any) -> str:
    data = args.data or "mr"
    name = os.path.splitext(os.path.basename(data[:-3] if data.endswith(".gz") else data))[0]
    kind = "complex" if getattr(config, "complex", True) else "real"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{name}-{config.family}-{config.encoding}-{kind}-{stamp}")


def _cmd_train(args: argparse.Namespace) -> int:
    from . import train as engine
    from .data import DataSpec, prepare_data
    from .lm import cli as lm_cli
    from .lm.train import is_lm_run
    from .runs import check_new_run_dir

    if args.task == "lm" or (args.resume is not None and is_lm_run(args.resume)):
        return lm_cli.cmd_train(args, CLIError)
    lm_only = lm_cli.lm_only_options(args)
    if lm_only:
        raise CLIError(f"{', '.join(lm_only)} apply to language models; add --task lm")

    if args.resume is not None:
        given = sorted(
            k for k, v in vars(args).items() if v not in (None, False) and k not in _RESUME_OK
        )
        if given:
            raise CLIError(
                f"--resume continues a run with the options in its config.json; drop "
                f"{', '.join('--' + g.replace('_', '-') for g in given)} (only --epochs, "
                "--allow-changed-data, --quiet and --threads apply)"
            )
        engine.resume(
            args.resume,
            epochs=args.epochs,
            quiet=args.quiet,
            allow_changed_data=args.allow_changed_data,
        )
        return 0
    if args.allow_changed_data:
        raise CLIError("--allow-changed-data applies to --resume only; drop it")
    if args.split == "quick" and args.fold is not None:
        raise CLIError(
            f"--split quick and --fold {args.fold} conflict (--fold is the test fold of "
            "cross-validation); drop --fold, or use --split cv --fold K"
        )

    import cplxnet.models as zoo

    config = _model_config(args, zoo)
    spec_fields = {
        "data": args.data or "mr",
        "dev": args.dev,
        "test": args.test,
        "format": args.format,
        "label_field": args.label_field,
        "text_field": args.text_field,
        "split": args.split,
        "fold": args.fold,
        "split_seed": args.split_seed,
        "max_len": args.max_len,
        "min_freq": args.min_freq,
        "max_size": args.max_vocab,
        "clean": args.clean,
        "limit": args.limit,
    }
    if args.keep_case:
        spec_fields["lowercase"] = False
    spec = DataSpec(**{k: v for k, v in spec_fields.items() if v is not None})
    if spec.fold is not None:
        spec.split = "cv"
    option_fields = {
        "epochs": args.epochs,
        "seed": args.seed,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "weight_decay": args.weight_decay,
        "clip_norm": args.clip_norm,
        "patience": args.patience,
        "max_steps": args.max_steps,
        "compile": args.compile,
        "sparse": False if args.dense else None,
    }
    options = _train_options(args.preset, option_fields, zoo, engine)
    run_dir = args.resolved_run_dir = args.run_dir or _default_run_dir(args, config)
    check_new_run_dir(run_dir, args.force)  # fail before reading any data; touches nothing
    data = prepare_data(spec, model_max_len=getattr(config, "max_len", None))
    engine.train(
        config, data, run_dir, options, force=args.force, vectors=args.vectors, quiet=args.quiet
    )
    return 0


# ------------------------------------------------------------------------------------------------
# evaluate / predict


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from . import train as engine
    from .lm import cli as lm_cli
    from .lm.train import is_lm_run

    if is_lm_run(args.run):
        return lm_cli.cmd_evaluate(args, CLIError)
    if args.context is not None:
        raise CLIError(f"--context applies to language-model runs; {args.run} is a classifier")

    run = engine.load_run(args.run)
    metrics = engine.evaluate_run(
        run,
        args.data,
        label_field=args.label_field,
        text_field=args.text_field,
        fmt=args.format,
        max_len=args.max_len,
    )
    what = args.data if args.data is not None else f"test split of {run.spec.data}"
    if args.json:
        print(json.dumps({**metrics, "data": what}))
    else:
        print(
            f"accuracy {metrics['accuracy']:.4f}  macro-F1 {metrics['macro_f1']:.4f}  "
            f"loss {metrics['loss']:.4f}  n={metrics['n']}  ({what})"
        )
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from . import train as engine
    from .data.io import read_text_lines

    texts, where = list(args.texts), [f"text {i + 1}" for i in range(len(args.texts))]
    if args.file is not None:
        for number, line in read_text_lines(args.file):
            texts.append(line)
            where.append(f"{args.file} line {number}")
    if not texts:
        raise CLIError("nothing to classify: give texts as arguments or --file FILE")
    from .lm.train import is_lm_run

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


# ------------------------------------------------------------------------------------------------
# entry point


def _init_distributed() -> bool:
    """Join the process group when started by torchrun (WORLD_SIZE > 1); gloo on CPU."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 success, 1 error, 2 usage, 130 Ctrl-C)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))

    def fail(message: str, status: int = EXIT_ERROR) -> int:
        if rank == 0:
            print(f"cplxnet: error: {' '.join(message.splitlines())}", file=sys.stderr)
        return status

    distributed = False
    try:
        import torch

        if getattr(args, "threads", None) is not None:  # not every subcommand has --threads
            torch.set_num_threads(args.threads)
        from .data import DataError
        from .train import RunError

        try:
            if args.command == "train":
                distributed = _init_distributed()
                return _cmd_train(args)
            if args.command == "evaluate":
                return _cmd_evaluate(args)
            if args.command in ("compare", "report", "generate"):
                return args.handler(args)
            return _cmd_predict(args)
        except (CLIError, DataError, RunError) as err:
            return fail(str(err))
        except OSError as err:  # permissions, full disk, ...
            return fail(f"{err.strerror or err}: {err.filename}" if err.filename else str(err))
    except KeyboardInterrupt:
        hint = ""
        run_dir = getattr(args, "resume", None) or getattr(args, "resolved_run_dir", None)
        if (
            args.command == "train"
            and run_dir
            and os.path.isfile(os.path.join(run_dir, "checkpoint.pt"))
            and not os.path.exists(os.path.join(run_dir, "results.json"))
        ):
            hint = f"; continue the run with: cplxnet train --resume {run_dir}"
        return fail(f"interrupted{hint}", EXIT_INTERRUPTED)
    finally:
        if distributed:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
