"""The named complex-order presets (benchmarks/accuracy.py): they exist, build a
complex-order model of the right family, go through the CLI's config path, and every target of
the accuracy benchmark names one of them (or Kim's real CNN, kim-cnn)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import cplxnet.models as models
from cplxnet import cli
from cplxnet.cli.model import model_config
from cplxnet.cli.train import train_options

ACCURACY_PRESETS = {
    "trec-cnn-complex-order": "cnn",
    "mr-cnn-complex-order": "cnn",
    "trec-transformer-complex-order": "transformer",
    "mr-transformer-complex-order": "transformer",
}


@pytest.mark.parametrize("name,family", sorted(ACCURACY_PRESETS.items()))
def test_preset_builds_a_complex_order_model(name: str, family: str) -> None:
    config = models.preset_config(name, vocab_size=50, num_classes=6)
    assert config.family == family
    assert config.encoding == "complex-order"
    assert config.complex
    model = models.build_model(config)
    ids = torch.randint(1, 50, (3, 7))
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[0, 5:] = True
    logits = model(ids, mask)
    assert logits.shape == (3, 6)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("name", sorted(ACCURACY_PRESETS))
def test_cli_resolves_preset(name: str) -> None:
    args = cli.build_parser().parse_args(["train", "--data", "trec", "--preset", name])
    config = model_config(args, models)
    assert dataclasses.asdict(config) == dataclasses.asdict(models.preset_config(name))


def test_benchmark_targets_name_presets(accuracy_benchmark) -> None:
    bench = accuracy_benchmark
    assert {t.preset for t in bench.TARGETS} == {*ACCURACY_PRESETS, "kim-cnn"}
    for t in bench.TARGETS:
        assert t.data in ("mr", "trec")
        assert t.preset == "kim-cnn" or t.preset.startswith(t.data + "-")
    assert {t.data for t in bench.TARGETS if t.preset == "kim-cnn"} == {"mr", "trec"}


def _options(argv: list[str]):
    args = cli.build_parser().parse_args(["train", "--data", "trec", *argv])
    given = {"epochs": args.epochs, "patience": args.patience, "lr": args.lr, "seed": args.seed}
    return train_options(args.preset, given, models)


@pytest.mark.parametrize("name", sorted(ACCURACY_PRESETS))
def test_cli_applies_preset_training_defaults(name: str) -> None:
    from cplxnet import train as engine

    expected = engine.TrainOptions(**models.PRESET_TRAINING[name])
    assert _options(["--preset", name]) == expected


def test_cli_flags_override_preset_training_defaults() -> None:
    from cplxnet import train as engine

    options = _options(["--preset", "trec-cnn-complex-order", "--epochs", "2", "--seed", "5"])
    defaults = models.PRESET_TRAINING["trec-cnn-complex-order"]
    assert options.epochs == 2 and options.seed == 5
    assert options.patience == defaults.get("patience", engine.TrainOptions().patience)


def test_presets_without_training_defaults_keep_engine_defaults() -> None:
    from cplxnet import train as engine

    assert "default" not in models.PRESET_TRAINING
    assert _options(["--preset", "default"]) == engine.TrainOptions()
    assert _options([]) == engine.TrainOptions()


def test_preset_training_names_presets_and_options() -> None:
    from cplxnet import train as engine

    fields = {f.name for f in dataclasses.fields(engine.TrainOptions)}
    for name, options in models.PRESET_TRAINING.items():
        assert name in models.PRESETS
        assert set(options) <= fields
        engine.TrainOptions(**options)  # valid values


def test_training_defaults_match_the_preset_task() -> None:
    """Classifier presets carry classifier budgets, decoder presets language-model budgets."""
    for name in models.PRESET_TRAINING:
        assert models.PRESETS[name]["family"] not in models.LM_FAMILIES, name
    for name in models.LM_PRESET_TRAINING:
        assert models.PRESETS[name]["family"] in models.LM_FAMILIES, name


def test_cli_rejects_bad_combined_options() -> None:
    with pytest.raises(cli.CLIError, match="patience"):
        train_options("trec-cnn-complex-order", {"patience": 0}, models)
