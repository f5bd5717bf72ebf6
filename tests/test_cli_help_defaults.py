"""The defaults that ``--help`` prints are the ones the engines use: each "(default X)" of
``train``, ``compare`` and ``compare --task lm`` is compared with the dataclass or preset that
defines it and with what the command builds when the option is not given."""

from __future__ import annotations

import re

import pytest

from cplxnet.cli import build_parser, main
from cplxnet.cli.compare import options_from_args
from cplxnet.cli.compare_lm import lm_options_from_args
from cplxnet.cli.lm import default_context
from cplxnet.cli.options import LM_PRESET
from cplxnet.data import DataSpec
from cplxnet.engine.options import TrainOptions
from cplxnet.models import LM_PRESET_TRAINING
from cplxnet.tasks.lm import LMOptions
from cplxnet.tasks.lm.synthetic import SYNTHETIC_CONTEXT


def help_entries(argv: list[str], capsys) -> dict[str, str]:
    """``{flag: its help text on one line}`` of ``cplxnet ARGV --help``."""
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    entries: dict[str, str] = {}
    flag = None
    for line in capsys.readouterr().out.splitlines():
        m = re.match(r"^  (--[a-z-]+)", line)
        if m:
            flag = m.group(1)
            entries[flag] = line
        elif flag and line.startswith("     "):
            entries[flag] += " " + line.strip()
        else:
            flag = None
    return {k: re.sub(r"\s+", " ", re.sub(r"-\s+(?=[a-z])", "-", v)) for k, v in entries.items()}


def printed_default(text: str) -> str:
    m = re.search(r"\(default:? (?:the preset's, )?([^;),]+)", text)
    assert m, text
    return m.group(1).strip()


def lm_grid(argv: list[str]):
    args = build_parser().parse_args(["compare", "--task", "lm", *argv])
    return lm_options_from_args(args)[1]


def test_train_help_quotes_the_engine_defaults(capsys):
    h = help_entries(["train"], capsys)
    lm = LM_PRESET_TRAINING[LM_PRESET]
    assert printed_default(h["--epochs"]) == str(TrainOptions.epochs)
    assert printed_default(h["--seed"]) == str(TrainOptions.seed)
    assert printed_default(h["--batch-size"]) == str(TrainOptions.batch_size)
    assert printed_default(h["--lr"]) == f"{TrainOptions.lr:g}"
    assert printed_default(h["--split-seed"]) == str(DataSpec.split_seed)
    assert printed_default(h["--min-freq"]) == str(DataSpec.min_freq)
    assert printed_default(h["--steps"]) == f"{lm['steps']} for {LM_PRESET}"
    assert printed_default(h["--eval-every"]) == str(LMOptions.eval_every)
    assert printed_default(h["--context"]) == str(default_context(None, False))
    assert f"default {SYNTHETIC_CONTEXT}" in h["--context"]


@pytest.mark.parametrize("task", [[], ["--task", "lm"]])
def test_compare_help_quotes_the_grid_defaults(task, capsys):
    h = help_entries(["compare", *task], capsys)
    classify = options_from_args(build_parser().parse_args(["compare"]))
    assert printed_default(h["--epochs"]) == str(classify.train["epochs"])
    text = lm_grid([])
    synthetic = lm_grid(["--data", "synthetic:copy"])
    assert printed_default(h["--steps"]) == f"{text.lm['train']['steps']} for {LM_PRESET}"
    assert printed_default(h["--eval-every"]) == str(
        text.lm["train"].get("eval_every", LMOptions.eval_every)
    )
    assert printed_default(h["--context"]) == str(text.lm["context"])
    assert f"default {synthetic.lm['context']}" in h["--context"]
    assert "2000" not in h["--steps"]


def test_train_and_compare_share_the_language_model_options(capsys):
    train = help_entries(["train"], capsys)
    compare = help_entries(["compare"], capsys)
    for flag in ("--tokens", "--context", "--eval-every"):
        assert train[flag] == compare[flag]
    assert train["--steps"].startswith(compare["--steps"].rstrip(")"))
