"""Configs: defaults, validation, dict/JSON round trip, presets, real twins."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from cplxnet.models import (
    CONFIG_CLASSES,
    FAMILIES,
    PRESETS,
    config_from_dict,
    make_config,
    preset_config,
    real_twin,
)


def test_families_and_classes():
    assert set(FAMILIES) == {"fasttext", "cnn", "lstm", "transformer"}
    for family, cls in CONFIG_CLASSES.items():
        assert make_config(family).family == family
        assert isinstance(make_config(family), cls)


def test_paper_transformer_defaults():
    c = make_config("transformer")
    assert (c.num_layers, c.d_model, c.dim_feedforward, c.num_heads) == (1, 256, 512, 8)
    p = preset_config("paper-transformer")
    assert (p.num_layers, p.d_model, p.dim_feedforward, p.num_heads) == (1, 256, 512, 8)
    cnn = preset_config("paper-cnn")
    assert cnn.kernel_sizes == (3, 4, 5) and cnn.num_filters == 100


@pytest.mark.parametrize("family", ["fasttext", "cnn", "lstm", "transformer"])
def test_round_trip_asdict_and_json(family):
    c = make_config(
        family,
        vocab_size=77,
        num_classes=5,
        complex=False,
        encoding="sinusoidal",
        encoding_options={"base": 100.0},
        readout="concat",
    )
    d = dataclasses.asdict(c)
    assert d["family"] == family
    assert config_from_dict(d) == c
    assert config_from_dict(json.loads(json.dumps(d))) == c  # tuples come back as lists
    assert config_from_dict(c.to_dict()) == c


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_build_configs_and_round_trip(name):
    c = preset_config(name, vocab_size=100, num_classes=2)
    assert c.family == PRESETS[name]["family"]
    assert config_from_dict(json.loads(json.dumps(dataclasses.asdict(c)))) == c


def test_preset_overrides_and_errors():
    c = preset_config("paper-cnn", num_filters=7, complex=False)
    assert c.num_filters == 7 and not c.complex
    with pytest.raises(ValueError, match="unknown preset"):
        preset_config("nope")
    with pytest.raises(ValueError, match="preset 'paper-cnn' is a 'cnn' model"):
        preset_config("paper-cnn", family="lstm")


def test_make_config_errors_name_the_problem():
    with pytest.raises(ValueError, match="unknown model family 'rnn'"):
        make_config("rnn")
    with pytest.raises(TypeError, match="unknown field.*num_filtres.*valid fields"):
        make_config("cnn", num_filtres=3)
    with pytest.raises(ValueError, match="readout"):
        make_config("cnn", readout="phase")
    with pytest.raises(ValueError, match="not divisible by num_heads"):
        make_config("transformer", d_model=10, num_heads=4)
    with pytest.raises(ValueError, match="padding_idx"):
        make_config("fasttext", vocab_size=5, padding_idx=5)
    with pytest.raises(ValueError, match="dropout"):
        make_config("fasttext", dropout=1.0)
    with pytest.raises(ValueError, match="pooling"):
        make_config("lstm", pooling="last")
    with pytest.raises(ValueError, match="family 'cnn' given with family='lstm'"):
        make_config("cnn", family="lstm")
    with pytest.raises(ValueError, match="'family' key"):
        config_from_dict({"d_model": 3})


def test_lstm_hidden_defaults_to_d_model():
    assert make_config("lstm", d_model=40).hidden_size == 40


@pytest.mark.parametrize("family", ["fasttext", "cnn", "lstm", "transformer"])
def test_real_twin_scales_widths(family):
    c = make_config(family, d_model=64)
    flops = real_twin(c)
    assert not flops.complex and c.complex
    for name in c.width_fields:
        assert getattr(flops, name) == 2 * getattr(c, name)
    same = real_twin(c, match="width")
    assert all(getattr(same, n) == getattr(c, n) for n in c.width_fields)
    params = real_twin(c, match="params")
    for name in c.width_fields:
        assert abs(getattr(params, name) - math.sqrt(2) * getattr(c, name)) <= 2 * getattr(
            c, "num_heads", 1
        )
    assert params.d_model % (2 * getattr(c, "num_heads", 1)) == 0
    # everything but the widths and the number field is kept
    keep = {f.name for f in dataclasses.fields(c)} - set(c.width_fields) - {"complex"}
    assert all(getattr(flops, n) == getattr(c, n) for n in keep)
    assert real_twin(flops) == flops
    with pytest.raises(ValueError, match="match"):
        real_twin(c, match="memory")


def test_choices_are_the_library_tuples():
    """Configs validate against cplxnet's own tuples (not copies): every activation the
    factory knows is accepted by both families that take one, and unknown ones fail early."""
    import cplxnet.nn as cnn

    for name in cnn.ACTIVATIONS:
        make_config("cnn", activation=name)
        make_config("transformer", activation=name)
    with pytest.raises(ValueError, match="TransformerConfig: unknown activation 'swish'"):
        make_config("transformer", activation="swish")
    with pytest.raises(ValueError, match="CNNConfig: unknown activation 'swish'"):
        make_config("cnn", activation="swish")
    with pytest.raises(ValueError, match="LSTMConfig: unknown gate 'tanh'; valid: 'split'"):
        make_config("lstm", gate="tanh")
    with pytest.raises(ValueError, match="unknown score 'dot'; valid: 'real', 'modulus'"):
        make_config("transformer", score="dot")
    with pytest.raises(ValueError, match="unknown projection 'shared'; valid: 'complex', 'real'"):
        make_config("transformer", projection="shared")


def test_preset_configs_do_not_share_mutable_fields():
    """A preset's encoding_options dict is copied: editing one config leaves the preset alone."""
    import cplxnet.models as models

    name = next(n for n, p in models.PRESETS.items() if p.get("encoding_options"))
    a = models.preset_config(name)
    a.encoding_options["frequency"] = "changed"
    assert models.preset_config(name).encoding_options == models.PRESETS[name]["encoding_options"]
