"""``cplxnet train --encoding NAME:option=value`` (as ``cplxnet compare``, combinations too) and
``--set FIELD=VALUE`` for model fields; one error line for every bad option or field."""

from __future__ import annotations

import json
import os

import pytest
import test_train_zoo as toy

import cplxnet.models as zoo
from cplxnet.cli import build_parser, main
from cplxnet.cli.model import model_config

TINY_TF = [
    "--model", "transformer", "--d-model", "8", "--set", "transformer.num_heads=2",
    "--set", "dim_feedforward=8", "--epochs", "1", "--quiet", "--threads", "1",
]  # fmt: skip


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return toy.write_toy_tsv(tmp_path_factory.mktemp("cli-enc") / "toy.tsv", n=60)


def config_of(*argv):
    return model_config(build_parser().parse_args(["train", *argv]), zoo)


def test_train_a_combined_encoding_with_member_options_and_sets(toy_file, tmp_path, capsys):
    run = str(tmp_path / "run")
    argv = ["train", "--data", toy_file, "--run-dir", run, *TINY_TF,
            "--encoding", "complex-order+rotary:rotary.base=500:complex-order.phase=false",
            "--set", "num_layers=2"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    with open(os.path.join(run, "config.json"), encoding="utf-8") as fh:
        model = json.load(fh)["model"]
    assert model["encoding"] == "complex-order+rotary"
    assert model["encoding_options"] == {"rotary.base": 500, "complex-order.phase": False}
    assert (model["num_layers"], model["num_heads"], model["dim_feedforward"]) == (2, 2, 8)
    capsys.readouterr()
    assert main(["predict", run, "a good film"]) == 0  # the run reloads the combination
    assert capsys.readouterr().out.count("\t") == 2


def test_encoding_options_and_sets_reach_the_config():
    c = config_of("--model", "cnn", "--encoding", "complex-order:frequency=shared",
                  "--set", "kernel_sizes=2,3", "--set", "cnn.num_filters=5")  # fmt: skip
    assert (c.encoding, c.encoding_options) == ("complex-order", {"frequency": "shared"})
    assert (c.kernel_sizes, c.num_filters) == ((2, 3), 5)
    # --encoding replaces the preset's encoding and its options
    preset = config_of("--preset", "mr-transformer-complex-order")
    assert preset.encoding_options == {"frequency": "shared"}
    replaced = config_of("--preset", "mr-transformer-complex-order", "--encoding", "t5")
    assert (replaced.encoding, replaced.encoding_options) == ("t5", {})
    # a Complex Order model variant sets its model fields; --set comes last
    variant = config_of("--model", "transformer", "--encoding", "complex-order-real-proj")
    assert (variant.encoding, variant.projection) == ("complex-order", "real")
    last = config_of("--model", "transformer", "--d-model", "16", "--set", "d_model=32")
    assert last.d_model == 32


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--model", "cnn", "--encoding", "complex-order:frequncy=shared"],
         "encoding 'complex-order' got unknown option(s) 'frequncy'; its options are: "),
        (["--model", "transformer", "--encoding", "complex-order+rotary:base=5"],
         "option 'base' must name its member: write complex-order.base=... or rotary.base=..."),
        (["--model", "transformer", "--encoding", "complex-order+rotry"],
         "unknown encoding 'rotry' in 'complex-order+rotry'"),
        (["--model", "transformer", "--encoding", "complex-order+complex-vanilla"],
         "'complex-order' and 'complex-vanilla' both act on site 'token'"),
        (["--model", "cnn", "--encoding", "complex-order:phase"],
         "option 'phase' is not key=value"),
        (["--model", "transformer", "--set", "num_layer=2"],
         "TransformerConfig: unknown field(s) num_layer; valid fields are"),
        (["--model", "transformer", "--set", "cnn.num_filters=3"],
         "--set cnn.*: the model is a 'transformer' model"),
        (["--model", "transformer", "--set", "num_layers=two"],
         "--set num_layers=two: expected an integer"),
        (["--model", "transformer", "--set", "norm_first=2"],
         "--set norm_first=2: expected true or false"),
        (["--model", "cnn", "--set", "encoding=t5"], "--set encoding: use --encoding NAME"),
        (["--model", "cnn", "--set", "complex=false"], "--set complex: use --complex or --real"),
        (["--model", "cnn", "--set", "d_model"], "expected key=value or family.key=value"),
        (["--model", "cnn", "--set", "num_filters=-3"], "num_filters must be positive"),
        (["--model", "cnn", "--encoding", "trainable:max_len=2"],
         "encoding trainable:max_len=2: max_len is not an encoding option: the model passes "
         "its own max_len to the encoding (set by --max-len"),
        (["--model", "transformer", "--encoding", "tupe:max_len=2"], "drop max_len=2"),
        (["--model", "transformer", "--encoding", "randomized:base=rotary:max_len=5"],
         "max_len is not an encoding option"),
        (["--model", "transformer", "--encoding", "complex-order+rotary:rotary.max_len=3"],
         "rotary.max_len is not an encoding option"),
        (["--model", "transformer", "--encoding", "rotary:d_model=4"],
         "d_model to the encoding (set by --d-model); drop d_model=4"),
    ],
)  # fmt: skip
def test_bad_encoding_options_and_fields_are_one_line(tmp_path, capsys, args, expected):
    run = tmp_path / "r"
    # a tiny budget, so that a check that failed to fire trains for a moment, not for minutes
    budget = ["--limit", "16", "--max-steps", "1", "--epochs", "1", "--threads", "1"]
    status = main(["train", "--run-dir", str(run), "--quiet", *budget, *args])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert expected in err
    assert not run.exists()


def test_resume_refuses_set(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path), "--set", "d_model=4"]) == 1
    assert "drop --set" in capsys.readouterr().err


def test_language_model_encoding_options_are_not_its_context(tmp_path, capsys):
    run = tmp_path / "r"
    argv = ["train", "--task", "lm", "--encoding", "trainable:max_len=2", "--run-dir", str(run),
            "--steps", "1", "--quiet", "--threads", "1"]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("cplxnet: error: ") and err.count("\n") == 1, err
    assert "max_len is not an encoding option" in err and "--context" in err
    assert not run.exists()
