"""The argparse types of the command line at their bounds (:mod:`cplxnet.cli.argtypes`)."""

from __future__ import annotations

import argparse

import pytest

from cplxnet.cli.argtypes import MAX_COUNT, non_negative_int, positive_int


def test_counts_take_their_lowest_value_and_refuse_the_one_below():
    assert (positive_int("1"), non_negative_int("0")) == (1, 0)
    assert positive_int(str(MAX_COUNT)) == non_negative_int(str(MAX_COUNT)) == MAX_COUNT
    for parse, text, message in [
        (positive_int, "0", "expected a positive integer, got 0"),
        (non_negative_int, "-1", "expected an integer >= 0, got -1"),
        (positive_int, "x", "expected a positive integer, got 'x'"),
        (non_negative_int, str(MAX_COUNT + 1), "expected at most 2**63-1"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=message.replace("*", r"\*")):
            parse(text)
