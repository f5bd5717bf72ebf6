"""The data and training options of ``cplxnet train`` and ``cplxnet compare`` come from one
definition (:mod:`cplxnet.cli.options`): same type, default and help in both commands unless the
definition says how one differs, and the defaults they leave to the engine are the engine's."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from cplxnet.cli import build_parser
from cplxnet.cli.options import OPTIONS, Option, add_options, fail, split_list
from cplxnet.data import DataSpec
from cplxnet.engine.options import TrainOptions

COMMANDS = ("train", "compare")


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _actions(name: str) -> dict[str, argparse.Action]:
    return {flag: a for a in _subparser(name)._actions for flag in a.option_strings}


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_exactly_the_options_defined_for_it(command):
    actions = _actions(command)
    for flag, option in OPTIONS.items():
        if command in option.commands:
            action = actions[flag]
            expected = option.arguments(command)
            assert action.help == expected["help"], flag
            assert action.default is None, flag  # "not given": the engine's default applies
            assert action.type is expected.get("type"), flag
            assert action.choices == expected.get("choices"), flag
            assert action.dest == expected.get("dest", flag[2:].replace("-", "_")), flag


def test_options_of_both_commands_are_the_same_unless_said_otherwise():
    train, compare = _actions("train"), _actions("compare")
    shared = [o for o in OPTIONS.values() if set(COMMANDS) <= set(o.commands)]
    assert len(shared) >= 14
    for option in shared:
        a, b = train[option.flag], compare[option.flag]
        differs = {k for c in COMMANDS for k in option.per_command.get(c, {})}
        for attr in ("type", "default", "choices", "const", "nargs", "metavar", "help", "dest"):
            if attr not in differs:
                assert getattr(a, attr) == getattr(b, attr), (option.flag, attr)
        assert type(a) is type(b), option.flag  # the same action (store, store_true, append)


def test_the_set_option_keeps_each_commands_destination():
    assert _subparser("train").parse_args(["--set", "a=1"]).set == ["a=1"]
    assert _subparser("compare").parse_args(["--set", "a=1", "--set", "b=2"]).sets == ["a=1", "b=2"]


def test_help_texts_quote_the_engine_defaults():
    defaults = TrainOptions()
    assert f"default {defaults.epochs}" in OPTIONS["--epochs"].help
    assert f"default {defaults.batch_size}" in OPTIONS["--batch-size"].help
    assert f"default {defaults.lr:g}" in OPTIONS["--lr"].help
    assert f"default {defaults.seed}" in OPTIONS["--seed"].help
    assert f"default {DataSpec().split_seed}" in OPTIONS["--split-seed"].help
    assert f"default {DataSpec().min_freq}" in OPTIONS["--min-freq"].help


def test_the_documented_training_defaults():
    """The defaults README and --help state (a changed default changes every run's result)."""
    d = TrainOptions()
    assert (d.epochs, d.batch_size, d.lr, d.weight_decay, d.seed) == (10, 50, 1e-3, 0.0, 0)
    assert (d.clip_norm, d.patience, d.max_steps) == (None, None, None)
    assert d.bucket and d.sparse and not d.compile and d.eval_batch_size == 256


def test_no_flags_give_the_engine_defaults_in_both_commands():
    import cplxnet.models as models
    from cplxnet.cli.compare import options_from_args
    from cplxnet.cli.train import train_options

    args = build_parser().parse_args(["train"])
    given = {f: getattr(args, f) for f in ("epochs", "batch_size", "lr", "patience", "seed")}
    assert train_options(None, given, models) == TrainOptions()
    grid = options_from_args(build_parser().parse_args(["compare"]))
    assert TrainOptions(**grid.train) == TrainOptions()
    assert grid.data == {} and grid.sets == {} and grid.vectors is None


def test_given_values_reach_both_commands_alike():
    argv = [
        "--epochs", "3", "--batch-size", "7", "--lr", "0.5", "--weight-decay", "0.25",
        "--clip-norm", "2", "--patience", "2", "--max-steps", "9", "--dense",
        "--split-seed", "0", "--limit", "5", "--max-len", "6", "--min-freq", "2",
        "--max-vocab", "8", "--clean",
    ]  # fmt: skip
    train = build_parser().parse_args(["train", *argv])
    compare = build_parser().parse_args(["compare", *argv])
    for name in ("epochs", "batch_size", "lr", "weight_decay", "clip_norm", "patience",
                 "max_steps", "dense", "split_seed", "limit", "max_len", "min_freq",
                 "max_vocab", "clean"):  # fmt: skip
        assert getattr(train, name) == getattr(compare, name), name
    assert train.split_seed == 0 and train.dense is True and train.clean is True
    from cplxnet.cli.compare import options_from_args

    grid = options_from_args(compare)
    assert grid.train == {
        "epochs": 3, "batch_size": 7, "lr": 0.5, "weight_decay": 0.25, "clip_norm": 2.0,
        "patience": 2, "max_steps": 9, "sparse": False,
    }  # fmt: skip
    assert grid.data == {
        "split_seed": 0, "limit": 5, "max_len": 6, "min_freq": 2, "max_size": 8, "clean": True,
    }  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
def test_help_lists_every_option_of_the_command(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    out = capsys.readouterr().out
    for flag, option in OPTIONS.items():
        if command in option.commands:
            assert f"{flag} " in out, flag


def test_compare_has_none_of_the_train_only_options():
    """(compare's own --data, a list of data sets, is one of its grid options.)"""
    compare = _actions("compare")
    for flag, option in OPTIONS.items():
        if "compare" not in option.commands and flag != "--data":
            assert flag not in compare, flag


def test_an_option_is_added_only_to_its_commands():
    parser = argparse.ArgumentParser()
    with pytest.raises(ValueError, match="--compile is not an option of cplxnet compare"):
        add_options(parser, "compare", ("--compile",))
    option = Option("--x", "shared help", {"type": int}, per_command={"b": {"help": "own"}},
                    commands=("a", "b"))  # fmt: skip
    assert option.arguments("a") == {"default": None, "help": "shared help", "type": int}
    assert option.arguments("b") == {"default": None, "help": "own", "type": int}


def test_fail_and_split_list(capsys, monkeypatch):
    assert split_list(" a, ,b ,c,") == ["a", "b", "c"]
    assert fail("two\nlines") == 1
    assert capsys.readouterr().err == "cplxnet: error: two lines\n"
    monkeypatch.setenv("RANK", "1")
    assert fail("quiet", 130) == 130
    assert capsys.readouterr().err == ""


def test_every_train_option_field_has_a_flag():
    """Each TrainOptions field a user sets is a flag of cplxnet train (bucket and
    eval_batch_size are fixed by the engine; sparse is --dense)."""
    flags = set(_actions("train"))
    for f in dataclasses.fields(TrainOptions):
        if f.name in ("bucket", "eval_batch_size"):
            continue
        flag = "--dense" if f.name == "sparse" else "--" + f.name.replace("_", "-")
        assert flag in flags, f.name
