"""The named complex-order presets of issue 4 (benchmarks/accuracy.py): they exist, build a
complex-order model of the right family, go through the CLI's config path, and every target of
the accuracy benchmark names one of them."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from types import SimpleNamespace

import pytest
import torch

import models
from cplxnet import cli

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
    config = cli._model_config(args, models)
    assert dataclasses.asdict(config) == dataclasses.asdict(models.preset_config(name))


def _load_benchmark() -> SimpleNamespace:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "benchmarks", "accuracy.py")
    spec = importlib.util.spec_from_file_location("accuracy_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_benchmark_targets_name_presets() -> None:
    bench = _load_benchmark()
    assert {t.preset for t in bench.TARGETS} == set(ACCURACY_PRESETS)
    for t in bench.TARGETS:
        assert t.data in ("mr", "trec")
        assert t.preset.startswith(t.data + "-")
