"""The ``cplxnet`` command: ``train``, ``evaluate`` and ``predict`` text classifiers; language
models with ``train --task lm``, ``evaluate`` and ``generate`` (:mod:`cplxnet.cli.lm`); grids of
runs comparing encodings with ``compare`` and ``report`` (:mod:`cplxnet.cli.compare`,
:mod:`cplxnet.cli.report`).

Examples::

    cplxnet train                                   # default model on the bundled MR data
    cplxnet train --data trec --model cnn --encoding complex-order --epochs 10
    cplxnet train --model transformer --encoding complex-order+rotary:rotary.base=500 \
        --set num_layers=2 --set dim_feedforward=256
    cplxnet train --data reviews.tsv --test test.tsv --run-dir runs/reviews
    cplxnet train --resume runs/reviews            # continue an interrupted run
    cplxnet evaluate runs/reviews [--data other.tsv]
    cplxnet predict runs/reviews "a gorgeous, witty film" --file more.txt
    cplxnet inspect runs/reviews                   # plots: what the run learned about position
    torchrun --nproc_per_node=2 -m cplxnet train --data trec   # data-parallel on CPU (gloo)

Every expected problem (a bad file, an unknown name, an existing run folder, ...) ends the
command with one ``cplxnet: error: ...`` line on stderr and exit status 1, never a traceback
(under torchrun the launcher adds its own report: see :func:`cplxnet.cli.options.fail`). SIGTERM
ends a command as Ctrl-C does (exit status 130).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..engine.runtime import sigterm_as_interrupt
from .evaluate import add_evaluate_command, add_predict_command, cmd_evaluate, cmd_predict
from .options import EXIT_ERROR, EXIT_INTERRUPTED, CLIError, check_folder_arguments, fail
from .train import add_train_command, cmd_train

__all__ = ["main", "build_parser", "CLIError", "EXIT_ERROR", "EXIT_INTERRUPTED"]


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one ``cplxnet: error: ...`` line (exit status 2), printed
    by rank 0 only under torchrun."""

    #: Options may come before or after the positional arguments (``predict RUN --json TEXT``).
    intermixed = False
    _inside = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if not self.intermixed or self._inside:
            return super().parse_known_args(args, namespace)
        self._inside = True  # parse_known_intermixed_args calls parse_known_args twice
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False

    def error(self, message: str):  # type: ignore[override]
        sys.exit(fail(f"{message}; see {self.prog} --help", 2))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cplxnet",
        description="Train, evaluate and apply complex-valued (or real) text classifiers "
        "(train, evaluate, predict) and causal language models (train --task lm, evaluate, "
        "generate); compare positional encodings over a grid of runs (compare, report).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_train_command(sub)
    add_evaluate_command(sub)
    add_predict_command(sub)
    from .compare import add_subcommands  # "compare" and "report"
    from .inspect import add_inspect_command
    from .lm import add_generate_command  # language models (cplxnet.tasks.lm)

    add_subcommands(sub)
    add_generate_command(sub)
    add_inspect_command(sub)
    return parser


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

    with sigterm_as_interrupt():  # SIGTERM ends a command as Ctrl-C does
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    distributed = False
    try:
        import torch

        if getattr(args, "threads", None) is not None:  # not every subcommand has --threads
            torch.set_num_threads(args.threads)
        from ..compare.grid.cells import CompareError
        from ..data import DataError
        from ..tasks.classify.task import RunError

        try:
            check_folder_arguments(args)  # RUN, --resume, --run-dir, --out naming a file
            if args.command == "train":
                distributed = _init_distributed()
                return cmd_train(args)
            if args.command == "evaluate":
                return cmd_evaluate(args)
            if args.command in ("compare", "report", "generate", "inspect"):
                return args.handler(args)
            return cmd_predict(args)
        except (CLIError, DataError, RunError, CompareError) as err:
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
