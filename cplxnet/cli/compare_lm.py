"""``cplxnet compare --task lm``: the language-model grid's command line read into its datasets and
:class:`~cplxnet.compare.grid.cells.GridOptions` (checked as ``train --task lm`` checks its
own), and the command that expands, runs and reports the grid (:mod:`cplxnet.compare.grid.lm`)."""

from __future__ import annotations

import argparse

from ..compare.grid.cells import CompareError, GridOptions
from ..compare.grid.lm import (
    DEFAULT_PRESET,
    LM_FAMILY,
    expand_lm_grid,
    lm_grid_options,
    parse_lm_encodings,
)
from ..encodings.specs import parse_numbers

__all__ = ["lm_options_from_args", "cmd_compare_lm"]


def lm_options_from_args(args: argparse.Namespace) -> tuple[list[str], GridOptions]:
    """The datasets and the :class:`GridOptions` of a ``compare --task lm`` command line, checked
    as ``train --task lm`` checks them (:func:`cplxnet.cli.lm.check_lm_sets`)."""
    from ..compare.grid.cells import parse_sets
    from .compare_common import DEFAULT_FAMILIES
    from .lm import check_lm_sets, default_context, lm_train_fields
    from .options import flags_apply, split_list

    wrong = [
        flag
        for flag, bad in (
            ("--families", args.families not in (DEFAULT_FAMILIES, LM_FAMILY)),
            ("--folds", str(args.folds).strip().lower() not in ("quick", "none", "")),
            ("--extrapolate", args.extrapolate),
            ("--factors", args.factors is not None),
            ("--train-len", args.train_len is not None),
            ("--synthetic-size", args.synthetic_size is not None),
            ("--synthetic-vocab", args.synthetic_vocab is not None),
            ("--epochs", args.epochs is not None),
            ("--max-steps", args.max_steps is not None),
            ("--dense", args.dense),
            ("--vectors", args.vectors is not None),
            ("--limit", args.limit is not None),
            ("--max-len", args.max_len is not None),
            ("--min-freq", args.min_freq is not None),
            ("--max-vocab", args.max_vocab is not None),
            ("--clean", bool(args.clean)),
            ("--split-seed", args.split_seed is not None),
        )
        if bad
    ]
    if wrong:
        subject, them = flags_apply(wrong)
        raise CompareError(
            f"{subject} to classification grids, not to --task lm; drop {them} "
            "(a language model trains --steps at --context L on a contiguous 90/5/5 split)"
        )
    datas = split_list("mr" if args.data is None else args.data)
    if not datas:
        raise CompareError("--data: nothing given; give mr, trec, a text file or synthetic:copy")
    synthetic = [d.startswith("synthetic:") for d in datas]
    if any(synthetic) and not all(synthetic):
        raise CompareError(
            "--data mixes text and synthetic tasks; their contexts differ, so run them "
            "into separate --out folders"
        )
    if all(synthetic) and args.tokens is not None:
        raise CompareError("--tokens applies to text; a synthetic task has its own symbols")
    check_lm_sets(args.sets or (), CompareError)
    options = lm_grid_options(
        preset=args.preset or DEFAULT_PRESET,
        tokens=args.tokens or "char",
        context=args.context or default_context(args.preset, all(synthetic)),
        train=lm_train_fields(args),
        sets=parse_sets(args.sets),
        real_width=args.real_width or "flops",
    )
    return datas, options


def cmd_compare_lm(args: argparse.Namespace) -> int:
    """``cplxnet compare --task lm``: expand, run and report the language-model grid."""
    from ..compare.grid.cells import parse_seeds
    from ..compare.report.lm_report import render_lm_report
    from ..data import DataError
    from ..engine.runs import RunError
    from .compare_common import executor_from_args, run_and_report
    from .options import fail

    out = args.out or "runs/compare-lm"
    try:
        datas, options = lm_options_from_args(args)
        cells, notes = expand_lm_grid(
            datas,
            parse_lm_encodings(args.encodings, parse_numbers(args.number)),
            parse_seeds(args.seeds),
            options,
        )
        rescored = sorted({c.encoding.label for c in cells if c.encoding.evaluation})
        if rescored and not args.keep_runs and not args.dry_run:
            raise CompareError(
                f"{', '.join(rescored)} re-scores the run folders of the cells it names: add "
                "--keep-runs (without it a finished cell deletes its folder)"
            )
        executor = executor_from_args(args)
        return run_and_report(args, cells, notes, out, options, executor, render_lm_report)
    except KeyboardInterrupt:
        return fail(
            f"interrupted; finished cells are kept in {out}: run the same command again to "
            "continue (an interrupted cell resumes from its last checkpoint)",
            130,
        )
    except (CompareError, DataError, RunError, ValueError, TypeError) as err:
        return fail(str(err))
