"""The timing harness of the benchmarks (``benchmarks/harness.py``) with its clock replaced by a
fixed one: which rows and sizes run, and that a ratio is ours over the baseline. Nothing is
timed here."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import harness  # noqa: E402

sys.path.pop(0)


def _ours() -> None:
    pass


def _base() -> None:
    pass


@pytest.fixture
def clock(monkeypatch):
    """Ours takes 3 ms per call, the baseline 2 ms."""
    seconds = {_ours: 3e-3, _base: 2e-3}
    monkeypatch.setattr(harness, "_time", lambda step, reps: seconds[step])


def test_a_ratio_is_ours_over_the_baseline(clock):
    cfg = harness.Config(rounds=3, warmup=1, min_time=0.0)
    [(name, ratio, ours_ms, base_ms)] = harness.measure(harness.Case(_ours, {"real": _base}), cfg)
    assert name == "real" and ratio == pytest.approx(1.5)
    assert ours_ms == pytest.approx(3.0) and base_ms == pytest.approx(2.0)


def test_rows_run_at_the_sizes_given_and_only_those_asked_for(clock):
    seen = []

    def build(d, cfg):
        seen.append(d)
        return harness.Case(_ours, {"real": _base})

    rows = {"a": build, "b": build}
    cfg = harness.Config(rounds=1, warmup=1, min_time=0.0, dims=(8,))
    lines = harness.run_rows(rows, cfg, only=["b"], log=lambda s: None, dims=(4, 16), column="C")
    assert seen == [4, 16]
    assert lines[2:] == ["| b | 4 | real | 1.50x | 3.00 | 2.00 |",
                         "| b | 16 | real | 1.50x | 3.00 | 2.00 |"]  # fmt: skip


@pytest.fixture
def threads():
    """one_thread_main sets torch to one thread: the worker's setting comes back after."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_the_one_thread_command_line(clock, threads, tmp_path, capsys):
    register: dict = {}
    row = harness.registry(register)

    @row("first")
    def _first(d, cfg):
        return harness.Case(_ours, {"real": _base})

    @row("second")
    def _second(d, cfg):
        return harness.Case(_base, {"real": _ours})

    out = tmp_path / "RESULTS.md"
    harness.one_thread_main(["--quick", "--only", "second", "--out", str(out)], doc="Title.",
                            rows=register, section="test rows", shapes="tiny.")  # fmt: skip
    text = out.read_text(encoding="utf-8")
    assert "## test rows" in text and "| second | 2 | real | 0.67x |" in text
    assert "| first |" not in text and "1 thread" in text and "tiny." in text
    with pytest.raises(SystemExit):
        harness.one_thread_main(["--only", "third"], doc="Title.", rows=register,
                                section="test rows", shapes="tiny.")  # fmt: skip
    assert "unknown rows ['third']" in capsys.readouterr().err
