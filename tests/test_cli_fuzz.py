"""Fuzz every value-taking option of every command with an empty, a negative, a huge, a
non-numeric and a malformed value: each case ends at once with one ``cplxnet: error:`` line on
stderr, no traceback, exit status 2 (a usage error: the value is checked where it is parsed).

The table is read from the parser itself (every option with a ``type=`` check or ``choices``,
for ``train``, ``train --task lm``, ``evaluate``, ``predict``, ``generate``, ``compare``,
``report``), so an option added later is fuzzed too. Free-form options (paths, names, encoding
specs) take any text at parse time; their bad values are cases of the tests of each command.
All cases run in-process through :func:`cplxnet.cli.main`.
"""

from __future__ import annotations

import argparse

import pytest

from cplxnet.cli import build_parser, main

#: (command line before the option, subcommand name) of each command.
COMMANDS = {
    "train": (["train"], "train"),
    "train --task lm": (["train", "--task", "lm"], "train"),
    "evaluate": (["evaluate", "no-such-run"], "evaluate"),
    "predict": (["predict", "no-such-run", "a text"], "predict"),
    "generate": (["generate", "no-such-run", "a prompt"], "generate"),
    "compare": (["compare", "--dry-run"], "compare"),
    "compare --task lm": (["compare", "--task", "lm", "--dry-run"], "compare"),
    "report": (["report", "no-such-results"], "report"),
}
VALUES = {
    "empty": "",
    "negative": "-5",
    "huge": "1" + "0" * 30,
    "non-numeric": "abc",
    "malformed": "1,,x:=",
}
# a value that is valid for the option, so that the case is not a bad input
VALID = {
    ("train", "--lr", "negative"),  # the engine refuses it (exit 1, tests/test_cli_bad_input.py)
    ("train", "--weight-decay", "negative"),
    ("train", "--clip-norm", "negative"),
    ("compare", "--lr", "negative"),
    ("compare", "--weight-decay", "negative"),
    ("compare", "--clip-norm", "negative"),
}
HUGE_FLOAT = "1e999"  # a huge float: 1e30 is a finite number, 1e999 overflows


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _checked_options(name: str) -> list[argparse.Action]:
    return [
        a
        for a in _subparser(name)._actions
        if a.option_strings
        and a.help != argparse.SUPPRESS
        and a.nargs is None
        and (a.type is not None or a.choices is not None)
    ]


def _cases() -> list[tuple[str, str, str, str]]:
    cases = []
    for command, (_, name) in COMMANDS.items():
        for action in _checked_options(name):
            flag = max(action.option_strings, key=len)
            if flag == "--task":  # the task selects the command of the table
                continue
            for kind, value in VALUES.items():
                family = command.split()[0]
                if (family, flag, kind) in VALID:
                    continue
                if kind == "huge" and getattr(action.type, "__name__", "") in (
                    "float_value", "probability", "_temperature",
                ):  # fmt: skip
                    value = HUGE_FLOAT
                cases.append((command, flag, kind, value))
    return cases


CASES = _cases()


def test_every_command_is_fuzzed():
    counts = {c: sum(1 for case in CASES if case[0] == c) for c in COMMANDS}
    assert all(n >= 5 for n in counts.values()), counts
    assert len(CASES) > 250, len(CASES)


@pytest.mark.parametrize(
    ("command", "flag", "kind", "value"), CASES, ids=[f"{c}|{f}|{k}" for c, f, k, _ in CASES]
)
def test_bad_value_is_one_usage_line(capsys, tmp_path, command, flag, kind, value):
    before, _ = COMMANDS[command]
    argv = [*before, f"{flag}={value}"]
    if command.startswith("compare"):
        argv += ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.startswith("cplxnet: error: argument ") and err.count("\n") == 1, err
    assert flag in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
