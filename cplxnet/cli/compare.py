"""``cplxnet compare``: the subcommand of :mod:`cplxnet.cli` for the comparison grid, registered
there with ``report`` (:mod:`cplxnet.cli.report`) by :func:`add_subcommands`.

Examples::

    cplxnet compare --data mr,trec --families fasttext,cnn,lstm,transformer \\
        --encodings none,trainable,sinusoidal,complex-vanilla,complex-order --seeds 5 \\
        --epochs 10 --jobs 2 --out runs/table2
    cplxnet compare --families transformer --encodings sinusoidal,rotary,t5,complex-order
    cplxnet compare --families transformer --encodings table4 --data trec   # Table 4 ablations
    cplxnet compare --families transformer --encodings complex-order,complex-order-real-proj
    cplxnet compare --families transformer --encodings complex-order --set projection=real
    cplxnet compare --extrapolate --families transformer,lstm --encodings trainable,complex-order
    cplxnet compare --executor dask --jobs 4 ...                  # a Dask LocalCluster
    cplxnet compare --executor dask --scheduler tcp://head:8786 ...   # a Dask cluster
    cplxnet compare --task lm --data mr --encodings none,rotary,alibi,complex-order@both \
        --seeds 3 --jobs 2 --out runs/lm     # language models, bpc at L..8L
    cplxnet report runs/table2                  # re-render report.md and the plots
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .argtypes import non_negative_int, positive_int
from .compare_common import DEFAULT_FAMILIES, executor_from_args, run_and_report
from .options import LM_FLAGS, SCHEDULE_FLAGS, add_options, flags_apply, train_fields
from .options import fail as _fail
from .options import split_list as _split_list
from .report import DEFAULT_TARGET, add_report_command

__all__ = [
    "add_subcommands",
    "cmd_compare",
    "executor_from_args",
    "options_from_args",
    "run_and_report",
]

DEFAULT_DATA = "mr,trec"
#: ``--data`` with ``--extrapolate`` and with ``--task lm``
EXTRAPOLATE_DATA, LM_DATA = "synthetic,mr,trec", "mr"
DEFAULT_ENCODINGS = "none,trainable,sinusoidal,complex-vanilla,complex-order"
DEFAULT_SEEDS = "3"
#: The training and data options of ``cplxnet compare`` (:data:`cplxnet.cli.options.OPTIONS`),
#: the same for every cell.
BUDGET_FLAGS = (
    "--epochs",
    "--batch-size",
    "--lr",
    "--weight-decay",
    "--clip-norm",
    "--patience",
    "--max-steps",
    "--dense",
    "--set",
)
DATA_FLAGS = (
    "--vectors",
    "--split-seed",
    "--limit",
    "--max-len",
    "--min-freq",
    "--max-vocab",
    "--clean",
)


def _checked(parse: Any, flag: str) -> Any:
    """An argparse ``type=`` that checks a value with ``parse`` (the parser the command uses)
    and keeps the text: a bad value is a usage error naming ``flag`` (exit status 2)."""

    def check(text: str) -> str:
        from ..compare.grid.cells import CompareError

        try:
            parse(text)
        except (CompareError, ValueError) as err:
            message = str(err)
            prefix = f"{flag}: "
            raise argparse.ArgumentTypeError(
                message[len(prefix) :] if message.startswith(prefix) else message
            ) from None
        return text

    check.__name__ = flag.lstrip("-")
    return check


def _families(text: str) -> list[str]:
    import cplxnet.models as models

    known = [*models.FAMILIES, *models.LM_FAMILIES]
    families = _split_list(text)
    if not families:
        raise ValueError(f"nothing given; families: {', '.join(known)}")
    for family in families:
        if family not in known:
            raise ValueError(f"unknown family {family!r}; families: {', '.join(known)}")
    return families


def _seeds(text: str) -> Any:
    from ..compare.grid.cells import parse_seeds

    return parse_seeds(text)


def _numbers(text: str) -> Any:
    from ..encodings.specs import parse_numbers

    return parse_numbers(text)


def add_subcommands(sub: Any) -> None:
    """Add the ``compare`` and ``report`` parsers to the subparsers of ``cplxnet``."""
    c = sub.add_parser(
        "compare",
        help="train a grid of families x encodings x seeds and report it (Table 2 layout)",
        description="Train every cell of datasets x folds x families x encodings x number "
        "fields x seeds with the same budget, then write results.csv/json, report.md and "
        "accuracy.png into --out. Re-running the same command skips the cells already done. "
        "Encodings: registered names (none, trainable, sinusoidal, complex-order, rotary, "
        "shaw, xl, t5, deberta, tupe, ...), name:key=value options (complex-order:phase=false), "
        "combinations acting at different sites joined by '+' with options naming their member "
        "(complex-order+rotary:rotary.base=500; complex when a member is complex-*), the "
        "Complex Order ablations complex-order-no-phase, -freq-shared, -freq-word, "
        "-amp-shared, -amp-word, the model ablation complex-order-real-proj (Table 4's shared "
        "projections: the Transformer's projection weights real, one matrix for the real and "
        "imaginary parts; the same as --set transformer.projection=real but as its own column), "
        "or 'table4' for all of them. An encoding that a family cannot use (attention encodings "
        "without attention, the projection ablation without a Transformer) is skipped for that "
        "family with a note. With --task lm, rotary-yarn trains nothing: it re-scores each "
        "seed's rotary run (kept with --keep-runs) with YaRN of factor n / L at each length n; "
        "randomized-eval:base=rotary re-scores the randomized:base=rotary runs with sorted random "
        "positions at evaluation too (eval_seed=N sets their seed).",
    )
    g = c.add_argument_group("grid")
    g.add_argument(
        "--task",
        choices=("classify", "lm"),
        default="classify",
        help="classify (default): text classifiers; lm: causal language models (the decoder "
        "family) trained at --context L and scored at L, 2L, 4L, 8L (a text stream) or on "
        "prompt-length bins (synthetic:copy, synthetic:reverse); an encoding may end in @real, "
        "@complex or @both to set its number fields (complex-order@both)",
    )
    g.add_argument(
        "--data",
        default=None,
        help=f"datasets: mr, trec, synthetic or files (default {DEFAULT_DATA}; with "
        f"--extrapolate: {EXTRAPOLATE_DATA}; --task lm: {LM_DATA})",
    )
    g.add_argument(
        "--families",
        default=DEFAULT_FAMILIES,
        type=_checked(_families, "--families"),
        help=f"default {DEFAULT_FAMILIES}",
    )
    g.add_argument("--encodings", default=DEFAULT_ENCODINGS, help=f"default {DEFAULT_ENCODINGS}")
    g.add_argument(
        "--number",
        default="natural",
        type=_checked(_numbers, "--number"),
        help="number field: natural (default: complex for complex-* encodings, real for the "
        "others, as the paper's Table 2), real, complex, or both",
    )
    g.add_argument(
        "--seeds",
        default=DEFAULT_SEEDS,
        type=_checked(_seeds, "--seeds"),
        help=f"N (seeds 0..N-1) or a list/range (default {DEFAULT_SEEDS})",
    )
    g.add_argument(
        "--folds",
        default="quick",
        help="MR and files: quick (one 80/10/10 split, default), all (10-fold CV), or CV test "
        "folds 0..9 such as 3 or 0-4 (numbered as cplxnet train --fold); TREC always uses its "
        "official test set",
    )
    g.add_argument("--out", default=None, help="output folder (default runs/compare)")
    g.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        help="cells run in parallel (default 1; with --executor dask: the worker processes of "
        "the cluster started on this machine)",
    )
    add_options(g, "compare", ("--threads",))
    g.add_argument(
        "--retry-errors", action="store_true", help="run cells that ended in an error again"
    )
    g.add_argument(
        "--keep-runs", action="store_true", help="keep each cell's run folder (weights) in runs/"
    )
    g.add_argument("--dry-run", action="store_true", help="list the cells and notes, train nothing")
    g.add_argument("--no-report", action="store_true", help="do not write report.md / plots")
    g.add_argument(
        "--target",
        default=DEFAULT_TARGET,
        help=f"encoding tested against the best real one (default {DEFAULT_TARGET})",
    )

    d = c.add_argument_group("executor (where the cells run)")
    d.add_argument(
        "--executor",
        default="local",
        choices=("local", "dask"),
        help="local: this machine, --jobs processes (default); dask: a Dask cluster (needs "
        'pip install "cplxnet[dask]"): the one at --scheduler, or a LocalCluster of --jobs '
        "single-threaded worker processes",
    )
    d.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="with --executor dask: a running `dask scheduler` (tcp://host:8786)",
    )
    d.add_argument(
        "--retries",
        type=non_negative_int,
        default=None,
        help="with --executor dask: times a cell runs again after its worker died or it failed "
        "outside the training (default 2); then it is recorded as failed",
    )
    d.add_argument(
        "--data-files",
        default=None,
        choices=("shared", "ship"),
        help="with --executor dask: workers read a user's --data/--vectors file at the same "
        "path, checked by SHA-256 (shared, default), or get the client's bytes with the tasks "
        "(ship)",
    )

    o = c.add_argument_group("budget (the same for every cell)")
    add_options(o, "compare", BUDGET_FLAGS)
    o.add_argument(
        "--real-width",
        default=None,
        choices=("same", "params", "flops"),
        help="real models: x2 the complex config's widths (equal FLOPs; the default), x sqrt2 "
        "(about equal dense parameters) or the same widths (Wang et al.'s Table 2); a real "
        "preset (kim-cnn) keeps its own",
    )
    add_options(o, "compare", DATA_FLAGS)

    o.add_argument(
        "--preset",
        dest="preset",
        action="append",
        default=None,
        metavar="[DATA:]FAMILY[@FIELD]=PRESET",
        help="classification: the cells of FAMILY (on DATA; of number field real or complex) "
        "use the model fields and training budget of a preset of cplxnet.models.PRESETS, the "
        "column's encoding replacing the preset's, budget flags and --set over it; the most "
        "specific match wins (trec:cnn@real=kim-cnn, transformer=trec-transformer-complex-order); "
        "repeatable. --task lm: one decoder preset (default lm-char)",
    )

    lm = c.add_argument_group("language models (--task lm)")
    add_options(lm, "compare", LM_FLAGS + SCHEDULE_FLAGS)

    x = c.add_argument_group("length extrapolation")
    x.add_argument(
        "--extrapolate",
        action="store_true",
        help="train on texts of at most L tokens, score length bins [1,L], (L,2L], (2L,4L] "
        "(real data split by length, and a synthetic 'is a before b' task)",
    )
    from ..compare.grid.extrapolate import DEFAULT_FACTORS, DEFAULT_TRAIN_LEN
    from ..tasks.classify.synthetic import SyntheticOrderTask as _Task

    lens = ",".join(f"{k}={v}" for k, v in DEFAULT_TRAIN_LEN.items())
    factors = ",".join(map(str, DEFAULT_FACTORS))
    x.add_argument(
        "--train-len",
        default=None,
        help=f"L: one number, or per dataset (default {lens}; other files 16)",
    )
    x.add_argument(
        "--factors", default=None, help=f"bin ends as multiples of L (default {factors})"
    )
    x.add_argument(
        "--synthetic-size",
        type=positive_int,
        default=None,
        help=f"synthetic task: training examples (default {_Task.n_train}; dev {_Task.n_dev} and "
        f"each test bin {_Task.n_test})",
    )
    x.add_argument(
        "--synthetic-vocab",
        type=positive_int,
        default=None,
        help=f"synthetic filler words (default {_Task.vocab})",
    )
    c.set_defaults(handler=cmd_compare)

    add_report_command(sub)


def _train_len(text: str | None) -> Any:
    if text is None:
        return None
    text = text.strip()
    if text.isdigit():
        return int(text)
    out = {}
    for item in _split_list(text):
        if "=" not in item or not item.split("=", 1)[1].strip().isdigit():
            raise ValueError(f"--train-len: expected N or data=N,..., got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = int(value)
    return out


def options_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~cplxnet.compare.grid.GridOptions` of the command line."""
    from ..compare.grid import GridOptions, parse_presets, parse_sets
    from ..engine.options import TrainOptions

    epochs = args.epochs if args.epochs is not None else TrainOptions.epochs
    train = {"epochs": epochs, **train_fields(args)}
    data = {
        "split_seed": args.split_seed,
        "limit": args.limit,
        "max_len": args.max_len,
        "min_freq": args.min_freq,
        "max_size": args.max_vocab,
        "clean": args.clean,
    }
    # the synthetic task's options apply whenever --data has "synthetic"; the bins only to
    # --extrapolate
    extrapolate: dict[str, Any] = {}
    if args.extrapolate:
        from ..compare.grid.extrapolate import DEFAULT_FACTORS

        given = args.factors if args.factors is not None else ",".join(map(str, DEFAULT_FACTORS))
        try:
            extrapolate["factors"] = [int(f) for f in _split_list(given)]
        except ValueError:
            raise ValueError(f"--factors: expected integers like 1,2,4, got {given!r}") from None
    elif args.factors is not None:
        raise ValueError(
            "--factors sets the length bins of --extrapolate; add --extrapolate or drop --factors"
        )
    tl = _train_len(args.train_len)
    if tl is not None:
        extrapolate["train_len"] = tl
    synth = {}
    if args.synthetic_size is not None:
        synth["n_train"] = args.synthetic_size
    if args.synthetic_vocab is not None:
        synth["vocab"] = args.synthetic_vocab
    if synth:
        extrapolate["synthetic"] = synth
    vectors = os.path.abspath(args.vectors) if args.vectors else None
    presets = parse_presets(getattr(args, "preset", None))
    if presets and args.epochs is None:
        del train["epochs"]  # each cell's preset (or the engine) sets its epochs
    return GridOptions(
        train={k: v for k, v in train.items() if v is not None},
        sets=parse_sets(args.sets),
        real_width=args.real_width or "flops",
        data={k: v for k, v in data.items() if v is not None},
        vectors=vectors,
        extrapolate=extrapolate,
        presets=presets,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from ..compare.grid import (
        CompareError,
        cell_preset,
        expand_grid,
        parse_folds,
        parse_seeds,
    )
    from ..compare.grid.expand import check_datas
    from ..compare.report.render import render_report
    from ..data import DataError
    from ..encodings.specs import parse_encodings, parse_numbers
    from ..tasks.classify.task import RunError

    if getattr(args, "task", "classify") == "lm":
        from .compare_lm import cmd_compare_lm

        if args.preset is not None:
            if len(args.preset) > 1 or "=" in args.preset[0]:
                return _fail(
                    "--task lm takes one decoder preset (--preset lm-char); per-cell presets "
                    "FAMILY=PRESET are for classification grids"
                )
            args.preset = args.preset[0]
        return cmd_compare_lm(args)
    lm_only = [
        f for f in LM_FLAGS + SCHEDULE_FLAGS if getattr(args, f[2:].replace("-", "_")) is not None
    ]
    if lm_only:
        subject, them = flags_apply(lm_only)
        return _fail(f"{subject} to --task lm; add --task lm or drop {them}")
    out = args.out or ("runs/compare-extrapolate" if args.extrapolate else "runs/compare")
    try:
        options = options_from_args(args)
        executor = executor_from_args(args)
        if args.extrapolate:
            from ..tasks.classify.synthetic import length_bins

            length_bins(16, tuple(options.extrapolate["factors"]))  # validate the factors
        default = EXTRAPOLATE_DATA if args.extrapolate else DEFAULT_DATA
        datas = _split_list(default if args.data is None else args.data)
        mode = "extrapolate" if args.extrapolate else "grid"
        seeds, folds = parse_seeds(args.seeds), parse_folds(args.folds)
        from ..compare.grid.lm import INNER_FIELD

        if INNER_FIELD.search(args.encodings):
            return _fail(
                "--encodings: a field suffix such as @both is for --task lm grids; in a "
                "classification grid choose the fields with --number (e.g. --number both)"
            )
        encodings, numbers = parse_encodings(args.encodings), parse_numbers(args.number)
        check_datas(datas, folds, options, mode=mode)  # as cplxnet train reads them
        if "synthetic" in datas:
            from ..compare.grid.extrapolate import check_synthetic

            check_synthetic(options)
        cells, notes = expand_grid(
            datas, _split_list(args.families), encodings, numbers, seeds, folds, options, mode=mode
        )

        def describe(cell: Any) -> str:
            entry = cell_preset(cell.data, cell.family, cell.number, options)
            return cell.describe() + (f"\tpreset {entry['preset']}" if entry else "")

        return run_and_report(args, cells, notes, out, options, executor, render_report, describe)
    except KeyboardInterrupt:
        resumes = (
            "cells that were running on Dask workers start again"
            if args.executor == "dask"
            else "an interrupted cell on MR, TREC or a file resumes from its last epoch"
        )
        return _fail(
            f"interrupted; finished cells are kept in {out}: run the same command again to "
            f"continue ({resumes})",
            130,
        )
    except (CompareError, DataError, RunError, ValueError) as err:
        return _fail(str(err))
