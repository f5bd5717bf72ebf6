"""``cplxnet train``: its parser and the command (a classifier here; ``--task lm`` and the resume
of a language-model run go to :mod:`cplxnet.cli.lm`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..engine.options import TrainOptions
from ..engine.runtime import run_stamp
from .argtypes import positive_int, probability
from .model import model_config
from .options import (
    RESUME_COMMON,
    CLIError,
    add_options,
    check_resume_options,
    flags_apply,
    train_fields,
)

__all__ = ["add_train_command", "RESUME_OK", "train_options", "default_run_dir", "cmd_train"]

#: The options of ``cplxnet train`` from :data:`cplxnet.cli.options.OPTIONS`, by argument group.
DATA_FLAGS = (
    "--data",
    "--test",
    "--dev",
    "--format",
    "--label-field",
    "--text-field",
    "--split",
    "--fold",
    "--split-seed",
    "--max-len",
    "--min-freq",
    "--max-vocab",
    "--clean",
    "--keep-case",
    "--limit",
)
TRAINING_FLAGS = (
    "--epochs",
    "--seed",
    "--batch-size",
    "--lr",
    "--weight-decay",
    "--clip-norm",
    "--patience",
    "--dense",
    "--max-steps",
    "--compile",
)


def add_train_command(sub: Any) -> argparse.ArgumentParser:
    """Add the ``train`` parser to the subparsers of ``cplxnet`` and return it."""
    t = sub.add_parser(
        "train",
        help="train a classifier (no options: the default model on bundled MR)",
        description="Train a text classifier. Without options: the default preset on the "
        "bundled MR data (quick 80/10/10 split).",
    )
    add_options(t.add_argument_group("data"), "train", DATA_FLAGS)

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
    add_options(m, "train", ("--set",))
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
    m.add_argument("--dropout", type=probability, default=None, help="dropout probability")
    add_options(m, "train", ("--vectors",))

    add_options(t.add_argument_group("training"), "train", TRAINING_FLAGS)

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
    add_options(t, "train", ("--threads",))
    from .lm import add_train_arguments  # language models (cplxnet.tasks.lm)

    add_train_arguments(t)
    return t


# --force is not among them: resuming never overwrites a run, so it is an error, not ignored
RESUME_OK = RESUME_COMMON | {"epochs"}


def train_options(preset: str | None, given: dict[str, Any], zoo: Any) -> TrainOptions:
    """TrainOptions from the preset's training defaults (``models.PRESET_TRAINING``) with the
    options given on the command line (``None``: not given) on top."""
    fields = dict(getattr(zoo, "PRESET_TRAINING", {}).get(preset, {})) if preset else {}
    fields.update({k: v for k, v in given.items() if v is not None})
    try:
        return TrainOptions(**fields)
    except ValueError as err:
        raise CLIError(str(err)) from None


def default_run_dir(args: argparse.Namespace, config: Any) -> str:
    data = args.data or "mr"
    name = os.path.splitext(os.path.basename(data[:-3] if data.endswith(".gz") else data))[0]
    kind = "complex" if getattr(config, "complex", True) else "real"
    stamp = run_stamp()
    return os.path.join("runs", f"{name}-{config.family}-{config.encoding}-{kind}-{stamp}")


def _data_spec(args: argparse.Namespace) -> Any:
    """The DataSpec of the data options (those not given keep DataSpec's defaults)."""
    from ..data import DataSpec

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
    return spec


def _given_train_options(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainOptions fields of the training options (``None``: not given)."""
    return {"epochs": args.epochs, "seed": args.seed, **train_fields(args), "compile": args.compile}


def cmd_train(args: argparse.Namespace) -> int:
    """``cplxnet train``: a new classifier run, ``--resume`` of one, or a language model."""
    from ..data import prepare_data
    from ..engine.runs import check_new_run_dir
    from ..tasks.classify import task as engine
    from ..tasks.lm.task import is_lm_run
    from . import lm as lm_cli

    resumes_lm = args.resume is not None and is_lm_run(args.resume)
    if resumes_lm and args.task == "classify":
        raise CLIError(f"{args.resume} is a language-model run; resume it without --task classify")
    if args.task == "lm" or resumes_lm:
        return lm_cli.cmd_train(args, CLIError)
    lm_only = lm_cli.lm_only_options(args)
    if lm_only:
        raise CLIError(f"{flags_apply(lm_only)[0]} to language models; add --task lm")
    if args.resume is None and (args.data or "").startswith("synthetic:"):
        raise CLIError(f"--data {args.data} is a language-model task; add --task lm")

    if args.resume is not None:
        check_resume_options(
            args, RESUME_OK, "--epochs, --allow-changed-data, --quiet and --threads"
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

    config = model_config(args, zoo)
    spec = _data_spec(args)
    options = train_options(args.preset, _given_train_options(args), zoo)
    run_dir = args.resolved_run_dir = args.run_dir or default_run_dir(args, config)
    check_new_run_dir(run_dir, args.force)  # fail before reading any data; touches nothing
    data = prepare_data(spec, model_max_len=getattr(config, "max_len", None))
    engine.train(
        config, data, run_dir, options, force=args.force, vectors=args.vectors, quiet=args.quiet
    )
    return 0
