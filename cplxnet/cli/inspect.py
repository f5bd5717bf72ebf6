"""``cplxnet inspect RUN``: plots and ``inspect.md`` about what a run learned about position
(:func:`cplxnet.inspect.inspect_run`)."""

from __future__ import annotations

import argparse
from typing import Any

from ..inspect import inspect_run
from .argtypes import positive_int
from .options import add_options

__all__ = ["add_inspect_command", "cmd_inspect"]


def add_inspect_command(sub: Any) -> None:
    """The ``inspect`` subcommand."""
    p = sub.add_parser(
        "inspect",
        help="plot what a run learned about position",
        description="Write PNG plots and inspect.md about position for a classifier or "
        "language-model run: complex-order frequencies, amplitudes and phases; mean attention "
        "weight against distance per layer and head (at L and 4L for language models); the "
        "position bias of bias encodings (alibi, t5, ...).",
    )
    p.add_argument("run", metavar="RUN", help="a run folder")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output folder (default RUN/inspect; only a folder inspect wrote is "
                   "reused)")  # fmt: skip
    p.add_argument("--samples", type=positive_int, default=8, metavar="N",
                   help="input sequences for the attention plots, at most 1024 (default "
                   "8)")  # fmt: skip
    add_options(p, "inspect", ("--threads",))
    p.set_defaults(handler=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    """``cplxnet inspect RUN [--out DIR]``."""
    path = inspect_run(args.run, args.out, samples=args.samples)
    print(f"wrote {path}")
    return 0
