"""``cplxnet report RESULTS``: re-render a comparison's ``report.md`` and plots from its results
folder, ``results.json`` or ``results.csv`` without training (:mod:`cplxnet.compare.report`).

Examples::

    cplxnet report runs/table2                  # re-render report.md and the plots
    cplxnet report runs/lm --out /tmp/lm-report --no-plot
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import Any

from .argtypes import positive_int
from .options import fail

__all__ = ["DEFAULT_TARGET", "add_report_command", "cmd_report"]

#: The encoding a report tests against the best real column.
DEFAULT_TARGET = "complex-order"


def add_report_command(sub: Any) -> None:
    """The ``report`` subcommand."""
    r = sub.add_parser(
        "report",
        help="re-render the comparison report (table, significance, plots) from results",
        description="Write report.md and accuracy.png (and extrapolation.png) from a "
        "comparison's results folder, results.json or results.csv, without training; print "
        "the markdown.",
    )
    r.add_argument("results", metavar="RESULTS", help="results folder, .json or .csv")
    r.add_argument("--out", default=None, help="folder for report.md/plots (default: beside)")
    r.add_argument(
        "--target", default=DEFAULT_TARGET, help=f"encoding tested (default {DEFAULT_TARGET})"
    )
    r.add_argument(
        "--metric",
        default="test_accuracy",
        choices=("test_accuracy", "dev_accuracy", "test_macro_f1"),
    )
    r.add_argument("--digits", type=positive_int, default=3)
    r.add_argument("--no-plot", action="store_true", help="only the markdown")
    r.add_argument("--threads", type=positive_int, default=None, help=argparse.SUPPRESS)
    r.set_defaults(handler=cmd_report)


def _encodings(results: str) -> list[str]:
    """The encodings (row labels) of a comparison's results."""
    from ..compare.report.render import load_results

    return sorted({str(r.get("encoding")) for r in load_results(results) if r.get("encoding")})


def _folder_lock(args: argparse.Namespace) -> Any:
    """The comparison folder's own lock when the report goes into one (a ``compare`` writing it
    refuses the report, and the report refuses a ``compare``); no lock for any other folder."""
    from ..compare.grid.scheduler import grid_lock
    from ..compare.grid.store import is_comparison
    from ..compare.report.render import results_folder

    folder = args.out or results_folder(args.results)
    if not os.path.exists(args.results) or folder is None or not is_comparison(folder):
        return contextlib.nullcontext()  # a missing RESULTS is reported as such
    fix = (
        "wait for it to end (a compare writes report.md when its cells are done), or give --out "
        "another folder to see the results so far"
    )
    return grid_lock(folder, "cplxnet report", fix)


def cmd_report(args: argparse.Namespace) -> int:
    """``cplxnet report RESULTS``: the report of a language-model or a classification grid."""
    from ..compare.grid.cells import CompareError

    try:
        with _folder_lock(args):
            text, written = _render(args)
    except PermissionError as err:
        return fail(f"{err.filename}: permission denied; give --out a folder you can write to")
    except (CompareError, FileNotFoundError, ValueError) as err:
        return fail(str(err))
    except KeyError as err:
        return fail(f"missing column {err}")
    print(text)
    print("wrote " + ", ".join(written))
    return 0


def _render(args: argparse.Namespace) -> tuple[str, list[str]]:
    """The markdown and the files written of ``args``'s report (the folder's lock held)."""
    from ..compare.report.lm_report import is_lm_results, render_lm_report
    from ..compare.report.render import render_report

    if args.target != DEFAULT_TARGET:
        labels = _encodings(args.results)
        if args.target not in labels:
            raise ValueError(
                f"--target {args.target} is not an encoding of these results; give one of "
                f"{', '.join(labels)}"
            )
    if is_lm_results(args.results):
        return render_lm_report(
            args.results, args.out, target=args.target, digits=args.digits,
            plots=not args.no_plot,
        )  # fmt: skip
    return render_report(
        args.results,
        args.out,
        target=args.target,
        metric=args.metric,
        digits=args.digits,
        plots=not args.no_plot,
    )
