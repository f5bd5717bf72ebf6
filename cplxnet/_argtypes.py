"""argparse ``type=`` validators shared by every ``cplxnet`` subcommand (:mod:`cplxnet.cli`,
:mod:`cplxnet.compare.cli`): each turns a bad value into argparse's usage error (exit status 2)
with a message saying what was expected."""

from __future__ import annotations

import argparse

__all__ = ["positive_int", "non_negative_int", "float_value"]


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def float_value(text: str) -> float:
    """A float."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
