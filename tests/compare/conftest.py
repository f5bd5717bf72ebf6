"""Fixtures of the comparison tests: tiny budgets, tiny data files; puts this folder on sys.path
for ``compare_helpers``."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from compare_helpers import tiny_options  # noqa: E402

from cplxnet.compare import GridOptions  # noqa: E402


@pytest.fixture
def options() -> GridOptions:
    return tiny_options()


@pytest.fixture
def length_tsv(tmp_path):
    """A labelled file whose texts have known lengths 1..12 tokens (two labels)."""
    path = tmp_path / "lengths.tsv"
    lines = ["label\ttext"]
    for i in range(120):
        n = 1 + i % 12
        words = " ".join(f"w{(i + k) % 7}" for k in range(n))
        lines.append(f"{'pos' if i % 2 else 'neg'}\t{words}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)
