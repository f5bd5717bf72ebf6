"""Every default that a command's ``--help`` prints is the one the command uses.

Each command's help is read flag by flag; every phrase ``default ...`` (and ``--task lm: ...``)
is compared with a phrase built from what the engine does when the option is not given: the
options the command hands to the engine (captured by replacing the engine's entry point), the
dataclass defaults, or the parser's own default. A printed default without an entry here fails
the test, so a new option's help cannot quote a default nobody checked."""

from __future__ import annotations

import dataclasses
import re

import pytest
from test_cli_help_defaults import help_entries

import cplxnet.data
import cplxnet.tasks.classify.task
import cplxnet.tasks.lm.task
from cplxnet.cli import build_parser, main
from cplxnet.cli.compare import DEFAULT_DATA, options_from_args
from cplxnet.cli.compare_lm import lm_options_from_args
from cplxnet.cli.options import LM_PRESET
from cplxnet.compare.grid.extrapolate import DEFAULT_FACTORS, DEFAULT_TRAIN_LEN
from cplxnet.models import LM_PRESET_TRAINING
from cplxnet.tasks.classify.synthetic import SyntheticOrderTask
from cplxnet.tasks.lm.generate import DEFAULT_NEW_TOKENS


def printed(text: str) -> list[str]:
    """The default phrases of one help entry: ``default ...`` and ``--task lm: ...`` up to the
    next ``;`` or ``)``."""
    return [p.strip() for p in re.findall(r"(?:\bdefault\b|--task lm:)[^;)]*", text)]


def parser_default(command: str, flag: str):
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser = sub.choices[command]
    return next(a for a in parser._actions if flag in a.option_strings).default


@pytest.fixture
def engine_calls(monkeypatch, tmp_path):
    """What ``cplxnet train`` (classifier and ``--task lm``) hands to the engine when no
    training option is given."""
    seen: dict = {}

    def capture_data(spec, **kwargs):
        seen["spec"] = spec
        return None

    monkeypatch.setattr(cplxnet.data, "prepare_data", capture_data)
    monkeypatch.setattr(
        cplxnet.tasks.classify.task,
        "train",
        lambda config, data, run_dir, options, **kw: seen.update(classify=options),
    )
    lm_runs: list = []
    monkeypatch.setattr(
        cplxnet.tasks.lm.task,
        "train_lm",
        lambda config, source, run_dir, options, **kw: lm_runs.append((options, kw)),
    )
    assert main(["train", "--run-dir", str(tmp_path / "c"), "--quiet"]) == 0
    assert main(["train", "--task", "lm", "--run-dir", str(tmp_path / "l"), "--quiet"]) == 0
    assert main(["train", "--task", "lm", "--data", "synthetic:copy", "--run-dir",
                 str(tmp_path / "s"), "--quiet"]) == 0  # fmt: skip
    (seen["lm"], seen["lm_kw"]), (_, synthetic) = lm_runs
    seen["synthetic_context"] = synthetic["context"]
    return seen


def lm_value(name: str, value, fmt: str = "") -> str:
    """How the help names a language-model default: the preset's or the dataclass's."""
    text = "none" if value is None else f"{value:{fmt}}"
    if name in LM_PRESET_TRAINING[LM_PRESET]:
        return f"the preset's, {text} for {LM_PRESET}"
    return text


def expected_train(seen: dict) -> dict[str, list[str]]:
    c, spec = seen["classify"], seen["spec"]
    lm = seen["lm"]
    context = seen["lm_kw"]["context"]
    return {
        "--threads": ["default: torch's choice"],
        "--data": [f"default: {spec.data}"],
        "--format": ["default: from the extension"],
        "--label-field": [f"default: {spec.label_field}"],
        "--text-field": [f"default: {spec.text_field}"],
        "--split": ["default"] if spec.split == "quick" else [],
        "--split-seed": [f"default {spec.split_seed}"],
        "--min-freq": [f"default {spec.min_freq}"],
        "--max-vocab": ["default: all"] if spec.max_size is None else [],
        "--model": ["default: the 'default' preset"],
        "--complex": ["default"],
        "--epochs": [f"default {c.epochs}"],
        "--seed": [f"default {c.seed}"],
        "--batch-size": [
            f"default {c.batch_size}",
            f"--task lm: windows per step, {lm_value('batch_size', lm.batch_size)}",
        ],
        "--lr": [f"default {c.lr:g}", f"--task lm: {lm_value('lr', lm.lr, 'g')}"],
        "--weight-decay": [
            f"default {c.weight_decay:g}",
            f"--task lm: {lm_value('weight_decay', lm.weight_decay, 'g')}",
        ],
        "--clip-norm": [
            "default: no clipping" if c.clip_norm is None else f"default {c.clip_norm:g}",
            f"--task lm: {lm_value('clip_norm', lm.clip_norm, 'g')}",
        ],
        "--patience": ["default: no early stopping"] if c.patience is None else [],
        "--run-dir": ["default: runs/<data>-<model>-<time>"],
        "--task": ["default"],
        "--tokens": ["default"],
        "--context": [f"default {context}", f"default {seen['synthetic_context']}"],
        "--steps": [f"default: {lm_value('steps', lm.steps)}"],
        "--eval-every": [f"default {lm_value('eval_every', lm.eval_every)}"],
        "--monitor": [f"default {lm.monitor}"],
        "--schedule": [f"default {lm.schedule}"],
        "--warmup-steps": [f"default {lm.warmup_steps}"],
        "--min-lr-ratio": [f"default {lm.min_lr_ratio:g}"],
    }


def test_train_help_prints_the_defaults_train_uses(engine_calls, capsys):
    capsys.readouterr()
    h = help_entries(["train"], capsys)
    expected = expected_train(engine_calls)
    assert parser_default("train", "--task") is None  # "classify (default)": the engine's choice
    assert h["--task"].split("(default)")[0].rstrip().endswith("classify")
    assert h["--tokens"].split("(default")[0].rstrip().endswith("characters")
    assert engine_calls["lm_kw"]["tokens"] == "char"
    assert h["--split"].split("(default)")[0].rstrip().endswith("split")
    assert h["--complex"].endswith("(default)")
    _compare(h, expected)


def _compare(h: dict[str, str], expected: dict[str, list[str]]) -> None:
    got = {flag: printed(text) for flag, text in h.items() if printed(text)}
    assert sorted(got) == sorted(k for k, v in expected.items() if v), (
        "flags printing a default differ from the checked ones"
    )
    for flag, phrases in got.items():
        assert phrases == expected[flag], flag


def test_compare_help_prints_the_defaults_compare_uses(capsys):
    args = build_parser().parse_args(["compare"])
    classify = options_from_args(args)
    datas, text = lm_options_from_args(build_parser().parse_args(["compare", "--task", "lm"]))
    _, synthetic = lm_options_from_args(
        build_parser().parse_args(["compare", "--task", "lm", "--data", "synthetic:copy"])
    )
    from cplxnet.tasks.lm import LMOptions

    lm = dataclasses.asdict(LMOptions(**text.lm["train"]))  # what every cell trains with
    t = classify.train
    from cplxnet.engine.options import TrainOptions

    d = {f: getattr(TrainOptions, f) for f in ("batch_size", "lr", "weight_decay", "clip_norm")}
    d.update(t)
    lens = ",".join(f"{k}={v}" for k, v in DEFAULT_TRAIN_LEN.items())
    expected = {
        "--task": ["default"],
        "--data": [f"default {DEFAULT_DATA}", f"--task lm: {','.join(datas)}"],
        "--families": [f"default {args.families}"],
        "--encodings": [f"default {args.encodings}"],
        "--number": [
            "default: complex for complex-* encodings, real for the others, as the paper's Table 2"
        ],
        "--seeds": [f"default {args.seeds}"],
        "--folds": ["default"],
        "--out": ["default runs/compare"],
        "--jobs": ["default 1"],
        "--threads": ["default max(1, cores // jobs"],
        "--target": [f"default {args.target}"],
        "--executor": ["default"],
        "--retries": ["default 2"],
        "--data-files": ["default"],
        "--epochs": [f"default {t['epochs']}"],
        "--batch-size": [
            f"default {d['batch_size']}",
            f"--task lm: windows per step, {lm_value('batch_size', lm['batch_size'])}",
        ],
        "--lr": [f"default {d['lr']:g}", f"--task lm: {lm_value('lr', lm['lr'], 'g')}"],
        "--weight-decay": [
            f"default {d['weight_decay']:g}",
            f"--task lm: {lm_value('weight_decay', lm['weight_decay'], 'g')}",
        ],
        "--clip-norm": [
            "default: no clipping",
            f"--task lm: {lm_value('clip_norm', lm['clip_norm'], 'g')}",
        ],
        "--patience": ["default: no early stopping"],
        "--real-width": ["default"],
        "--split-seed": ["default 0"],
        "--min-freq": ["default 1"],
        "--max-vocab": ["default: all"],
        "--preset": [f"--task lm: one decoder preset (default {LM_PRESET}"],
        "--tokens": ["default"],
        "--context": [f"default {text.lm['context']}", f"default {synthetic.lm['context']}"],
        "--steps": [f"default: {lm_value('steps', lm['steps'])}"],
        "--eval-every": [f"default {lm_value('eval_every', lm['eval_every'])}"],
        "--monitor": [f"default {lm['monitor']}"],
        "--schedule": [f"default {lm['schedule']}"],
        "--warmup-steps": [f"default {lm['warmup_steps']}"],
        "--min-lr-ratio": [f"default {lm['min_lr_ratio']:g}"],
        "--train-len": [f"default {lens}"],
        "--factors": [f"default {','.join(map(str, DEFAULT_FACTORS))}"],
        "--synthetic-size": [f"default {SyntheticOrderTask.n_train}"],
        "--synthetic-vocab": [f"default {SyntheticOrderTask.vocab}"],
    }
    h = help_entries(["compare"], capsys)
    _compare(h, expected)
    assert h["--task"].split("(default)")[0].rstrip().endswith("classify")
    assert args.task == "classify"
    assert (
        args.executor == "local"
        and "local: this machine, --jobs processes (default)" in (h["--executor"])
    )
    assert parser_default("compare", "--data") is None  # cmd_compare reads DEFAULT_DATA
    assert (classify.real_width, text.real_width) == ("flops", "flops")
    assert "x2 the complex config's widths (equal FLOPs; the default)" in h["--real-width"]
    assert args.factors is None  # options_from_args reads DEFAULT_FACTORS under --extrapolate
    bins = build_parser().parse_args(["compare", "--extrapolate"])
    assert options_from_args(bins).extrapolate["factors"] == list(DEFAULT_FACTORS)
    bins.factors = "1,3"
    assert options_from_args(bins).extrapolate["factors"] == [1, 3]
    bins.factors = "1,x"
    with pytest.raises(ValueError, match="--factors: expected integers like 1,2,4, got '1,x'"):
        options_from_args(bins)


def test_generate_evaluate_predict_report_inspect_help(capsys):
    import inspect

    from cplxnet.tasks.lm.generate import stream_text

    sig = inspect.signature(stream_text).parameters
    assert sig["num_tokens"].default == DEFAULT_NEW_TOKENS
    threads = ["default: torch's choice"]
    cases = {
        "generate": {
            "--max-new-tokens": [f"default {DEFAULT_NEW_TOKENS}"],
            "--temperature": [f"default {sig['temperature'].default:g}"],
            "--seed": [f"default {sig['seed'].default}"],
            "--top-k": ["default: all of them"],
            "--context": ["default: the training context"],
            "--threads": threads,
        },
        "evaluate": {
            "--format": ["default: from the extension"],
            "--label-field": ["default: the run's"],
            "--text-field": ["default: the run's"],
            "--context": ["default: every evaluation length of the run"],
            "--threads": threads,
        },
        "predict": {"--threads": threads},
        "report": {
            "--out": ["default: beside"],
            "--target": [f"default {parser_default('report', '--target')}"],
        },
        "inspect": {
            "--out": ["default RUN/inspect"],
            "--samples": [f"default {parser_default('inspect', '--samples')}"],
            "--threads": threads,
        },
    }
    for command, expected in cases.items():
        _compare(help_entries([command], capsys), expected)
    assert parser_default("generate", "--temperature") == sig["temperature"].default
    assert parser_default("generate", "--seed") == sig["seed"].default
    assert parser_default("generate", "--top-k") is sig["top_k"].default is None
