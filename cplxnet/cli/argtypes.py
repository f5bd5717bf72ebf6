"""argparse ``type=`` validators shared by every ``cplxnet`` subcommand (:mod:`cplxnet.cli`,
:mod:`cplxnet.cli.compare`): each turns a bad value into argparse's usage error (exit status 2)
with a message saying what was expected."""

from __future__ import annotations

import argparse
import math

from ..engine.runtime import MAX_SEED

__all__ = [
    "positive_int",
    "non_negative_int",
    "seed_int",
    "float_value",
    "probability",
    "unit_interval",
]

#: The largest count an option takes (an int64; larger is a typo, not a plan).
MAX_COUNT = 2**63 - 1


def _count(text: str, low: int, expected: str) -> int:
    """An integer ``low .. MAX_COUNT``; ``expected`` names what was expected in the error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected at most 2**63-1, got {_clip(text)}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _count(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return _count(text, 0, "an integer >= 0")


def seed_int(text: str) -> int:
    """A random seed: an integer 0..2**63-1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed 0..2**63-1, got {_clip(text)}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed 0..2**63-1, got {_clip(text)}")
    return value


def float_value(text: str) -> float:
    """A finite float."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_clip(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text}")
    return value


def probability(text: str) -> float:
    """A dropout probability: a number in [0, 1)."""
    value = float_value(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {_clip(text)}")
    return value


def unit_interval(text: str) -> float:
    """A fraction: a number in [0, 1]."""
    value = float_value(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {_clip(text)}")
    return value


def _clip(text: str, limit: int = 40) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."
