"""What both tasks of ``cplxnet compare`` (classification and language models) share: the default
model families, the executor that ``--executor`` chooses and the end of the command
(:func:`run_and_report`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

from .options import fail
from .report import DEFAULT_TARGET

__all__ = ["DEFAULT_FAMILIES", "executor_from_args", "run_and_report"]

DEFAULT_FAMILIES = "fasttext,cnn,lstm,transformer"


def executor_from_args(args: argparse.Namespace) -> Any:
    """The executor of ``--executor`` (a :class:`CompareError` for options that do not fit)."""
    from ..compare.grid.cells import CompareError
    from ..compare.grid.executors import DaskExecutor, LocalExecutor

    if args.executor == "local":
        given = [
            name
            for name, value in (
                ("--scheduler", args.scheduler),
                ("--retries", args.retries),
                ("--data-files", args.data_files),
            )
            if value is not None
        ]
        if given:
            one = len(given) == 1
            raise CompareError(
                f"{', '.join(given)} {'applies' if one else 'apply'} to --executor dask only; "
                f"add --executor dask or drop {'it' if one else 'them'}"
            )
        return LocalExecutor(args.jobs or 1, args.threads)
    if args.scheduler and args.jobs:
        raise CompareError(
            "--jobs sets the worker processes of a cluster on this machine; with --scheduler "
            "the cluster's own workers run the cells: drop --jobs"
        )
    return DaskExecutor(
        args.scheduler,
        jobs=args.jobs or 1,
        threads=args.threads,
        retries=2 if args.retries is None else args.retries,
        data_files=args.data_files or "shared",
    )


def run_and_report(
    args: argparse.Namespace,
    cells: Sequence[Any],
    notes: Sequence[str],
    out: str,
    options: Any,
    executor: Any,
    render: Callable[..., tuple[str, list[str]]],
    describe: Callable[[Any], str] | None = None,
) -> int:
    """The end of ``cplxnet compare`` (both tasks): print the notes on the expanded grid; with
    ``--dry-run`` list the cells (``describe(cell)``, default ``cell.describe()``) and stop;
    otherwise run the grid into ``out`` (:func:`~cplxnet.compare.grid.run_grid`), print where the
    results are and, unless ``--no-report`` or no run succeeded, write the report
    ``render(out, target=args.target)`` (while the grid still holds the folder's lock) and print
    it."""
    from ..compare.grid.scheduler import run_grid

    labels = sorted({cell.encoding.label for cell in cells})
    if args.target != DEFAULT_TARGET and args.target not in labels:
        return fail(
            f"--target {args.target} is not an encoding of this grid; give one of "
            f"{', '.join(labels)}"
        )
    twice = _repeated_cell(cells)
    if twice:
        return fail(twice)
    for note in notes:
        print(f"note: {note}", flush=True)
    if args.dry_run:
        for cell in cells:
            print(f"{cell.cell_id}\t{describe(cell) if describe else cell.describe()}")
        print(f"{len(cells)} cells")
        return 0

    def finish(rows: list[dict[str, Any]]) -> None:
        n_err = sum(r.get("status") == "error" for r in rows)
        print(f"results: {os.path.join(out, 'results.csv')} ({len(rows)} runs, {n_err} errors)")
        if not args.no_report and any(r.get("status") == "ok" for r in rows):
            text, written = render(out, target=args.target)
            print(text)
            print("wrote " + ", ".join(written), flush=True)

    run_grid(
        cells,
        out,
        options,
        executor=executor,
        retry_errors=args.retry_errors,
        keep_runs=args.keep_runs,
        log=lambda m: print(m, flush=True),
        finish=finish,
    )
    return 0


def _repeated_cell(cells: Sequence[Any]) -> str | None:
    """The error for two cells of one id (one result file): a dataset or family given twice,
    or two spellings of one encoding (``complex-order-freq-shared`` and
    ``complex-order:frequency=shared``); ``None`` when every id is its cell's own."""
    first: dict[str, Any] = {}
    for cell in cells:
        other = first.setdefault(cell.cell_id, cell)
        if other is cell:
            continue
        a, b = other.describe(), cell.describe()
        what = f"{a} is in the grid twice" if a == b else f"{a} and {b} are one cell"
        return (
            f"{what} ({cell.cell_id}); give each --data, --families and --encodings value once "
            "(one spelling per encoding)"
        )
    return None
